package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// pcreRejects is a path regex that Go's RE2 accepts and nginx's PCRE
// refuses: a Unicode script newer than Debian's PCRE2 10.42 knows (Go's
// tables have Unicode 15). The model catches the differences found so far
// (see model/pcre.go); this one stands for those not yet found.
const pcreRejects = `/kawi/\p{Kawi}`

// When nginx rejects a config the model accepted, the agent finds the
// Ingress to blame by bisecting the changed ones, quarantines it with a
// Problem, serves every other change, keeps the last good version of a
// quarantined Ingress that nginx served before, keeps endpoint updates
// flowing, and tries a quarantined Ingress again once it changes.
func TestQuarantine(t *testing.T) {
	const ipA, ipA2, ipB, ipC, ipD = "127.0.0.61", "127.0.0.62", "127.0.0.63", "127.0.0.64", "127.0.0.65"
	b := startBackends(t, ipA, ipA2, ipB, ipC, ipD)
	regex := map[string]string{"nginx.ingress.kubernetes.io/use-regex": "true"}
	good := func(name, host, svc string) string {
		return ingress(name, ingressOpts{class: "restysync", host: host, annotations: regex,
			paths: []path{implementationSpecific("/", svc), implementationSpecific("/v[0-9]+/", svc)}})
	}
	bad := func(name, host, svc string) string {
		return ingress(name, ingressOpts{class: "restysync", host: host, annotations: regex,
			paths: []path{implementationSpecific("/", svc), implementationSpecific(pcreRejects, svc)}})
	}
	s := newStack(t, map[string]string{
		"classes.yaml":  ingressClasses,
		"services.yaml": service("a", b.port, ep(ipA)) + "---\n" + service("b", b.port, ep(ipB)) + "---\n" + service("c", b.port, ep(ipC)) + "---\n" + service("d", b.port, ep(ipD)),
		"a.yaml":        good("a", "a.test", "a"),
	})
	s.eventually("a.test served", func() error { return s.expect("a.test", "/v2/", ipA) })
	l := startLoad(s, "a.test", ipA)

	// Three new Ingresses at once, one of them bad: nginx rejects the
	// candidate with all three, and the agent bisects.
	s.writeFile("bcd.yaml", good("b", "b.test", "b")+"---\n"+bad("c", "c.test", "c")+"---\n"+good("d", "d.test", "d"))
	s.eventually("b.test and d.test served", func() error {
		return cmpErr(s.expect("b.test", "/", ipB), s.expect("d.test", "/v1/", ipD))
	})
	s.eventually("c.test quarantined", func() error {
		report := s.debugState()
		if !slices.Equal(report.Quarantined, []string{"default/c"}) {
			return fmt.Errorf("quarantined %v, want [default/c]", report.Quarantined)
		}
		return nil
	})
	if err := s.expect("c.test", "/", "404"); err != nil {
		t.Errorf("the quarantined new Ingress is served: %v", err)
	}
	problem := s.problemOf("Ingress default/c")
	// Regex paths are matched by Lua with nginx's PCRE (ngx.re), which
	// refuses the routes that hold it, in its own words.
	if !strings.Contains(problem, "quarantined") || !strings.Contains(problem, "pcre_compile() failed") || !strings.Contains(problem, "not served") {
		t.Errorf("problem of the quarantined Ingress %q: want quarantined, PCRE's reason, not served", problem)
	}
	s.metricAtLeast("the quarantine is a metric", "restysync_quarantined_ingresses", 1)
	s.metricAtLeast("nginx's rejections are validation failures", `restysync_validation_failures_total{validator="nginx"}`, 1)
	s.metricAtLeast("and refused route pushes", `restysync_lua_push_failures_total{kind="routes"}`, 1)
	s.metricAtLeast("the quarantine is a Problem by reason", `restysync_problems_by_reason{reason="quarantined"}`, 1)
	s.metricAtLeast("the quarantine Problem is a validation failure", `restysync_validation_failures_total{validator="agent"}`, 1)

	// While c is quarantined, endpoint changes flow and other changes apply.
	requests, failures := l.stop()
	t.Logf("a.test under load through the bisection: %d requests, %d failed", requests, failures)
	if failures != 0 {
		t.Errorf("%d of %d requests to a.test failed while the agent bisected", failures, requests)
	}
	s.writeFile("services.yaml", service("a", b.port, ep(ipA2))+"---\n"+service("b", b.port, ep(ipB))+"---\n"+service("c", b.port, ep(ipC))+"---\n"+service("d", b.port, ep(ipD)))
	s.eventually("a's new endpoint serves", func() error { return s.expect("a.test", "/", ipA2) })

	// A served Ingress turning bad keeps its last good version.
	s.writeFile("a.yaml", bad("a", "a.test", "a"))
	s.eventually("a quarantined too", func() error {
		if q := s.debugState().Quarantined; !slices.Equal(q, []string{"default/a", "default/c"}) {
			return fmt.Errorf("quarantined %v, want [default/a default/c]", q)
		}
		return nil
	})
	if err := s.expect("a.test", "/v3/", ipA2); err != nil {
		t.Errorf("the last good version of a quarantined Ingress stopped serving: %v", err)
	}
	if problem := s.problemOf("Ingress default/a"); !strings.Contains(problem, "keeps serving") {
		t.Errorf("problem of the quarantined served Ingress %q: want it to say its last version keeps serving", problem)
	}

	// Fixing an Ingress takes it out of quarantine.
	s.writeFile("bcd.yaml", good("b", "b.test", "b")+"---\n"+good("c", "c.test", "c")+"---\n"+good("d", "d.test", "d"))
	s.eventually("c.test served once fixed", func() error { return s.expect("c.test", "/v9/", ipC) })
	s.eventually("only a stays quarantined", func() error {
		if q := s.debugState().Quarantined; !slices.Equal(q, []string{"default/a"}) {
			return fmt.Errorf("quarantined %v, want [default/a]", q)
		}
		return nil
	})
}

func cmpErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// stateReport is the part of /debug/state these tests read.
type stateReport struct {
	Quarantined []string `json:"quarantined_ingresses"`
	Problems    []struct {
		Object string `json:"object"`
		Reason string `json:"reason"`
	} `json:"problems"`
}

func (s *stack) debugState() stateReport {
	s.t.Helper()
	body, code, err := s.adminGet("/debug/state")
	if err != nil || code != 200 {
		s.t.Fatalf("GET /debug/state: %d %v", code, err)
	}
	var r stateReport
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		s.t.Fatalf("decoding /debug/state: %v", err)
	}
	return r
}

// problemOf returns the reason of the problem naming object, or "".
func (s *stack) problemOf(object string) string {
	for _, p := range s.debugState().Problems {
		if p.Object == object {
			return p.Reason
		}
	}
	return ""
}

// An Ingress nginx rejects, present when the agent starts before nginx, must
// not keep nginx from starting: after the agent's start bound it leaves
// nginx the bootstrap config, and once nginx is up the verified reload and
// the quarantine serve everything else.
func TestRejectedConfigBeforeNginxStarts(t *testing.T) {
	const ipGood = "127.0.0.66"
	b := startBackends(t, ipGood)
	// Regex paths are matched in Lua; with rewrite-target the regex is in
	// the location's profile too, which nginx compiles at start.
	regex := map[string]string{"nginx.ingress.kubernetes.io/use-regex": "true", "nginx.ingress.kubernetes.io/rewrite-target": "/"}
	s := &stack{t: t, manifests: t.TempDir()}
	for name, content := range map[string]string{
		"classes.yaml":  ingressClasses,
		"services.yaml": service("good", b.port, ep(ipGood)) + "---\n" + service("bad", b.port, ep(ipGood)),
		"good.yaml":     ingress("good", ingressOpts{class: "restysync", host: "good.test", paths: []path{prefix("/", "good")}}),
		"bad.yaml": ingress("bad", ingressOpts{class: "restysync", host: "bad.test", annotations: regex,
			paths: []path{implementationSpecific("/", "bad"), implementationSpecific(pcreRejects, "bad")}}),
	} {
		s.writeFile(name, content)
	}
	s.startAgentOnly("--source", "file:"+s.manifests)
	t.Cleanup(func() {
		if t.Failed() && s.nginx == nil {
			t.Logf("agent log:\n%s", s.agent.log.String())
		}
	})
	s.metricAtLeast("a sync waits for nginx", `restysync_syncs_total{outcome="wait-for-nginx"}`, 1)
	if out, err := nginxproc.Test(t, s.shared); err == nil {
		t.Fatalf("nginx -t accepts the config left for nginx's start; the test needs one it rejects:\n%s", out)
	}
	s.eventually("the agent leaves nginx a config it can start with", func() error {
		if out, err := nginxproc.Test(t, s.shared); err != nil {
			return fmt.Errorf("nginx -t: %v: %s", err, out)
		}
		return nil
	})
	if !strings.Contains(s.agent.log.String(), "leaving it the last confirmed one") {
		t.Errorf("the agent did not log the fallback:\n%s", s.agent.log.String())
	}
	s.startNginx()
	s.eventually("good.test served", func() error { return s.expect("good.test", "/", ipGood) })
	s.eventually("bad.test quarantined", func() error {
		if q := s.debugState().Quarantined; !slices.Equal(q, []string{"default/bad"}) {
			return fmt.Errorf("quarantined %v, want [default/bad]", q)
		}
		return nil
	})
}
