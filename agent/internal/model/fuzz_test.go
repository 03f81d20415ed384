package model

import (
	"reflect"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
)

// FuzzBuild builds one Ingress from a fuzzed host, path, path type and
// class annotation. Build must not panic, and what it emits must be valid.
func FuzzBuild(f *testing.F) {
	f.Add("a.example.com", "/", uint8(0), testClass)
	f.Add("*.example.com", "/foo/", uint8(1), "")
	f.Add("", "", uint8(2), testClass)
	f.Add("Upper.Example", "/a;b", uint8(3), "nginx")
	f.Add("10.0.0.1", "/a b", uint8(4), testClass)
	f.Add("a.example.com", "/a//b/", uint8(1), testClass)
	f.Add("a.example.com", "relative", uint8(2), testClass)
	f.Add("a.example.com", "/a\u0085b", uint8(1), testClass)
	f.Add("a.example.com", "/\u2028/\u202e", uint8(0), testClass)
	f.Add("a.example.com", "/\xed\xa0\x80", uint8(2), testClass)
	f.Add("a\u200b.example.com", "/\u2066x\u2069", uint8(1), testClass)
	f.Fuzz(func(t *testing.T, host, path string, pathTypeChoice uint8, class string) {
		var pathType *networkingv1.PathType
		switch pathTypeChoice % 5 {
		case 0:
			pathType = exactType
		case 1:
			pathType = prefixType
		case 2:
			pathType = implType
		case 3:
			pathType = pathTypeOf(networkingv1.PathType(path))
		}
		ing := newIngress("default", "fuzz", noClassField(), annotation(legacyClassAnnotation, class),
			rule(host, httpPath(pathType, path, backend("web", 80))),
			defaultBackendTo(backend("web", "http")))
		s := snapshotOf(ing)
		s.WatchWithoutClass = true

		m, problems := Build(s)
		again, againProblems := Build(s)
		if !reflect.DeepEqual(m, again) || !reflect.DeepEqual(problems, againProblems) {
			t.Fatal("two builds of one snapshot differ")
		}
		backends := make(map[string]bool)
		for _, b := range m.Backends.Slice() {
			backends[b.Name] = true
			if b.Endpoints == nil {
				t.Fatalf("backend %s has nil endpoints", b.Name)
			}
		}
		for _, server := range append([]*Server{&m.Default}, m.Servers.Slice()...) {
			if server.Host != "" && validHost(server.Host) != "" {
				t.Fatalf("emitted invalid host %q", server.Host)
			}
			for _, l := range server.Locations {
				if reason := validPath(l.Path); reason != "" {
					t.Fatalf("emitted invalid path %q: %s", l.Path, reason)
				}
				if l.PathType != PathExact && l.PathType != PathPrefix {
					t.Fatalf("emitted path type %q", l.PathType)
				}
				if l.PathType == PathPrefix && l.Path != "/" && strings.HasSuffix(l.Path, "/") {
					t.Fatalf("emitted prefix %q with a trailing slash", l.Path)
				}
				if !backends[l.Backend] {
					t.Fatalf("location %q uses backend %q not in Backends", l.Path, l.Backend)
				}
			}
		}
		if m.Default.Host != "" {
			t.Fatalf("default server has host %q", m.Default.Host)
		}
	})
}
