package model

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
)

// unrenderable are characters no value may hold (package chars), with the
// words of the reason each gets.
var unrenderable = []struct{ name, char, reason string }{
	{"C1 NEL", "\u0085", "the C1 control character U+0085"},
	{"C1 CSI", "\u009b", "the C1 control character U+009B"},
	{"line separator", "\u2028", "the line separator U+2028"},
	{"paragraph separator", "\u2029", "the paragraph separator U+2029"},
	{"RLO", "\u202e", "the bidirectional control U+202E"},
	{"LRI", "\u2066", "the bidirectional control U+2066"},
	{"zero-width space", "\u200b", "the invisible format character U+200B"},
	{"invalid UTF-8", "\xff", "is not valid UTF-8"},
	{"encoded surrogate", "\xed\xa0\x80", "is not valid UTF-8"},
	{"ESC", "\x1b", "the control character U+001B"},
}

// Issue 25: a C1 control in a snippet passed the model and made render
// fail for every tenant. Every annotation Build reads, under both
// prefixes, with each such character inside a value: a Problem names the
// annotation and the character, and the Ingress's paths fail closed (503),
// while the neighbour is served as before.
func TestHostileUnrenderableAnnotationValues(t *testing.T) {
	values := map[string]string{ // a value each key would take, where "x" would not parse
		configurationSnippetKey: `add_header X-A "a%sb";`, // issue 25's payload
		ServerSnippetKey:        `location /x { return 200 "a%sb"; }`,
		authSnippetKey:          "auth_request_set $a $upstream_http_x%s;",
		"auth-url":              "http://auth.default.svc/%s",
		"mirror-target":         "http://mirror.default.svc/%s",
		"proxy-redirect-to":     "http://b/%s",
	}
	for _, key := range slices.Sorted(func(yield func(string) bool) {
		for _, k := range supportedAnnotations() {
			if !yield(k) {
				return
			}
		}
	}) {
		for i, bad := range unrenderable {
			full := annotationPrefixes[i%2] + key
			format, ok := values[key]
			if !ok {
				format = "a%sb"
			}
			value := fmt.Sprintf(format, bad.char)
			t.Run(full+"/"+bad.name, func(t *testing.T) {
				ing := newIngress("default", "hostile", annotation(full, value), rule("hostile.example.com", prefix("/", "web", 80)))
				m, problems := Build(hostileSnapshot([]*networkingv1.Ingress{ing}))
				want := fmt.Sprintf("annotation %s %q: ", full, clip(value))
				if !slices.ContainsFunc(problems, func(p Problem) bool {
					return p.Name == "hostile" && strings.HasPrefix(p.Reason, want) && strings.Contains(p.Reason, bad.reason) &&
						strings.Contains(p.Reason, "answer 503")
				}) {
					t.Fatalf("no problem %q…%q; problems %v", want, bad.reason, problems)
				}
				for _, l := range serverOf(m, "hostile.example.com").Locations {
					if l.AccessSettings().Denied == "" && key != "canary" {
						t.Errorf("location %s is served, want 503", l.Path)
					}
				}
				checkNeighbourUnchanged(t, m, problems)
			})
		}
	}
}

// The ConfigMaps an Ingress names (auth-proxy-set-headers,
// custom-headers) are checked entry by entry: one with a character no
// value may hold fails the Ingress closed, naming the entry.
func TestHostileUnrenderableConfigMapEntries(t *testing.T) {
	for _, key := range []string{"auth-proxy-set-headers", "custom-headers"} {
		for _, bad := range unrenderable {
			t.Run(key+"/"+bad.name, func(t *testing.T) {
				opts := []ingressOption{annotation("nginx.ingress.kubernetes.io/"+key, "headers"), rule("hostile.example.com", prefix("/", "web", 80))}
				if key == "auth-proxy-set-headers" {
					opts = append(opts, annotation("nginx.ingress.kubernetes.io/auth-url", "http://auth.default.svc/"))
				}
				s := hostileSnapshot([]*networkingv1.Ingress{newIngress("default", "hostile", opts...)})
				s.ConfigMaps = ListOf(append(s.ConfigMaps.Slice(), configMapOf("default", "headers", map[string]string{"X-A": "a" + bad.char + "b"}))...)
				m, problems := Build(s)
				if !slices.ContainsFunc(problems, func(p Problem) bool {
					return p.Name == "hostile" && strings.Contains(p.Reason, `ConfigMap default/headers: entry "X-A" `) && strings.Contains(p.Reason, bad.reason)
				}) {
					t.Fatalf("no problem naming the entry; problems %v", problems)
				}
				for _, l := range serverOf(m, "hostile.example.com").Locations {
					if l.AccessSettings().Denied == "" {
						t.Errorf("location %s is served, want 503", l.Path)
					}
				}
			})
		}
	}
}

// Issue 25: values nginx refuses at start are Problems first.
// custom-http-errors 499 (nginx: `invalid value "499"` in error_page) and
// a cipher list OpenSSL refuses in proxy-ssl-ciphers.
func TestValuesNginxRefuses(t *testing.T) {
	tests := []struct{ key, value, want string }{
		{"custom-http-errors", "404,499", `"499" is not a status code from 400 to 599 that nginx's error_page takes (not 499)`},
		{"custom-http-errors", "600", `"600" is not a status code`},
		{"proxy-ssl-ciphers", "NOTACIPHER", `names "NOTACIPHER", which is not an OpenSSL cipher or alias`},
		{"proxy-ssl-ciphers", "HIGH:-ALL", "selects no cipher"},
		{"proxy-ssl-ciphers", "TLS_AES_128_GCM_SHA256", `has '_'`},
	}
	for _, tt := range tests {
		t.Run(tt.key+"="+tt.value, func(t *testing.T) {
			full := "nginx.ingress.kubernetes.io/" + tt.key
			ing := newIngress("default", "hostile", annotation(full, tt.value),
				annotation("nginx.ingress.kubernetes.io/default-backend", "web"),
				annotation("nginx.ingress.kubernetes.io/backend-protocol", "HTTPS"),
				rule("hostile.example.com", prefix("/", "web", 80)))
			_, problems := Build(hostileSnapshot([]*networkingv1.Ingress{ing}))
			if !slices.ContainsFunc(problems, func(p Problem) bool {
				return strings.HasPrefix(p.Reason, "annotation "+full+" ") && strings.Contains(p.Reason, tt.want)
			}) {
				t.Errorf("no problem %q; problems %v", tt.want, problems)
			}
		})
	}
	for _, good := range []string{"404,503", "400,599"} {
		ing := newIngress("default", "ok", annotation("nginx.ingress.kubernetes.io/custom-http-errors", good),
			annotation("nginx.ingress.kubernetes.io/default-backend", "web"), rule("ok.example.com", prefix("/", "web", 80)))
		if _, problems := Build(hostileSnapshot([]*networkingv1.Ingress{ing})); len(problems) != 0 {
			t.Errorf("custom-http-errors %q: %v", good, problems)
		}
	}
}
