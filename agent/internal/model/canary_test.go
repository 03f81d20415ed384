package model

import (
	"strings"
	"testing"
)

func findProblem(problems []Problem, name, fragment string) bool {
	for _, p := range problems {
		if p.Name == name && strings.Contains(p.Reason, fragment) {
			return true
		}
	}
	return false
}

func TestCanarySplitsTheMainLocation(t *testing.T) {
	main := newIngress("default", "main", rule("a.test", prefix("/", "web", 80)))
	canary := newIngress("default", "main-canary", createdAt(1),
		annotation("nginx.ingress.kubernetes.io/canary", "true"),
		annotation("nginx.ingress.kubernetes.io/canary-weight", "30"),
		annotation("restysync.io/canary-by-header", "X-Canary"),
		annotation("nginx.ingress.kubernetes.io/canary-by-header-value", "yes please"),
		rule("a.test", prefix("/", "web", "http")))
	m, problems := Build(snapshotOf(main, canary))
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	if m.Servers.Len() != 1 || len(m.Servers.At(0).Locations) != 1 {
		t.Fatalf("servers %s", dump(m.Servers))
	}
	loc := m.Servers.At(0).Locations[0]
	if loc.Ingress != "default/main" || loc.Backend != "default/web:80@default/main+default/main-canary" {
		t.Errorf("location %+v: want the main Ingress's location on the split variant", loc)
	}
	byName := map[string]Backend{}
	for _, b := range m.Backends.Slice() {
		byName[b.Name] = b
	}
	split, ok := byName[loc.Backend]
	want := Policy{Canary: "default/web:http", CanaryWeight: 30, CanaryWeightTotal: 100, CanaryHeader: "X-Canary", CanaryHeaderValue: "yes please"}
	if !ok || split.PolicyValue() != want || len(split.Endpoints) != 2 {
		t.Errorf("split backend %+v, want policy %+v and the main endpoints", split, want)
	}
	if c, ok := byName["default/web:http"]; !ok || len(c.Endpoints) != 2 {
		t.Errorf("the canary backend is not in the model: %s", dump(m.Backends))
	}
}

func TestCanaryProblems(t *testing.T) {
	main := newIngress("default", "main", rule("a.test", prefix("/", "web", 80)))
	orphan := newIngress("default", "orphan", createdAt(1), annotation("restysync.io/canary", "true"),
		rule("a.test", prefix("/other", "web", 80)))
	second := newIngress("default", "second", createdAt(2), annotation("restysync.io/canary", "true"),
		annotation("restysync.io/canary-weight", "10"), rule("a.test", prefix("/", "web", 80)))
	third := newIngress("default", "third", createdAt(3), annotation("restysync.io/canary", "true"),
		rule("a.test", prefix("/", "web", 80)))
	bad := newIngress("default", "bad", createdAt(4), annotation("restysync.io/canary", "true"),
		annotation("restysync.io/canary-weight", "300"), annotation("restysync.io/canary-by-header", "X Bad"),
		annotation("restysync.io/canary-by-cookie", "a;b"), rule("b.test", prefix("/", "web", 80)))
	_, problems := Build(snapshotOf(main, orphan, second, third, bad))
	for _, want := range []struct{ name, fragment string }{
		{"orphan", "no other Ingress serves path"},
		{"third", "already has the canary default/web:80"},
		{"bad", "more than canary-weight-total"},
		{"bad", "not an HTTP header name"},
		{"bad", "not a cookie name"},
	} {
		if !findProblem(problems, want.name, want.fragment) {
			t.Errorf("no problem on %s with %q; problems: %v", want.name, want.fragment, problems)
		}
	}
}

// Snippets are refused with a reason and unknown keys reported; the rest of
// the Ingress is served.
func TestAnnotationKeysChecked(t *testing.T) {
	ing := newIngress("default", "snippety",
		annotation("nginx.ingress.kubernetes.io/configuration-snippet", "more_set_headers \"X: y\";"),
		annotation("restysync.io/server-snippet", "return 200;"),
		annotation("nginx.ingress.kubernetes.io/stream-snippet", "server {}"),
		annotation("nginx.ingress.kubernetes.io/influxdb-host", "127.0.0.1"),
		annotation("restysync.io/load-balnce", "ewma"),
		annotation("nginx.ingress.kubernetes.io/load-balance", "ewma"),
		annotation("example.com/unrelated", "x"),
		rule("a.test", prefix("/", "web", 80)))
	m, problems := Build(snapshotOf(ing))
	if m.Servers.Len() != 1 || m.Backends.At(0).PolicyValue().Algorithm != AlgorithmEWMA {
		t.Fatalf("the Ingress is not served with its supported annotations: %s", dump(m))
	}
	for _, want := range []string{
		// configuration-snippet's more_set_headers is on the allowlist.
		"annotation restysync.io/server-snippet: refused: return (line 1): answers every request of the location before its checks",
		"annotation nginx.ingress.kubernetes.io/stream-snippet: raw nginx directives are refused by design",
		"annotation nginx.ingress.kubernetes.io/influxdb-host: is not supported; ignored",
		"annotation restysync.io/load-balnce: is not supported; ignored",
	} {
		if !findProblem(problems, "snippety", want) {
			t.Errorf("no problem %q; problems: %v", want, problems)
		}
	}
	if len(problems) != 4 {
		t.Errorf("%d problems, want 4: %v", len(problems), problems)
	}
}
