package model

import (
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestBuildClassSelection(t *testing.T) {
	const other = "restysync.io/other-controller"
	tests := []struct {
		name              string
		classes           []*networkingv1.IngressClass
		watchWithoutClass bool
		opts              []ingressOption
		wantOurs          bool
		// classProblems counts the class warnings: an IngressClass named
		// like ours of another controller, an Ingress naming two classes.
		classProblems int
	}{
		{name: "field names our class", classes: []*networkingv1.IngressClass{ingressClass(testClass, ControllerName, false)}, wantOurs: true},
		{name: "field names our class, no IngressClass object"},
		{name: "field names our class, object of another controller", classes: []*networkingv1.IngressClass{ingressClass(testClass, other, false)}, classProblems: 1},
		{name: "field names another class", opts: []ingressOption{classField("nginx")}},
		{name: "field wins over legacy annotation", opts: []ingressOption{classField("nginx"), annotation(legacyClassAnnotation, testClass)}, classProblems: 1},
		{name: "empty field, legacy annotation names our class", opts: []ingressOption{classField(""), annotation(legacyClassAnnotation, testClass)}, wantOurs: true},
		{name: "legacy annotation names our class", opts: []ingressOption{noClassField(), annotation(legacyClassAnnotation, testClass)}, wantOurs: true},
		{name: "legacy annotation names another class", opts: []ingressOption{noClassField(), annotation(legacyClassAnnotation, "nginx")}, watchWithoutClass: true},
		{
			name:    "legacy annotation does not look at the IngressClass object",
			classes: []*networkingv1.IngressClass{ingressClass(testClass, other, false)},
			opts:    []ingressOption{noClassField(), annotation(legacyClassAnnotation, testClass)}, wantOurs: true, classProblems: 1,
		},
		{name: "no class, our class is default", classes: []*networkingv1.IngressClass{ingressClass(testClass, ControllerName, true)}, opts: []ingressOption{noClassField()}, wantOurs: true},
		{
			name:    "no class, default annotation not exactly true",
			classes: []*networkingv1.IngressClass{ingressClass(testClass, ControllerName, false)},
			opts:    []ingressOption{noClassField()},
		},
		{name: "no class, default class of our name but another controller", classes: []*networkingv1.IngressClass{ingressClass(testClass, other, true)}, opts: []ingressOption{noClassField()}, classProblems: 1},
		{name: "no class, default class of our controller but another name", classes: []*networkingv1.IngressClass{ingressClass("second", ControllerName, true)}, opts: []ingressOption{noClassField()}},
		{name: "no class, no default, not watching without class", opts: []ingressOption{noClassField()}},
		{name: "no class, no default, watching without class", opts: []ingressOption{noClassField()}, watchWithoutClass: true, wantOurs: true},
		{
			name:    "no class, another controller's default wins over watching without class",
			classes: []*networkingv1.IngressClass{ingressClass(testClass, ControllerName, false), ingressClass("nginx", other, true)},
			opts:    []ingressOption{noClassField()}, watchWithoutClass: true,
		},
		{
			name:    "no class, our default wins even with another default",
			classes: []*networkingv1.IngressClass{ingressClass(testClass, ControllerName, true), ingressClass("nginx", other, true)},
			opts:    []ingressOption{noClassField()}, wantOurs: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The invalid host proves that Ingresses that are not ours are
			// ignored without problems.
			opts := append([]ingressOption{rule("a.example.com", prefix("/", "web", 80)), rule("BAD", prefix("/", "web", 80))}, tt.opts...)
			s := snapshotOf(newIngress("default", "ing", opts...))
			s.IngressClasses = ListOf(tt.classes...)
			s.WatchWithoutClass = tt.watchWithoutClass
			m, problems := Build(s)
			gotOurs := m.Servers.Len() == 1
			if gotOurs != tt.wantOurs {
				t.Fatalf("ours = %v, want %v (model %s)", gotOurs, tt.wantOurs, dump(m))
			}
			if gotOurs == (len(m.NotServed) == 1) {
				t.Errorf("ours = %v, and not served %v", gotOurs, m.NotServed)
			}
			var hostProblems []Problem
			for _, p := range problems {
				if strings.Contains(p.Reason, "BAD") {
					hostProblems = append(hostProblems, p)
				}
			}
			if !tt.wantOurs && len(hostProblems) != 0 {
				t.Fatalf("problems for an Ingress that is not ours: %v", hostProblems)
			}
			if tt.wantOurs && len(hostProblems) != 1 {
				t.Fatalf("want the one host problem, got %v", hostProblems)
			}
			// Besides those, only the class warnings (class_test.go).
			if len(problems) != len(hostProblems)+tt.classProblems {
				t.Errorf("problems %v, want %d class problems besides the host's", problems, tt.classProblems)
			}
		})
	}
}

func TestBuildHosts(t *testing.T) {
	tests := []struct {
		host string
		// wantReason is "" when the host is valid, else the start of the
		// problem's reason after the field.
		wantReason string
	}{
		{host: "example.com"},
		{host: "a-b.c1.example.com"},
		{host: "localhost"},
		{host: "*.example.com"},
		{host: "Example.com", wantReason: "must be lower case"},
		{host: "*.EXAMPLE.com", wantReason: "must be lower case"},
		{host: "10.0.0.1", wantReason: "is an IP address"},
		{host: "2001:db8::1", wantReason: "is an IP address"},
		{host: "*.*.example.com", wantReason: "a wildcard DNS-1123 subdomain"},
		{host: "foo*.example.com", wantReason: "a lowercase RFC 1123 subdomain"},
		{host: "*", wantReason: "a lowercase RFC 1123 subdomain"},
		{host: "foo_bar.example.com", wantReason: "a lowercase RFC 1123 subdomain"},
		{host: "example.com.", wantReason: "a lowercase RFC 1123 subdomain"},
		{host: "-a.example.com", wantReason: "a lowercase RFC 1123 subdomain"},
		{host: "example.com:80", wantReason: "a lowercase RFC 1123 subdomain"},
		{host: "ex ample.com", wantReason: "a lowercase RFC 1123 subdomain"},
		{host: strings.Repeat("a.", 127) + "com", wantReason: "must be no more than 253 characters"},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			m, problems := Build(snapshotOf(newIngress("default", "ing", rule(tt.host, prefix("/", "web", 80)))))
			if tt.wantReason == "" {
				want := []*Server{{Host: tt.host, Locations: []Location{loc("/", PathPrefix, "default/web:80", "default/ing")}}}
				if !reflect.DeepEqual(m.Servers.Slice(), want) || len(problems) != 0 {
					t.Fatalf("got servers %s, problems %v", dump(m.Servers), problems)
				}
				return
			}
			if m.Servers.Len() != 0 || m.Backends.Len() != 0 {
				t.Errorf("invalid host served: %s", dump(m))
			}
			prefix := fmt.Sprintf("spec.rules[0].host %q: %s", tt.host, tt.wantReason)
			if len(problems) != 1 || !strings.HasPrefix(problems[0].Reason, prefix) || !strings.HasSuffix(problems[0].Reason, "; rule left out") {
				t.Fatalf("problems = %v, want one starting %q", problems, prefix)
			}
		})
	}
}

func TestBuildPaths(t *testing.T) {
	regex := pathTypeOf("Regex")
	tests := []struct {
		name       string
		pathType   *networkingv1.PathType
		path       string
		wantPath   string
		wantType   PathType
		wantReason string
	}{
		{name: "exact keeps trailing slash", pathType: exactType, path: "/foo/", wantPath: "/foo/", wantType: PathExact},
		{name: "exact root", pathType: exactType, path: "/", wantPath: "/", wantType: PathExact},
		{name: "prefix", pathType: prefixType, path: "/foo", wantPath: "/foo", wantType: PathPrefix},
		{name: "prefix trims trailing slash", pathType: prefixType, path: "/foo/", wantPath: "/foo", wantType: PathPrefix},
		{name: "prefix root stays root", pathType: prefixType, path: "/", wantPath: "/", wantType: PathPrefix},
		{name: "implementation specific is prefix", pathType: implType, path: "/foo/bar/", wantPath: "/foo/bar", wantType: PathPrefix},
		{name: "implementation specific empty is root", pathType: implType, path: "", wantPath: "/", wantType: PathPrefix},
		{name: "missing path type is implementation specific", pathType: nil, path: "/foo/", wantPath: "/foo", wantType: PathPrefix},
		{name: "non-ASCII", pathType: prefixType, path: "/café/ü", wantPath: "/café/ü", wantType: PathPrefix},
		{name: "percent escapes", pathType: prefixType, path: "/a%20b", wantPath: "/a%20b", wantType: PathPrefix},
		{name: "dots inside names", pathType: prefixType, path: "/a.b/..c/.d", wantPath: "/a.b/..c/.d", wantType: PathPrefix},
		{name: "unknown path type", pathType: regex, path: "/foo", wantReason: `spec.rules[0].http.paths[0].pathType "Regex": is not one of Exact, Prefix, ImplementationSpecific; path left out`},
		{name: "prefix empty", pathType: prefixType, path: "", wantReason: `spec.rules[0].http.paths[0].path "": must start with "/"; path left out`},
		{name: "exact relative", pathType: exactType, path: "foo", wantReason: `spec.rules[0].http.paths[0].path "foo": must start with "/"; path left out`},
		{name: "semicolon", pathType: prefixType, path: "/a;b", wantReason: `spec.rules[0].http.paths[0].path "/a;b": contains ';'; path left out`},
		{name: "brace", pathType: prefixType, path: "/a{b", wantReason: `spec.rules[0].http.paths[0].path "/a{b": contains '{'; path left out`},
		{name: "closing brace", pathType: exactType, path: "/a}", wantReason: `spec.rules[0].http.paths[0].path "/a}": contains '}'; path left out`},
		{name: "double quote", pathType: prefixType, path: `/a"b`, wantReason: `spec.rules[0].http.paths[0].path "/a\"b": contains '"'; path left out`},
		{name: "single quote", pathType: prefixType, path: "/a'b", wantReason: `spec.rules[0].http.paths[0].path "/a'b": contains '\''; path left out`},
		{name: "backslash", pathType: prefixType, path: `/a\b`, wantReason: `spec.rules[0].http.paths[0].path "/a\\b": contains '\\'; path left out`},
		{name: "dollar", pathType: prefixType, path: "/$host", wantReason: `spec.rules[0].http.paths[0].path "/$host": contains '$'; path left out`},
		{name: "hash", pathType: prefixType, path: "/a#b", wantReason: `spec.rules[0].http.paths[0].path "/a#b": contains '#'; path left out`},
		{name: "query", pathType: prefixType, path: "/a?b=1", wantReason: `spec.rules[0].http.paths[0].path "/a?b=1": contains '?'; path left out`},
		{name: "space", pathType: prefixType, path: "/a b", wantReason: `spec.rules[0].http.paths[0].path "/a b": contains white space U+0020; path left out`},
		{name: "no-break space", pathType: prefixType, path: "/a\u00a0b", wantReason: `spec.rules[0].http.paths[0].path "/a\u00a0b": contains white space U+00A0; path left out`},
		{name: "newline", pathType: prefixType, path: "/a\nb", wantReason: `spec.rules[0].http.paths[0].path "/a\nb": contains the control character U+000A at byte 2; path left out`},
		{name: "NUL", pathType: exactType, path: "/a\x00", wantReason: `spec.rules[0].http.paths[0].path "/a\x00": contains the control character U+0000 at byte 2; path left out`},
		{name: "DEL", pathType: exactType, path: "/a\x7f", wantReason: `spec.rules[0].http.paths[0].path "/a\x7f": contains the control character U+007F at byte 2; path left out`},
		{name: "invalid UTF-8", pathType: prefixType, path: "/a\xff", wantReason: `spec.rules[0].http.paths[0].path "/a\xff": is not valid UTF-8 at byte 2; path left out`},
		{name: "double slash", pathType: prefixType, path: "/a//b", wantReason: `spec.rules[0].http.paths[0].path "/a//b": contains "//"; path left out`},
		{name: "double trailing slash", pathType: prefixType, path: "/a//", wantReason: `spec.rules[0].http.paths[0].path "/a//": contains "//"; path left out`},
		{name: "dot segment", pathType: implType, path: "/a/./b", wantReason: `spec.rules[0].http.paths[0].path "/a/./b": contains "/./"; path left out`},
		{name: "dot-dot segment", pathType: prefixType, path: "/a/../b", wantReason: `spec.rules[0].http.paths[0].path "/a/../b": contains "/../"; path left out`},
		{name: "encoded slash", pathType: prefixType, path: "/a%2Fb", wantReason: `spec.rules[0].http.paths[0].path "/a%2Fb": contains "%2F"; path left out`},
		{name: "ends in dot-dot", pathType: exactType, path: "/a/..", wantReason: `spec.rules[0].http.paths[0].path "/a/..": ends with "/.."; path left out`},
		{name: "ends in dot", pathType: exactType, path: "/a/.", wantReason: `spec.rules[0].http.paths[0].path "/a/.": ends with "/."; path left out`},
		{name: "too long", pathType: prefixType, path: "/" + strings.Repeat("a", 2048), wantReason: clipReason(fmt.Sprintf("spec.rules[0].http.paths[0].path %q: is 2049 bytes long, longer than 2048; path left out", "/"+strings.Repeat("a", 2048)))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ing := newIngress("default", "ing", rule("a.example.com", httpPath(tt.pathType, tt.path, backend("web", 80))))
			var want Model
			var wantProblems []Problem
			if tt.wantReason == "" {
				want = Model{
					Servers:  ListOf(&Server{Host: "a.example.com", Locations: []Location{matchedAs(loc(tt.wantPath, tt.wantType, "default/web:80", "default/ing"), tt.pathType)}}),
					Backends: ListOf([]Backend{{Name: "default/web:80", Endpoints: webEndpoints}}...),
				}
			} else {
				wantProblems = []Problem{ingressProblem("default", "ing", tt.wantReason)}
			}
			checkBuild(t, snapshotOf(ing), want, wantProblems)
		})
	}
}

// matchedAs gives l the MatchReason of an ImplementationSpecific (or
// missing) path type, matched as Prefix.
func matchedAs(l Location, written *networkingv1.PathType) Location {
	if written == nil || *written == networkingv1.PathTypeImplementationSpecific {
		l.MatchReason = matchImplementationSpecific
	}
	return l
}

func TestBuildMerge(t *testing.T) {
	web := "default/web:80"
	tests := []struct {
		name         string
		ingresses    []*networkingv1.Ingress
		want         Model
		wantProblems []Problem
	}{
		{
			name: "two Ingresses on one host merge into one server",
			ingresses: []*networkingv1.Ingress{
				newIngress("default", "b", rule("a.example.com", prefix("/b", "web", 80))),
				newIngress("default", "a", rule("a.example.com", prefix("/a", "web", 80), exact("/c", "web", 80))),
			},
			want: Model{
				Servers: ListOf(&Server{Host: "a.example.com", Locations: []Location{
					loc("/a", PathPrefix, web, "default/a"),
					loc("/b", PathPrefix, web, "default/b"),
					loc("/c", PathExact, web, "default/a"),
				}}),
				Backends: ListOf([]Backend{{Name: web, Endpoints: webEndpoints}}...),
			},
		},
		{
			name: "servers sorted by host, wildcard and exact hosts apart",
			ingresses: []*networkingv1.Ingress{
				newIngress("default", "a", rule("z.example.com", prefix("/", "web", 80)), rule("*.example.com", prefix("/", "web", 80)), rule("b.example.com", prefix("/", "web", 80))),
			},
			want: Model{
				Servers: ListOf(
					&Server{Host: "*.example.com", Locations: []Location{loc("/", PathPrefix, web, "default/a")}},
					&Server{Host: "b.example.com", Locations: []Location{loc("/", PathPrefix, web, "default/a")}},
					&Server{Host: "z.example.com", Locations: []Location{loc("/", PathPrefix, web, "default/a")}},
				),
				Backends: ListOf([]Backend{{Name: web, Endpoints: webEndpoints}}...),
			},
		},
		{
			name: "oldest Ingress wins a conflict",
			ingresses: []*networkingv1.Ingress{
				newIngress("default", "new", createdAt(5), rule("a.example.com", prefix("/api", "web", "http"))),
				newIngress("zzz", "old", createdAt(1), rule("a.example.com", prefix("/api", "web", 80))),
			},
			want: Model{
				Servers:  ListOf(&Server{Host: "a.example.com", Locations: []Location{loc("/api", PathPrefix, "zzz/web:80", "zzz/old")}}),
				Backends: ListOf([]Backend{{Name: "zzz/web:80", Endpoints: []Endpoint{}}}...),
			},
			wantProblems: []Problem{
				ingressProblem("default", "new", `spec.rules[0].http.paths[0].path "/api": path "/api" (Prefix) on host "a.example.com" is already served by Ingress zzz/old; path left out`),
				ingressProblem("zzz", "old", `spec.rules[0].http.paths[0].backend.service.name "web": Service zzz/web not found; the path answers 503`),
			},
		},
		{
			name: "timestamp tie broken by namespace",
			ingresses: []*networkingv1.Ingress{
				newIngress("b", "a", rule("", prefix("/x", "web", 80))),
				newIngress("a", "z", rule("", prefix("/x", "web", 80))),
			},
			want: Model{
				Default:  Server{Locations: []Location{loc("/x", PathPrefix, "a/web:80", "a/z")}},
				Backends: ListOf([]Backend{{Name: "a/web:80", Endpoints: []Endpoint{}}}...),
			},
			wantProblems: []Problem{
				ingressProblem("a", "z", `spec.rules[0].http.paths[0].backend.service.name "web": Service a/web not found; the path answers 503`),
				ingressProblem("b", "a", `spec.rules[0].http.paths[0].path "/x": path "/x" (Prefix) on the default server is already served by Ingress a/z; path left out`),
			},
		},
		{
			name: "timestamp tie broken by name",
			ingresses: []*networkingv1.Ingress{
				newIngress("default", "b", rule("a.example.com", exact("/x", "web", 80))),
				newIngress("default", "a", rule("a.example.com", exact("/x", "web", "http"))),
			},
			want: Model{
				Servers:  ListOf(&Server{Host: "a.example.com", Locations: []Location{loc("/x", PathExact, "default/web:http", "default/a")}}),
				Backends: ListOf([]Backend{{Name: "default/web:http", Endpoints: webEndpoints}}...),
			},
			wantProblems: []Problem{
				ingressProblem("default", "b", `spec.rules[0].http.paths[0].path "/x": path "/x" (Exact) on host "a.example.com" is already served by Ingress default/a; path left out`),
			},
		},
		{
			name: "trailing slash makes the same prefix",
			ingresses: []*networkingv1.Ingress{
				newIngress("default", "a", rule("a.example.com", prefix("/foo", "web", 80))),
				newIngress("default", "b", rule("a.example.com", httpPath(implType, "/foo/", backend("web", 80)))),
			},
			want: Model{
				Servers:  ListOf(&Server{Host: "a.example.com", Locations: []Location{loc("/foo", PathPrefix, web, "default/a")}}),
				Backends: ListOf([]Backend{{Name: web, Endpoints: webEndpoints}}...),
			},
			wantProblems: []Problem{
				ingressProblem("default", "b", `spec.rules[0].http.paths[0].path "/foo/": path "/foo" (Prefix) on host "a.example.com" is already served by Ingress default/a; path left out`),
			},
		},
		{
			name: "Exact and Prefix on one path are both kept, Exact first",
			ingresses: []*networkingv1.Ingress{
				newIngress("default", "a", rule("a.example.com", prefix("/foo", "web", 80))),
				newIngress("default", "b", createdAt(1), rule("a.example.com", exact("/foo", "web", 80), exact("/fo", "web", 80))),
			},
			want: Model{
				Servers: ListOf(&Server{Host: "a.example.com", Locations: []Location{
					loc("/fo", PathExact, web, "default/b"),
					loc("/foo", PathExact, web, "default/b"),
					loc("/foo", PathPrefix, web, "default/a"),
				}}),
				Backends: ListOf([]Backend{{Name: web, Endpoints: webEndpoints}}...),
			},
		},
		{
			name: "conflict inside one Ingress: the first rule wins",
			ingresses: []*networkingv1.Ingress{
				newIngress("default", "a", rule("a.example.com", prefix("/", "web", 80)), rule("a.example.com", prefix("/", "web", "http"))),
			},
			want: Model{
				Servers:  ListOf(&Server{Host: "a.example.com", Locations: []Location{loc("/", PathPrefix, web, "default/a")}}),
				Backends: ListOf([]Backend{{Name: web, Endpoints: webEndpoints}}...),
			},
			wantProblems: []Problem{
				ingressProblem("default", "a", `spec.rules[1].http.paths[0].path "/": path "/" (Prefix) on host "a.example.com" is already served by Ingress default/a; path left out`),
			},
		},
		{
			name: "host-less rules of several Ingresses merge into the default server",
			ingresses: []*networkingv1.Ingress{
				newIngress("default", "a", rule("", prefix("/a", "web", 80))),
				newIngress("default", "b", rule("", exact("/b", "web", 80))),
			},
			want: Model{
				Default:  Server{Locations: []Location{loc("/a", PathPrefix, web, "default/a"), loc("/b", PathExact, web, "default/b")}},
				Backends: ListOf([]Backend{{Name: web, Endpoints: webEndpoints}}...),
			},
		},
		{
			name: "host without paths and invalid paths leave no server",
			ingresses: []*networkingv1.Ingress{
				newIngress("default", "a", hostOnly("a.example.com"), rule("b.example.com", prefix("/a;", "web", 80))),
			},
			wantProblems: []Problem{
				ingressProblem("default", "a", `spec.rules[1].http.paths[0].path "/a;": contains ';'; path left out`),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := snapshotOf(tt.ingresses...)
			checkBuild(t, s, tt.want, tt.wantProblems)
		})
	}
}

func TestBuildBackends(t *testing.T) {
	multi := service("shop", "multi", servicePort("http", 80), servicePort("metrics", 9090), servicePort("", 81))
	multiSlices := []*discoveryv1.EndpointSlice{
		endpointSlice("shop", "multi-1", "multi", discoveryv1.AddressTypeIPv4,
			ports(slicePort("metrics", 9091), slicePort("http", 8080), unnamedSlicePort(8081)),
			ready("10.1.0.3"), readyUnset("10.1.0.1", "10.1.0.2"), notReady("10.1.0.9")),
		endpointSlice("shop", "multi-2", "multi", discoveryv1.AddressTypeIPv4,
			ports(slicePort("http", 8080), slicePort("metrics", 9091), slicePort("", 8081)),
			ready("10.1.0.2"), ready("10.1.0.10")),
		// Not ours: another Service, another namespace, no label.
		endpointSlice("shop", "other-1", "other", discoveryv1.AddressTypeIPv4, ports(slicePort("http", 8080)), ready("10.9.0.1")),
		endpointSlice("default", "multi-1", "multi", discoveryv1.AddressTypeIPv4, ports(slicePort("http", 8080)), ready("10.9.0.2")),
		endpointSlice("shop", "unlabelled", "", discoveryv1.AddressTypeIPv4, ports(slicePort("http", 8080)), ready("10.9.0.3")),
	}
	httpEndpoints := []Endpoint{{"10.1.0.1", 8080}, {"10.1.0.10", 8080}, {"10.1.0.2", 8080}, {"10.1.0.3", 8080}}
	at := func(eps []Endpoint, port int32) []Endpoint {
		out := make([]Endpoint, len(eps))
		for i, ep := range eps {
			out[i] = Endpoint{ep.Address, port}
		}
		return out
	}
	udp := service("shop", "dns", corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP})
	external := service("shop", "external", servicePort("http", 80))
	external.Type = corev1.ServiceTypeExternalName

	six := service("shop", "six", servicePort("http", 80))
	sixSlices := []*discoveryv1.EndpointSlice{
		endpointSlice("shop", "six-1", "six", discoveryv1.AddressTypeIPv6, ports(slicePort("http", 8080)),
			ready("2001:DB8::1", "2001:db8:0::1", "10.0.0.1", "fe80::1%eth0", "::")),
		endpointSlice("shop", "six-2", "six", discoveryv1.AddressTypeIPv4, ports(slicePort("http", 8080)),
			ready("10.0.0.1", "not-an-ip", "::1", "224.0.0.1", "127.0.0.1", "0.0.0.0")),
		endpointSlice("shop", "six-3", "six", discoveryv1.AddressTypeFQDN, ports(slicePort("http", 8080)), ready("pod.example.com")),
		endpointSlice("shop", "six-4", "six", "IPv5", ports(slicePort("http", 8080)), ready("10.0.0.5")),
		endpointSlice("shop", "six-5", "six", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{{Name: ptrTo("http")}}, ready("10.0.0.6")),
		endpointSlice("shop", "six-6", "six", discoveryv1.AddressTypeIPv4, ports(slicePort("other", 8080)), ready("10.0.0.7")),
	}

	resourceBackend := networkingv1.IngressBackend{Resource: &corev1.TypedLocalObjectReference{Kind: "Bucket", Name: "static"}}
	both := backend("multi", 80)
	both.Resource = resourceBackend.Resource
	namedAndNumbered := backend("multi", 80)
	namedAndNumbered.Service.Port.Name = "http"

	tests := []struct {
		name         string
		paths        []networkingv1.HTTPIngressPath
		want         Model
		wantProblems []Problem
	}{
		{
			name:  "port by number and by name",
			paths: []networkingv1.HTTPIngressPath{prefix("/n", "multi", 80), prefix("/s", "multi", "http")},
			want: Model{
				Servers: ListOf(&Server{Host: "a.example.com", Locations: []Location{
					loc("/n", PathPrefix, "shop/multi:80", "shop/ing"),
					loc("/s", PathPrefix, "shop/multi:http", "shop/ing"),
				}}),
				Backends: ListOf([]Backend{{Name: "shop/multi:80", Endpoints: httpEndpoints}, {Name: "shop/multi:http", Endpoints: httpEndpoints}}...),
			},
		},
		{
			name:  "slice port names map service ports to target ports",
			paths: []networkingv1.HTTPIngressPath{prefix("/m", "multi", 9090), prefix("/u", "multi", 81)},
			want: Model{
				Servers: ListOf(&Server{Host: "a.example.com", Locations: []Location{
					loc("/m", PathPrefix, "shop/multi:9090", "shop/ing"),
					loc("/u", PathPrefix, "shop/multi:81", "shop/ing"),
				}}),
				Backends: ListOf([]Backend{{Name: "shop/multi:81", Endpoints: at(httpEndpoints, 8081)}, {Name: "shop/multi:9090", Endpoints: at(httpEndpoints, 9091)}}...),
			},
		},
		{
			name:  "missing Service, port number, port name, ExternalName and UDP answer 503",
			paths: []networkingv1.HTTPIngressPath{prefix("/a", "nope", 80), prefix("/b", "multi", 8080), prefix("/c", "multi", "grpc"), prefix("/d", "external", 80), prefix("/e", "dns", 53)},
			want: Model{
				Servers: ListOf(&Server{Host: "a.example.com", Locations: []Location{
					loc("/a", PathPrefix, "shop/nope:80", "shop/ing"),
					loc("/b", PathPrefix, "shop/multi:8080", "shop/ing"),
					loc("/c", PathPrefix, "shop/multi:grpc", "shop/ing"),
					loc("/d", PathPrefix, "shop/external:80", "shop/ing"),
					loc("/e", PathPrefix, "shop/dns:53", "shop/ing"),
				}}),
				Backends: ListOf([]Backend{
					{Name: "shop/dns:53", Endpoints: []Endpoint{}},
					{Name: "shop/external:80", Endpoints: []Endpoint{}},
					{Name: "shop/multi:8080", Endpoints: []Endpoint{}},
					{Name: "shop/multi:grpc", Endpoints: []Endpoint{}},
					{Name: "shop/nope:80", Endpoints: []Endpoint{}},
				}...),
			},
			wantProblems: []Problem{
				ingressProblem("shop", "ing", `spec.rules[0].http.paths[0].backend.service.name "nope": Service shop/nope not found; the path answers 503`),
				ingressProblem("shop", "ing", `spec.rules[0].http.paths[1].backend.service.port.number 8080: Service shop/multi has no TCP port 8080; the path answers 503`),
				ingressProblem("shop", "ing", `spec.rules[0].http.paths[2].backend.service.port.name "grpc": Service shop/multi has no TCP port named "grpc"; the path answers 503`),
				ingressProblem("shop", "ing", `spec.rules[0].http.paths[3].backend.service.name "external": Service shop/external is of type ExternalName, which is not supported yet; the path answers 503`),
				ingressProblem("shop", "ing", `spec.rules[0].http.paths[4].backend.service.port.number 53: Service shop/dns has no TCP port 53; the path answers 503`),
			},
		},
		{
			name: "malformed backends are left out",
			paths: []networkingv1.HTTPIngressPath{
				httpPath(prefixType, "/a", resourceBackend),
				httpPath(prefixType, "/b", both),
				httpPath(prefixType, "/c", namedAndNumbered),
				httpPath(prefixType, "/d", backend("multi", nil)),
				httpPath(prefixType, "/e", backend("", 80)),
				httpPath(prefixType, "/f", networkingv1.IngressBackend{}),
				httpPath(prefixType, "/g", backend("multi", 70000)),
			},
			wantProblems: []Problem{
				ingressProblem("shop", "ing", `spec.rules[0].http.paths[0].backend.resource: resource backends are not supported; path left out`),
				ingressProblem("shop", "ing", `spec.rules[0].http.paths[1].backend: has both service and resource; only one is allowed; path left out`),
				ingressProblem("shop", "ing", `spec.rules[0].http.paths[2].backend.service.port: has both name and number; only one is allowed; path left out`),
				ingressProblem("shop", "ing", `spec.rules[0].http.paths[3].backend.service.port: needs a name or a number; path left out`),
				ingressProblem("shop", "ing", `spec.rules[0].http.paths[4].backend.service.name: is missing; path left out`),
				ingressProblem("shop", "ing", `spec.rules[0].http.paths[5].backend.service: is missing; path left out`),
				ingressProblem("shop", "ing", `spec.rules[0].http.paths[6].backend.service.port.number 70000: is not a port number; path left out`),
			},
		},
		{
			name:  "address families, invalid addresses, FQDN skipped, deduplicated",
			paths: []networkingv1.HTTPIngressPath{prefix("/", "six", "http")},
			want: Model{
				Servers: ListOf(&Server{Host: "a.example.com", Locations: []Location{loc("/", PathPrefix, "shop/six:http", "shop/ing")}}),
				Backends: ListOf([]Backend{{Name: "shop/six:http", Endpoints: []Endpoint{
					{"10.0.0.1", 8080}, {"2001:db8::1", 8080},
				}}}...),
			},
			wantProblems: []Problem{
				sliceProblem("shop", "six-1", `endpoints[0].addresses[2] "10.0.0.1": is not an IPv6 address; address left out`),
				sliceProblem("shop", "six-1", `endpoints[0].addresses[3] "fe80::1%eth0": has an IPv6 zone; address left out`),
				sliceProblem("shop", "six-1", `endpoints[0].addresses[4] "::": is not a unicast address; address left out`),
				sliceProblem("shop", "six-2", `endpoints[0].addresses[1] "not-an-ip": is not an IP address; address left out`),
				sliceProblem("shop", "six-2", `endpoints[0].addresses[2] "::1": is not an IPv4 address; address left out`),
				sliceProblem("shop", "six-2", `endpoints[0].addresses[3] "224.0.0.1": is not a unicast address; address left out`),
				refusedSliceProblem("shop", "six-2", `endpoints[0].addresses[4] "127.0.0.1" port 8080: refused: is 127.0.0.1, a loopback address, which is inside the ingress pod; address left out, the rest of the slice is used`),
				sliceProblem("shop", "six-2", `endpoints[0].addresses[5] "0.0.0.0": is not a unicast address; address left out`),
				sliceProblem("shop", "six-4", `addressType "IPv5": is not supported; slice left out`),
				sliceProblem("shop", "six-5", `ports[0] (name "http"): has no valid port number; slice left out for this port`),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := snapshotOf(newIngress("shop", "ing", rule("a.example.com", tt.paths...)))
			s.Services = ListOf(multi, udp, external, six)
			s.EndpointSlices = ListOf(append(append([]*discoveryv1.EndpointSlice{}, multiSlices...), sixSlices...)...)
			checkBuild(t, s, tt.want, tt.wantProblems)
		})
	}
}

func TestBuildReadiness(t *testing.T) {
	tests := []struct {
		name     string
		endpoint discoveryv1.Endpoint
		want     []Endpoint
	}{
		{name: "ready true", endpoint: ready("10.0.0.1"), want: []Endpoint{{"10.0.0.1", 8080}}},
		{name: "ready unset", endpoint: readyUnset("10.0.0.1"), want: []Endpoint{{"10.0.0.1", 8080}}},
		{name: "ready false", endpoint: notReady("10.0.0.1"), want: []Endpoint{}},
		{name: "ready with several addresses", endpoint: ready("10.0.0.2", "10.0.0.1", "10.0.0.2"), want: []Endpoint{{"10.0.0.1", 8080}, {"10.0.0.2", 8080}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := snapshotOf(newIngress("default", "ing", rule("a.example.com", prefix("/", "web", 80))))
			s.EndpointSlices = ListOf(
				endpointSlice("default", "web-1", "web", discoveryv1.AddressTypeIPv4, ports(slicePort("http", 8080)), tt.endpoint),
			)
			m, problems := Build(s)
			if len(problems) != 0 || m.Backends.Len() != 1 {
				t.Fatalf("got %s, problems %v", dump(m), problems)
			}
			if got := m.Backends.At(0).Endpoints; !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("endpoints = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestBuildDefaultBackend(t *testing.T) {
	web := "default/web:80"
	other := service("default", "other", servicePort("", 80))
	tests := []struct {
		name         string
		ingresses    []*networkingv1.Ingress
		want         Model
		wantProblems []Problem
	}{
		{
			name:      "no default backend leaves the default server empty",
			ingresses: []*networkingv1.Ingress{newIngress("default", "a", rule("a.example.com", prefix("/x", "web", 80)))},
			want: Model{
				Servers:  ListOf(&Server{Host: "a.example.com", Locations: []Location{loc("/x", PathPrefix, web, "default/a")}}),
				Backends: ListOf([]Backend{{Name: web, Endpoints: webEndpoints}}...),
			},
		},
		{
			name:      "only a default backend serves the default server",
			ingresses: []*networkingv1.Ingress{newIngress("default", "a", defaultBackendTo(backend("web", 80)))},
			want: Model{
				Default:  Server{Locations: []Location{loc("/", PathPrefix, web, "default/a")}},
				Backends: ListOf([]Backend{{Name: web, Endpoints: webEndpoints}}...),
			},
		},
		{
			name: "oldest default backend wins the default server",
			ingresses: []*networkingv1.Ingress{
				newIngress("default", "new", createdAt(2), defaultBackendTo(backend("web", 80))),
				newIngress("default", "old", createdAt(1), defaultBackendTo(backend("other", 80))),
			},
			want: Model{
				Default:  Server{Locations: []Location{loc("/", PathPrefix, "default/other:80", "default/old")}},
				Backends: ListOf([]Backend{{Name: "default/other:80", Endpoints: []Endpoint{}}}...),
			},
		},
		{
			name: "a host-less Prefix / rule wins over default backends",
			ingresses: []*networkingv1.Ingress{
				newIngress("default", "old", createdAt(1), defaultBackendTo(backend("other", 80))),
				newIngress("default", "new", createdAt(2), rule("", prefix("/", "web", 80), exact("/x", "web", 80))),
			},
			want: Model{
				Default:  Server{Locations: []Location{loc("/", PathPrefix, web, "default/new"), loc("/x", PathExact, web, "default/new")}},
				Backends: ListOf([]Backend{{Name: web, Endpoints: webEndpoints}}...),
			},
		},
		{
			name: "a host-less Exact / does not stop the default backend",
			ingresses: []*networkingv1.Ingress{
				newIngress("default", "a", rule("", exact("/", "web", 80)), defaultBackendTo(backend("other", 80))),
			},
			want: Model{
				Default:  Server{Locations: []Location{loc("/", PathExact, web, "default/a"), loc("/", PathPrefix, "default/other:80", "default/a")}},
				Backends: ListOf([]Backend{{Name: "default/other:80", Endpoints: []Endpoint{}}, {Name: web, Endpoints: webEndpoints}}...),
			},
		},
		{
			name: "hosts of an Ingress with a default backend get / where no rule has it",
			ingresses: []*networkingv1.Ingress{
				newIngress("default", "a", createdAt(1), defaultBackendTo(backend("other", 80)),
					rule("a.example.com", prefix("/api", "web", 80)),
					rule("b.example.com", prefix("/", "web", 80)),
					hostOnly("c.example.com"),
					rule("Bad.example.com", prefix("/", "web", 80)),
				),
				// Adds "/" to d.example.com after a's default backend was
				// considered: a has no rule there, so d keeps its own.
				newIngress("default", "b", createdAt(2), rule("a.example.com", prefix("/b", "web", 80)), rule("d.example.com", prefix("/d", "web", 80))),
			},
			want: Model{
				Servers: ListOf(
					&Server{Host: "a.example.com", Locations: []Location{
						loc("/", PathPrefix, "default/other:80", "default/a"),
						loc("/api", PathPrefix, web, "default/a"),
						loc("/b", PathPrefix, web, "default/b"),
					}},
					&Server{Host: "b.example.com", Locations: []Location{loc("/", PathPrefix, web, "default/a")}},
					&Server{Host: "c.example.com", Locations: []Location{loc("/", PathPrefix, "default/other:80", "default/a")}},
					&Server{Host: "d.example.com", Locations: []Location{loc("/d", PathPrefix, web, "default/b")}},
				),
				Default:  Server{Locations: []Location{loc("/", PathPrefix, "default/other:80", "default/a")}},
				Backends: ListOf([]Backend{{Name: "default/other:80", Endpoints: []Endpoint{}}, {Name: web, Endpoints: webEndpoints}}...),
			},
			wantProblems: []Problem{
				ingressProblem("default", "a", `spec.rules[3].host "Bad.example.com": must be lower case; rule left out`),
			},
		},
		{
			name: "a rule's Prefix / from a younger Ingress beats an older default backend",
			ingresses: []*networkingv1.Ingress{
				newIngress("default", "old", createdAt(1), defaultBackendTo(backend("other", 80)), hostOnly("a.example.com")),
				newIngress("default", "new", createdAt(2), rule("a.example.com", prefix("/", "web", 80))),
			},
			want: Model{
				Servers:  ListOf(&Server{Host: "a.example.com", Locations: []Location{loc("/", PathPrefix, web, "default/new")}}),
				Default:  Server{Locations: []Location{loc("/", PathPrefix, "default/other:80", "default/old")}},
				Backends: ListOf([]Backend{{Name: "default/other:80", Endpoints: []Endpoint{}}, {Name: web, Endpoints: webEndpoints}}...),
			},
		},
		{
			name: "on a shared host the oldest default backend wins",
			ingresses: []*networkingv1.Ingress{
				newIngress("default", "new", createdAt(2), defaultBackendTo(backend("web", 80)), rule("a.example.com", exact("/n", "web", 80))),
				newIngress("default", "old", createdAt(1), defaultBackendTo(backend("other", 80)), rule("a.example.com", exact("/o", "web", 80))),
			},
			want: Model{
				Servers: ListOf(&Server{Host: "a.example.com", Locations: []Location{
					loc("/", PathPrefix, "default/other:80", "default/old"),
					loc("/n", PathExact, web, "default/new"),
					loc("/o", PathExact, web, "default/old"),
				}}),
				Default:  Server{Locations: []Location{loc("/", PathPrefix, "default/other:80", "default/old")}},
				Backends: ListOf([]Backend{{Name: "default/other:80", Endpoints: []Endpoint{}}, {Name: web, Endpoints: webEndpoints}}...),
			},
		},
		{
			name: "an unusable default backend is left out and the next one serves",
			ingresses: []*networkingv1.Ingress{
				newIngress("default", "old", createdAt(1), defaultBackendTo(networkingv1.IngressBackend{Resource: &corev1.TypedLocalObjectReference{Kind: "Bucket", Name: "b"}})),
				newIngress("default", "new", createdAt(2), defaultBackendTo(backend("missing", "http"))),
			},
			want: Model{
				Default:  Server{Locations: []Location{loc("/", PathPrefix, "default/missing:http", "default/new")}},
				Backends: ListOf([]Backend{{Name: "default/missing:http", Endpoints: []Endpoint{}}}...),
			},
			wantProblems: []Problem{
				ingressProblem("default", "new", `spec.defaultBackend.service.name "missing": Service default/missing not found; requests sent to it answer 503`),
				ingressProblem("default", "old", `spec.defaultBackend.resource: resource backends are not supported; default backend left out`),
			},
		},
		{
			name:      "no rules and no default backend",
			ingresses: []*networkingv1.Ingress{newIngress("default", "empty")},
			wantProblems: []Problem{
				ingressProblem("default", "empty", "spec: has no rules and no default backend; nothing to serve"),
			},
		},
		{
			name: "backends only for locations: an unused default backend adds none",
			ingresses: []*networkingv1.Ingress{
				newIngress("default", "old", createdAt(1), defaultBackendTo(backend("web", 80))),
				newIngress("default", "new", createdAt(2), defaultBackendTo(backend("other", 80))),
			},
			want: Model{
				Default:  Server{Locations: []Location{loc("/", PathPrefix, web, "default/old")}},
				Backends: ListOf([]Backend{{Name: web, Endpoints: webEndpoints}}...),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := snapshotOf(tt.ingresses...)
			s.Services = ListOf(append(s.Services.Slice(), other)...)
			checkBuild(t, s, tt.want, tt.wantProblems)
		})
	}
}

// richSnapshot has a bit of everything: merges, conflicts, default
// backends, several slices, problems of every kind.
func richSnapshot() Snapshot {
	s := snapshotOf(
		newIngress("default", "a", createdAt(1), defaultBackendTo(backend("web", 80)), withTLS("tls", "a.example.com", "*.example.com"), withTLS("missing"),
			rule("a.example.com", prefix("/", "web", 80), exact("/x", "web", "http")),
			rule("*.example.com", prefix("/w/", "api", "grpc")),
			hostOnly("c.example.com")),
		newIngress("default", "b", createdAt(1), rule("a.example.com", prefix("/", "api", 8080), prefix("/b", "api", 8080))),
		newIngress("default", "c", createdAt(0), rule("", prefix("/c", "web", 80)), rule("BAD", prefix("/", "web", 80))),
		newIngress("other", "d", createdAt(3), rule("d.example.com", prefix("/a;b", "web", 80), prefix("/ok", "web", 80))),
		newIngress("other", "e", noClassField(), annotation(legacyClassAnnotation, testClass), rule("e.example.com", prefix("/", "web", 80))),
		newIngress("other", "ignored", classField("nginx"), rule("BAD", prefix("/", "web", 80))),
		newIngress("default", "empty"),
	)
	s.Services = ListOf(append(s.Services.Slice(),
		service("default", "api", servicePort("grpc", 9000), servicePort("", 8080)),
		service("other", "web", servicePort("", 80)))...)
	s.EndpointSlices = ListOf(append(s.EndpointSlices.Slice(),
		endpointSlice("default", "web-def", "web", discoveryv1.AddressTypeIPv4, ports(slicePort("http", 8080)), ready("10.0.0.3", "10.0.0.1", "bogus")),
		endpointSlice("default", "api-1", "api", discoveryv1.AddressTypeIPv6, ports(slicePort("grpc", 9001), unnamedSlicePort(8081)), ready("2001:db8::2"), readyUnset("2001:db8::1"), notReady("2001:db8::3")),
		endpointSlice("default", "api-2", "api", discoveryv1.AddressTypeIPv6, ports(slicePort("grpc", 9001), slicePort("", 8081)), ready("2001:db8::2", "10.0.0.1")),
		endpointSlice("other", "web-1", "web", discoveryv1.AddressTypeIPv4, ports(unnamedSlicePort(80)), ready("10.2.0.1")))...)
	s.Secrets = ListOf(tlsSecret("default", "tls", richPair), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "opaque"}})
	return s
}

func TestBuildDeterministic(t *testing.T) {
	s := richSnapshot()
	want, wantProblems := Build(s)
	if want.Servers.Len() == 0 || len(wantProblems) == 0 {
		t.Fatalf("rich snapshot builds too little: %s %v", dump(want), wantProblems)
	}
	rng := rand.New(rand.NewSource(1))
	for i := range 100 {
		shuffled := s
		shuffled.Ingresses = ListOf(shuffledCopy(rng, s.Ingresses.Slice())...)
		shuffled.IngressClasses = ListOf(shuffledCopy(rng, s.IngressClasses.Slice())...)
		shuffled.Services = ListOf(shuffledCopy(rng, s.Services.Slice())...)
		shuffled.EndpointSlices = ListOf(shuffledCopy(rng, s.EndpointSlices.Slice())...)
		shuffled.Secrets = ListOf(shuffledCopy(rng, s.Secrets.Slice())...)
		got, problems := Build(shuffled)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("shuffle %d: model differs:\n got %s\nwant %s", i, dump(got), dump(want))
		}
		if !reflect.DeepEqual(problems, wantProblems) {
			t.Fatalf("shuffle %d: problems differ:\n got %s\nwant %s", i, dump(problems), dump(wantProblems))
		}
	}
}

func shuffledCopy[T any](rng *rand.Rand, in []T) []T {
	out := append([]T(nil), in...)
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func TestBuildDoesNotMutateInput(t *testing.T) {
	s := richSnapshot()
	before := deepCopySnapshot(s)
	order := append([]*networkingv1.Ingress(nil), s.Ingresses.Slice()...)
	Build(s)
	if !reflect.DeepEqual(deepCopySnapshot(s), before) {
		t.Fatal("Build changed its input objects")
	}
	if !reflect.DeepEqual(order, s.Ingresses.Slice()) {
		t.Fatal("Build reordered the input slice")
	}
}

// deepCopyList is a list of deep copies of l's objects.
func deepCopyList[T interface{ DeepCopy() T }](l List[T]) List[T] {
	var out []T
	for o := range l.All() {
		out = append(out, o.DeepCopy())
	}
	return ListOf(out...)
}

func deepCopySnapshot(s Snapshot) Snapshot {
	c := s
	c.Ingresses = deepCopyList(s.Ingresses)
	c.IngressClasses = deepCopyList(s.IngressClasses)
	c.Services = deepCopyList(s.Services)
	c.EndpointSlices = deepCopyList(s.EndpointSlices)
	c.Secrets = deepCopyList(s.Secrets)
	return c
}
