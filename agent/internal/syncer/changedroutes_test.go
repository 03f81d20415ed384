package syncer

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// After each sync Lua holds exactly the routes render made, through
// random new, changed and deleted Ingresses, hosts shared between
// Ingresses, aliases that other hosts claim and www twins, with the plan
// comparing only the hosts render.Cache says may have changed (apply
// trusts plan.Next.ChangedRoutes when Lua holds the routes they are
// relative to), and render looking only at the servers model.Incremental
// says changed.
func TestLuaHoldsTheRoutesWithChangedRoutes(t *testing.T) {
	env := startNewIngressEnv(t, 20)
	defer env.stop()
	rng := rand.New(rand.NewPCG(31, 1))
	hosts := []string{"a", "b", "c", "www.a", "f1", "f2", "f3", "www.f4"}
	present := map[string]bool{}
	hinted, followed := 0, 0
	for step := range 60 {
		name := fmt.Sprintf("x%d.yaml", rng.IntN(8))
		content := ""
		if !present[name] || rng.IntN(4) > 0 {
			content = changedRoutesIngress(rng, strings.TrimSuffix(name, ".yaml"), hosts)
		}
		present[name] = content != ""
		before := env.s.lastRoutes
		env.put(t, name, content)
		if err := env.s.sync(env.ctx); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if from, _, ok := env.s.renderCache.ChangedRoutes(); ok && from.Same(before) {
			hinted++
		}
		if stats := env.s.renderCache.Stats(); !stats.Walked && !stats.Whole {
			followed++
		}
		held, err := env.nginx.Lua.Routes(env.ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := env.s.lastRoutes
		if len(held) != want.Len() {
			t.Fatalf("step %d (%s): Lua holds %d routes, render made %d", step, name, len(held), want.Len())
		}
		for r := range want.All() {
			h, ok := held[r.Host]
			if !ok || h.HTTPS != r.HTTPS || len(h.Locations) != len(r.Locations) {
				t.Fatalf("step %d (%s): Lua holds %+v for %s, render made %+v", step, name, h, r.Host, r)
			}
			for i := range r.Locations {
				if !h.Locations[i].Equal(r.Locations[i]) {
					t.Fatalf("step %d (%s): Lua holds location %+v for %s, render made %+v", step, name, h.Locations[i], r.Host, r.Locations[i])
				}
			}
		}
	}
	if hinted < 40 {
		t.Errorf("only %d of 60 syncs had render say which routes changed: the hint is tried on too few", hinted)
	}
	if followed < 40 {
		t.Errorf("only %d of 60 syncs rendered the servers the model said changed alone (render.Cache.ServersChanged): the hint is tried on too few", followed)
	}
}

// changedRoutesIngress is an Ingress of name on one or two of hosts
// (".test" added), with paths of its own, sometimes an alias of another
// of hosts or a www redirect.
func changedRoutesIngress(rng *rand.Rand, name string, hosts []string) string {
	pick := func() string { return hosts[rng.IntN(len(hosts))] + ".test" }
	var annotations string
	switch rng.IntN(3) {
	case 0:
		annotations = fmt.Sprintf("  annotations:\n    nginx.ingress.kubernetes.io/server-alias: %s\n", pick())
	case 1:
		annotations = "  annotations:\n    nginx.ingress.kubernetes.io/from-to-www-redirect: \"true\"\n"
	}
	var rules strings.Builder
	for range 1 + rng.IntN(2) {
		fmt.Fprintf(&rules, "  - host: %s\n    http:\n      paths:\n      - path: /%s-%d\n        pathType: Prefix\n        backend:\n          service:\n            name: f0\n            port:\n              number: 80\n",
			pick(), name, rng.IntN(3))
	}
	return fmt.Sprintf("apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: %s\n  namespace: default\n%sspec:\n  ingressClassName: restysync\n  rules:\n%s",
		name, annotations, rules.String())
}
