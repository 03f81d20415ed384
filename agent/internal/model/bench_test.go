package model

import (
	"fmt"
	"slices"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// benchSnapshot has n Ingresses, each with its own host, one path, one
// Service and one EndpointSlice of 10 endpoints.
func benchSnapshot(n int) Snapshot {
	s := Snapshot{
		IngressClasses: ListOf(ingressClass(testClass, ControllerName, false)),
		IngressClass:   testClass,
	}
	var ingresses []*networkingv1.Ingress
	var services []*Service
	var endpointSlices []*discoveryv1.EndpointSlice
	for i := range n {
		name := fmt.Sprintf("app-%d", i)
		ingresses = append(ingresses, newIngress("default", name, createdAt(i%60),
			rule(name+".example.com", prefix("/", name, 80))))
		services = append(services, service("default", name, servicePort("http", 80)))
		endpoints := make([]discoveryv1.Endpoint, 10)
		for j := range endpoints {
			endpoints[j] = ready(fmt.Sprintf("10.%d.%d.%d", i/256%256, i%256, j+1))
		}
		endpointSlices = append(endpointSlices, endpointSlice("default", name+"-abc", name,
			discoveryv1.AddressTypeIPv4, ports(slicePort("http", 8080)), endpoints...))
	}
	s.Ingresses, s.Services, s.EndpointSlices = ListOf(ingresses...), ListOf(services...), ListOf(endpointSlices...)
	return s
}

func BenchmarkBuild(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("ingresses=%d", n), func(b *testing.B) {
			s := benchSnapshot(n)
			b.ReportAllocs()
			for b.Loop() {
				m, problems := Build(s)
				if m.Servers.Len() != n || len(problems) != 0 {
					b.Fatalf("got %d servers, problems %v", m.Servers.Len(), problems)
				}
			}
		})
	}
}

// BenchmarkBuildAnnotated is BenchmarkBuild with the annotations migrated
// Ingresses carry most (B5-annotated's proxy-body-size, timeouts, a
// rewrite, CORS), so that the cost of reading annotations shows.
func BenchmarkBuildAnnotated(b *testing.B) {
	s := benchSnapshot(1000)
	for ing := range s.Ingresses.All() {
		ing.Annotations = map[string]string{
			"nginx.ingress.kubernetes.io/proxy-body-size":    "8m",
			"nginx.ingress.kubernetes.io/proxy-read-timeout": "120",
			"nginx.ingress.kubernetes.io/ssl-redirect":       "false",
			"nginx.ingress.kubernetes.io/enable-cors":        "true",
			"nginx.ingress.kubernetes.io/rewrite-target":     "/",
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		m, problems := Build(s)
		if m.Servers.Len() != s.Ingresses.Len() || len(problems) != 0 {
			b.Fatalf("got %d servers, problems %v", m.Servers.Len(), problems)
		}
	}
}

// BenchmarkBuildGateway builds one Gateway and n HTTPRoutes, each with
// its own hostname, two rules and a Service of 10 endpoints (B9's world:
// a new route among 1,000).
func BenchmarkBuildGateway(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("httproutes=%d", n), func(b *testing.B) {
			s := benchGatewaySnapshot(n)
			b.ReportAllocs()
			for b.Loop() {
				m, problems := Build(s)
				if m.GatewayRoutes.Len() != n || len(problems) != 0 {
					b.Fatalf("got %d routes, problems %v", m.GatewayRoutes.Len(), problems)
				}
			}
		})
	}
}

// benchGatewaySnapshot is one Gateway and n HTTPRoutes, each with its
// own hostname, two rules and a Service of 10 endpoints.
func benchGatewaySnapshot(n int) Snapshot {
	ingresses := benchSnapshot(n)
	s := gwSnapshot(gw80())
	s.Services, s.EndpointSlices = ingresses.Services, ingresses.EndpointSlices
	routes := make([]*gatewayv1.HTTPRoute, 0, n)
	for i := range n {
		routes = append(routes, benchRoute(fmt.Sprintf("app-%d", i), fmt.Sprintf("app-%d", i)))
	}
	// Sorted by namespace and name, as the file source hands them out
	// (B11-route's source).
	s.Services = ListOf(slices.SortedFunc(s.Services.All(), compareNamed)...)
	s.EndpointSlices = ListOf(slices.SortedFunc(s.EndpointSlices.All(), compareNamed)...)
	s.HTTPRoutes = ListOf(slices.SortedFunc(slices.Values(routes), compareNamed)...)
	return s
}

func benchRoute(name, service string) *gatewayv1.HTTPRoute {
	return newRoute("default", name, toGW(), []string{name + ".example.com"},
		routeRule(matchList(pathMatch(gatewayv1.PathMatchPathPrefix, "/api")), backendTo("", service, 80)),
		routeRule(nil, backendTo("", service, 80)))
}

// benchChange builds with and s by turns with an Incremental that built
// s first, and checks that each build is incremental and ok.
func benchChange(b *testing.B, s, with Snapshot, ok func(m Model, next Snapshot) bool) {
	inc := NewIncremental()
	inc.Build(s)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		next := with
		if i%2 == 1 {
			next = s
		}
		i++
		m, _, path := inc.Build(next)
		if !path.Incremental || !ok(m, next) {
			b.Fatalf("path %+v, %d servers, %d Gateway routes", path, m.Servers.Len(), m.GatewayRoutes.Len())
		}
	}
}

// BenchmarkIncrementalRoute is one new HTTPRoute among n on one Gateway
// (B11-route's change) built by Incremental.
func BenchmarkIncrementalRoute(b *testing.B) {
	for _, n := range []int{1000, 10000, 50000} {
		s := benchGatewaySnapshot(n)
		b.Run(fmt.Sprintf("new-route/httproutes=%d", n), func(b *testing.B) {
			with := s
			with.HTTPRoutes = ListOf(slices.SortedFunc(slices.Values(append(s.HTTPRoutes.Slice(), benchRoute("new", "app-1"))), compareNamed)...)
			benchChange(b, s, with, func(m Model, next Snapshot) bool { return m.GatewayRoutes.Len() == next.HTTPRoutes.Len() })
		})
	}
}

// BenchmarkIncremental is one new Ingress among n (B11's change) built by
// Incremental, and, for reference, the first build of the n by
// Incremental (every island) beside Build's.
func BenchmarkIncremental(b *testing.B) {
	for _, n := range []int{1000, 10000, 50000} {
		s := benchSnapshot(n)
		b.Run(fmt.Sprintf("new-ingress/ingresses=%d", n), func(b *testing.B) {
			added := benchSnapshot(1)
			ing := added.Ingresses.At(0).DeepCopy()
			ing.Name, ing.Spec.Rules[0].Host = "new", "new.example.com"
			with := s
			with.Ingresses = ListOf(append(s.Ingresses.Slice(), ing)...)
			benchChange(b, s, with, func(m Model, next Snapshot) bool { return m.Servers.Len() == next.Ingresses.Len() })
		})
		if n > 10000 {
			continue
		}
		b.Run(fmt.Sprintf("first/ingresses=%d", n), func(b *testing.B) {
			for b.Loop() {
				NewIncremental().Build(s)
			}
		})
	}
}
