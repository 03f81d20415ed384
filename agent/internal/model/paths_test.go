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
		{path: "/\xc3", wantErr: "is not valid UTF-8"},
		{path: "/a\rb", wantErr: "contains control character U+000D"},
		{path: "/a\u0085", wantErr: "contains control character U+0085"},
		{path: "/a\u2028", wantErr: "contains white space U+2028"},
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
			err := validPath(tt.path)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("validPath(%q) = %v, want nil", tt.path, err)
			case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr):
				t.Fatalf("validPath(%q) = %v, want %q", tt.path, err, tt.wantErr)
			}
		})
	}
}

func TestLocationPath(t *testing.T) {
	tests := []struct {
		path     string
		pathType networkingv1.PathType
		want     string
	}{
		{"/", networkingv1.PathTypePrefix, "/"},
		{"/foo/", networkingv1.PathTypePrefix, "/foo"},
		{"/foo", networkingv1.PathTypePrefix, "/foo"},
		{"/foo/", networkingv1.PathTypeExact, "/foo/"},
		{"", networkingv1.PathTypeImplementationSpecific, "/"},
		{"/foo/", networkingv1.PathTypeImplementationSpecific, "/foo"},
	}
	for _, tt := range tests {
		t.Run(string(tt.pathType)+tt.path, func(t *testing.T) {
			got, err := locationPath(tt.path, tt.pathType)
			if err != nil || got != tt.want {
				t.Fatalf("locationPath(%q, %s) = %q, %v; want %q", tt.path, tt.pathType, got, err, tt.want)
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
		if validPath(path) != nil {
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
		if trimmed := trimPrefixPath(path); validPath(trimmed) != nil {
			t.Fatalf("trimmed %q to invalid %q: %v", path, trimmed, validPath(trimmed))
		}
	})
}
