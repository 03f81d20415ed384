package model

import (
	"reflect"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
)

// routeProcessor is a front-end in a few lines, as the Gateway API's
// will be a file of its own: each of its routes, an object
// default/name, sends one path of a host to port 80 of a Service.
type routeProcessor struct {
	routes []testRoute
}

type testRoute struct {
	name, host, path, service string
}

func (p routeProcessor) Process(b *Builder) {
	for _, r := range p.routes {
		namespace, owner := "default", "default/"+r.name
		ref := backendRef{namespace: namespace, service: r.service, port: networkingv1.ServiceBackendPort{Number: 80},
			name: namespace + "/" + r.service + ":80"}
		b.resolve(ref)
		held, added := b.addRoute(r.host, Location{Path: r.path, PathType: PathPrefix, Backend: ref.name, Ingress: owner})
		if !added {
			b.problem("TestRoute", namespace, r.name, "path "+r.path+" is served by "+held.Ingress)
		}
	}
}

// FinishRoute redirects plain HTTP on hosts with TLS, as an Ingress
// without annotations does.
func (routeProcessor) FinishRoute(loc Location, host string, https bool) Location {
	loc.SSLRedirect = https
	return loc
}

func (routeProcessor) FinishModel(*Model) {}

// TestSecondProcessor shows that a front-end is a Processor and nothing
// else: its host, route and backend come out of the Builder exactly as an
// Ingress's do.
func TestSecondProcessor(t *testing.T) {
	ing := newIngress("default", "app", rule("a.example.com", prefix("/", "web", 80)))
	fromIngress, problems := Build(snapshotOf(ing))
	if fromIngress.Servers.Len() != 1 || len(problems) != 0 {
		t.Fatalf("the Ingress gave %s, problems %v", dump(fromIngress), problems)
	}

	route := routeProcessor{routes: []testRoute{{name: "app", host: "a.example.com", path: "/", service: "web"}}}
	fromRoute, problems := newBuilder(snapshotOf()).build(route)
	if !reflect.DeepEqual(fromRoute, fromIngress) || len(problems) != 0 {
		t.Errorf("the route gave\n%s\nproblems %v\nthe Ingress\n%s", dump(fromRoute), problems, dump(fromIngress))
	}
}

// TestProcessorsShareHosts runs the Ingress processor and then another:
// they share the host, and the route emitted first wins a path both
// define, as the oldest Ingress does.
func TestProcessorsShareHosts(t *testing.T) {
	ing := newIngress("default", "app", rule("a.example.com", prefix("/", "web", 80)))
	s := snapshotOf(ing)
	route := routeProcessor{routes: []testRoute{
		{name: "late", host: "a.example.com", path: "/", service: "web"},
		{name: "late", host: "a.example.com", path: "/api", service: "web"},
	}}
	m, problems := newBuilder(s).build(newIngressProcessor(s), route)

	want := []Location{loc("/", PathPrefix, "default/web:80", "default/app"), loc("/api", PathPrefix, "default/web:80", "default/late")}
	if m.Servers.Len() != 1 || !reflect.DeepEqual(m.Servers.At(0).Locations, want) {
		t.Errorf("servers:\n got %s\nwant one host with %s", dump(m.Servers), dump(want))
	}
	if m.Backends.Len() != 1 || !reflect.DeepEqual(m.Backends.At(0).Endpoints, webEndpoints) {
		t.Errorf("backends: got %s, want default/web:80 once", dump(m.Backends))
	}
	wantProblems := []Problem{{Kind: "TestRoute", Namespace: "default", Name: "late", Reason: "path / is served by default/app"}}
	if !reflect.DeepEqual(problems, wantProblems) {
		t.Errorf("problems:\n got %s\nwant %s", dump(problems), dump(wantProblems))
	}
}
