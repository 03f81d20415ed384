package model

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	networkingv1 "k8s.io/api/networking/v1"
)

func TestValidPath(t *testing.T) {
	tests := []struct {
		path    string
		wantErr string
	}{
		{path: "/"},
		{path: "/foo/bar/"},
		{path: "/a.b/..c/.d/e."},
		{path: "/~user/a-b_c+d=e&f@g:h,i!j*k(l)m%20n"},
		{path: "/日本語"},
		{path: "/" + strings.Repeat("a", 2047)},
		{path: "", wantErr: `must start with "/"`},
		{path: "foo", wantErr: `must start with "/"`},
		{path: "/" + strings.Repeat("a", 2048), wantErr: "is 2049 bytes long, longer than 2048"},
		{path: "/\xc3", wantErr: "is not valid UTF-8 at byte 1"},
		{path: "/a\rb", wantErr: "contains the control character U+000D at byte 2"},
		{path: "/a\u0085", wantErr: "contains the C1 control character U+0085 at byte 2"},
		{path: "/a\u2028", wantErr: "contains the line separator U+2028 at byte 2"},
		{path: "/a\u202eb", wantErr: "contains the bidirectional control U+202E at byte 2"},
		{path: "/a\u2066b", wantErr: "contains the bidirectional control U+2066 at byte 2"},
		{path: "/a\u200bb", wantErr: "contains the invisible format character U+200B at byte 2"},
		{path: "/a\xed\xa0\x80", wantErr: "is not valid UTF-8 at byte 2"},
		{path: "/a\u3000", wantErr: "contains white space U+3000"},
		{path: "/{", wantErr: "contains '{'"},
		{path: "/}", wantErr: "contains '}'"},
		{path: "/;", wantErr: "contains ';'"},
		{path: `/"`, wantErr: `contains '"'`},
		{path: "/'", wantErr: `contains '\''`},
		{path: `/\`, wantErr: `contains '\\'`},
		{path: "/$", wantErr: "contains '$'"},
		{path: "/#", wantErr: "contains '#'"},
		{path: "/?", wantErr: "contains '?'"},
		{path: "//", wantErr: `contains "//"`},
		{path: "/a/./", wantErr: `contains "/./"`},
		{path: "/a/../", wantErr: `contains "/../"`},
		{path: "/a%2fb", wantErr: `contains "%2f"`},
		{path: "/.", wantErr: `ends with "/."`},
		{path: "/..", wantErr: `ends with "/.."`},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			reason := validPath(tt.path)
			switch {
			case tt.wantErr == "" && reason != "":
				t.Fatalf("validPath(%q) = %q, want \"\"", tt.path, reason)
			case tt.wantErr != "" && reason != tt.wantErr:
				t.Fatalf("validPath(%q) = %q, want %q", tt.path, reason, tt.wantErr)
			}
		})
	}
}

func TestLocationPath(t *testing.T) {
	tests := []struct {
		path     string
		pathType networkingv1.PathType
		match    PathType
		want     string
	}{
		{"/", networkingv1.PathTypePrefix, PathPrefix, "/"},
		{"/foo/", networkingv1.PathTypePrefix, PathPrefix, "/foo"},
		{"/foo", networkingv1.PathTypePrefix, PathPrefix, "/foo"},
		{"/foo/", networkingv1.PathTypeExact, PathExact, "/foo/"},
		{"", networkingv1.PathTypeImplementationSpecific, PathPrefix, "/"},
		{"/foo/", networkingv1.PathTypeImplementationSpecific, PathPrefix, "/foo"},
		{"/foo/(.*)$", networkingv1.PathTypeImplementationSpecific, PathRegex, "/foo/(.*)$"},
		{"", networkingv1.PathTypeImplementationSpecific, PathRegex, "/"},
	}
	for _, tt := range tests {
		t.Run(string(tt.match)+tt.path, func(t *testing.T) {
			got, reason := locationPath(tt.path, tt.pathType, tt.match)
			if reason != "" || got != tt.want {
				t.Fatalf("locationPath(%q, %s) = %q, %q; want %q", tt.path, tt.pathType, got, reason, tt.want)
			}
		})
	}
}

// FuzzValidPath checks that every path validPath accepts is safe to put in
// nginx.conf, and stays valid once trimmed as a prefix.
func FuzzValidPath(f *testing.F) {
	for _, seed := range []string{
		"/", "/foo", "/foo/", "", "foo", "/a;b", "/a b", "/a\x00", "/a\xff", "/a//b",
		"/a/../b", "/a/..", "/a/.", "/%2F", "/${x}", "/a#b?c", "/日本", "/a\u2028", `/\"'`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, path string) {
		if validPath(path) != "" {
			return
		}
		if !strings.HasPrefix(path, "/") || len(path) > maxPathLength || !utf8.ValidString(path) {
			t.Fatalf("accepted %q", path)
		}
		for _, r := range path {
			if r < 0x20 || r == 0x7f || unicode.IsControl(r) || unicode.IsSpace(r) || strings.ContainsRune(forbiddenPathChars, r) {
				t.Fatalf("accepted %q with %U", path, r)
			}
		}
		if strings.Contains(path, "//") || strings.Contains(path, "/../") || strings.Contains(path, "/./") {
			t.Fatalf("accepted %q with a path segment nginx normalises", path)
		}
		if trimmed := trimPrefixPath(path); validPath(trimmed) != "" {
			t.Fatalf("trimmed %q to invalid %q: %v", path, trimmed, validPath(trimmed))
		}
	})
}

func TestValidRegexPath(t *testing.T) {
	for _, path := range []string{"/", "/api/v[0-9]+/", "/foo(/|$)(.*)", `/files/.+\.png$`, "/a{2,3}", `/a\nb`, `/\xff`} {
		if reason := validRegexPath(path); reason != "" {
			t.Errorf("validRegexPath(%q) = %q, want \"\"", path, reason)
		}
	}
	for path, reason := range map[string]string{
		"api/.*":                                 "must start with",
		"/foo(":                                  "not a valid regular expression",
		`/\x{zz}`:                                "not a valid regular expression",
		"/a b":                                   "U+0020",
		"/a\nb":                                  "U+000A",
		"/bad\xff":                               "not valid UTF-8",
		"/" + strings.Repeat("x", maxPathLength): "longer than",
	} {
		if got := validRegexPath(path); got == "" || !strings.Contains(got, reason) {
			t.Errorf("validRegexPath(%q) = %q, want a reason with %q", path, got, reason)
		}
	}
}
