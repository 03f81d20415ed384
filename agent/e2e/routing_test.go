package e2e

import (
	"testing"
)

const (
	ipRouteA   = "127.0.0.91"
	ipRouteAPI = "127.0.0.92"
)

// A host's location moves between the router and a profile (an annotation
// added, a new profile, and removed, the profile retired) and a host-less
// path comes and goes, without one failed request; a new plain Ingress is
// served with no reload.
func TestRoutingTransitions(t *testing.T) {
	b := startBackends(t, ipRouteA, ipRouteAPI)
	plain := ingress("a", ingressOpts{class: "restysync", host: "a.test", paths: []path{prefix("/", "a")}})
	s := newStack(t, map[string]string{
		"classes.yaml":  ingressClasses,
		"services.yaml": service("a", b.port, ep(ipRouteA)) + "---\n" + service("api", b.port, ep(ipRouteAPI)),
		"a.yaml":        plain,
	})
	s.eventually("a.test served", func() error { return s.expect("a.test", "/", ipRouteA) })
	reloads := func() float64 {
		m, err := s.scrape()
		if err != nil {
			t.Fatal(err)
		}
		return m["restysync_reloads_total"]
	}
	l := startAnyOKLoad(s.port, "a.test")
	defer l.stop()

	t.Run("a new plain Ingress needs no reload", func(t *testing.T) {
		before := reloads()
		s.writeFile("b.yaml", ingress("b", ingressOpts{class: "restysync", host: "b.test", paths: []path{prefix("/b", "api")}}))
		s.eventually("b.test served", func() error { return s.expect("b.test", "/b/x", ipRouteAPI) })
		s.eventually("b.test/ is a 404", func() error { return s.expect("b.test", "/", "404") })
		if after := reloads(); after != before {
			t.Errorf("reloads_total went from %v to %v", before, after)
		}
	})

	t.Run("a proxy timeout stays in Lua: a push, no reload", func(t *testing.T) {
		before, err := s.scrape()
		if err != nil {
			t.Fatal(err)
		}
		s.writeFile("b.yaml", ingress("b", ingressOpts{class: "restysync", host: "b.test", paths: []path{prefix("/b", "api")},
			annotations: map[string]string{"nginx.ingress.kubernetes.io/proxy-read-timeout": "120"}}))
		after := s.metricsWhere("a routes push", func(m map[string]float64) error {
			return rose(before, m, `restysync_lua_pushes_total{kind="routes"}`)
		})
		if after["restysync_reloads_total"] != before["restysync_reloads_total"] {
			t.Errorf("reloads_total went from %v to %v", before["restysync_reloads_total"], after["restysync_reloads_total"])
		}
		s.eventually("b.test served", func() error { return s.expect("b.test", "/b/x", ipRouteAPI) })
	})

	t.Run("an annotation gives the host a server block, and back", func(t *testing.T) {
		before := reloads()
		s.writeFile("a.yaml", ingress("a", ingressOpts{class: "restysync", host: "a.test", paths: []path{prefix("/", "a")},
			annotations: map[string]string{"nginx.ingress.kubernetes.io/proxy-body-size": "8m"}}))
		s.eventually("a reload", func() error {
			if reloads() <= before {
				return errorf("no reload yet")
			}
			return nil
		})
		s.eventually("a.test served", func() error { return s.expect("a.test", "/", ipRouteA) })
		s.writeFile("a.yaml", plain)
		s.eventually("a reload back", func() error {
			if reloads() <= before+1 {
				return errorf("no reload yet")
			}
			return nil
		})
		s.eventually("a.test served", func() error { return s.expect("a.test", "/", ipRouteA) })
	})

	t.Run("a host-less path turns the routing off, and back", func(t *testing.T) {
		s.writeFile("hostless.yaml", ingress("hostless", ingressOpts{class: "restysync", paths: []path{prefix("/api", "api")}}))
		s.eventually("the host-less path served for any host", func() error { return s.expect("other.test", "/api", ipRouteAPI) })
		s.eventually("b.test keeps its paths", func() error { return s.expect("b.test", "/b", ipRouteAPI) })
		if err := s.expect("a.test", "/api", ipRouteA); err != nil {
			t.Error(err) // a.test has a server block now: its own "/" wins
		}
		s.removeFile("hostless.yaml")
		s.eventually("the host-less path gone", func() error { return s.expect("other.test", "/api", "404") })
		s.eventually("b.test keeps its paths", func() error { return s.expect("b.test", "/b", ipRouteAPI) })
	})

	requests, failures := l.stop()
	t.Logf("a.test under load through the transitions: %d requests, %d failed", requests, failures)
	if failures != 0 {
		t.Errorf("%d of %d requests to a.test failed: last %v", failures, requests, l.lastErr.Load())
	}
}
