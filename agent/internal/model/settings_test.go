package model

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
)

// Locations of like settings share one copy of each (Location.Proxy);
// zero settings are nil; another value is another copy.
func TestLocationsShareSettings(t *testing.T) {
	slow := func(name, host, timeout string) *networkingv1.Ingress {
		return newIngress("default", name, annotation(ngx+"proxy-read-timeout", timeout), annotation(ngx+"enable-cors", "true"),
			rule(host, prefix("/", "web", "http")))
	}
	m, problems := Build(snapshotOf(
		slow("a", "a.example.com", "30"), slow("b", "b.example.com", "30"), slow("c", "c.example.com", "60"),
		newIngress("default", "plain", rule("plain.example.com", prefix("/", "web", "http")))))
	if len(problems) != 0 {
		t.Fatalf("problems %v", problems)
	}
	a := locationOf(t, m, "a.example.com", "/", PathPrefix)
	b := locationOf(t, m, "b.example.com", "/", PathPrefix)
	c := locationOf(t, m, "c.example.com", "/", PathPrefix)
	plain := locationOf(t, m, "plain.example.com", "/", PathPrefix)
	if a.Proxy == nil || a.Proxy != b.Proxy || a.Access == nil || a.Access != b.Access {
		t.Errorf("a and b do not share their settings: %p %p, %p %p", a.Proxy, b.Proxy, a.Access, b.Access)
	}
	if c.Proxy == a.Proxy || c.ProxySettings().ReadTimeout != 60 || c.Access != a.Access {
		t.Errorf("c: proxy %+v (a's: %p, c's %p), access %p (a's %p)", c.ProxySettings(), a.Proxy, c.Proxy, c.Access, a.Access)
	}
	if plain.Proxy != nil || plain.Access != nil || plain.Snippet != nil || !plain.Plain() {
		t.Errorf("plain location holds settings: %+v", plain)
	}
}

// Backends of like policy share one copy; a backend with none holds nil.
func TestBackendsSharePolicy(t *testing.T) {
	ewma := func(name, service string) *networkingv1.Ingress {
		return newIngress("default", name, annotation(ngx+"load-balance", "ewma"),
			rule(name+".example.com", prefix("/", service, "http")))
	}
	// Only Service web exists: the others' backends answer 503 (a
	// Problem each), with their policies all the same.
	m, _ := Build(snapshotOf(ewma("a", "web"), ewma("b", "api"),
		newIngress("default", "plain", rule("plain.example.com", prefix("/", "other", "http")))))
	var shared []*Policy
	for _, b := range m.Backends.Slice() {
		switch {
		case b.Name == "default/other:http" && b.Policy != nil:
			t.Errorf("%s holds a policy %+v", b.Name, *b.Policy)
		case b.Name != "default/other:http":
			shared = append(shared, b.Policy)
		}
	}
	if len(shared) != 2 || shared[0] == nil || shared[0] != shared[1] || shared[0].Algorithm != AlgorithmEWMA {
		t.Errorf("backends %+v: want two sharing one ewma policy", m.Backends)
	}
}
