package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// renderRefusesHost is the environment variable of the agent's e2e hook
// (agent/internal/syncer/e2ehooks.go, built in with the tag e2ehooks): the
// agent's render fails on any model that serves the host it names, as it
// fails on a value the model let through. The model is meant to refuse
// every such value first (one validation of values), so these tests do not
// depend on one staying open.
const renderRefusesHost = "RESTYSYNC_E2E_RENDER_REFUSES_HOST"

// An Ingress that render refuses is isolated like one nginx rejects: it is
// quarantined with a Problem naming it, its last good version keeps
// serving, and every other tenant keeps updating: a new Ingress is served,
// endpoints move. Once it changes it is tried again.
func TestRenderFailureIsolated(t *testing.T) {
	const ipA, ipA2, ipB = "127.0.0.231", "127.0.0.232", "127.0.0.233"
	const refused = "evil.b.test"
	t.Setenv(renderRefusesHost, refused)
	b := startBackends(t, ipA, ipA2, ipB)
	tenantB := func(host string) string {
		return ingress("b", ingressOpts{class: "restysync", host: host, paths: []path{prefix("/", "b")}})
	}
	s := newStack(t, map[string]string{
		"classes.yaml":  ingressClasses,
		"services.yaml": service("a", b.port, ep(ipA)) + "---\n" + service("b", b.port, ep(ipB)),
		"a.yaml":        ingress("a", ingressOpts{class: "restysync", host: "a.test", paths: []path{prefix("/", "a")}}),
		"b.yaml":        tenantB("b.test"),
	})
	s.eventually("a.test and b.test served", func() error {
		return cmpErr(s.expect("a.test", "/", ipA), s.expect("b.test", "/", ipB))
	})

	// B turns its Ingress into one render refuses.
	s.writeFile("b.yaml", tenantB(refused))
	s.eventually("b quarantined", func() error {
		if q := s.debugState().Quarantined; !slices.Equal(q, []string{"default/b"}) {
			return fmt.Errorf("quarantined %v, want [default/b]", q)
		}
		return nil
	})
	problem := s.problemOf("Ingress default/b")
	for _, want := range []string{"quarantined: the agent cannot render nginx.conf", refused, "keeps serving"} {
		if !strings.Contains(problem, want) {
			t.Errorf("problem of the quarantined Ingress %q: want %q", problem, want)
		}
	}
	if err := s.expect("b.test", "/", ipB); err != nil {
		t.Errorf("the last good version of b stopped serving: %v", err)
	}
	if err := s.expect(refused, "/", "404"); err != nil {
		t.Errorf("the refused version of b is served: %v", err)
	}
	s.metricAtLeast("the quarantine is a metric", "restysync_quarantined_ingresses", 1)
	s.metricAtLeast("the quarantine is a Problem by reason", `restysync_problems_by_reason{reason="quarantined"}`, 1)

	// A keeps updating: a new Ingress, and its endpoints move.
	s.writeFile("a2.yaml", ingress("a2", ingressOpts{class: "restysync", host: "a2.test", paths: []path{prefix("/", "a")}}))
	s.eventually("A's new Ingress served", func() error { return s.expect("a2.test", "/", ipA) })
	s.writeFile("services.yaml", service("a", b.port, ep(ipA2))+"---\n"+service("b", b.port, ep(ipB)))
	s.eventually("A's endpoints move", func() error {
		return cmpErr(s.expect("a.test", "/", ipA2), s.expect("a2.test", "/", ipA2))
	})
	if !strings.Contains(s.agent.log.String(), "Ingress quarantined: the agent cannot render nginx.conf with it") {
		t.Error("the agent did not log the quarantine")
	}
	if strings.Contains(s.agent.log.String(), "sync failed") {
		t.Error("a sync failed: the render failure was not isolated")
	}

	// Fixed, b is tried again and served.
	s.writeFile("b.yaml", tenantB("b2.test"))
	s.eventually("b fixed and served", func() error { return s.expect("b2.test", "/", ipB) })
	s.eventually("no Ingress quarantined", func() error {
		if q := s.debugState().Quarantined; len(q) != 0 {
			return fmt.Errorf("quarantined %v, want none", q)
		}
		return nil
	})
}

// restysync check renders too: an Ingress render refuses fails the check
// (exit 1) with render's reason against it, and the others still move.
func TestCheckRenderRefused(t *testing.T) {
	const refused = "evil.b.test"
	dir := t.TempDir()
	for name, content := range map[string]string{
		"a.yaml": ingress("a", ingressOpts{class: "restysync", host: "a.test", paths: []path{prefix("/", "a")}}),
		"b.yaml": ingress("b", ingressOpts{class: "restysync", host: refused, paths: []path{prefix("/", "b")}}),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(agentBinary, "check", "--source", "file:"+dir, "-o", "json")
	cmd.Env = append(os.Environ(), renderRefusesHost+"="+refused)
	out, err := cmd.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("check with an Ingress render refuses: %v, want exit code 1\n%s", err, out)
	}
	var report struct {
		Ingresses []struct {
			Ingress       string `json:"ingress"`
			Moves         bool   `json:"moves"`
			RenderRefused string `json:"renderRefused"`
		} `json:"ingresses"`
		Summary map[string]int `json:"summary"`
	}
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("decoding %s: %v", out, err)
	}
	for _, ing := range report.Ingresses {
		switch ing.Ingress {
		case "default/a":
			if !ing.Moves || ing.RenderRefused != "" {
				t.Errorf("default/a: %+v, want it to move", ing)
			}
		case "default/b":
			if ing.Moves || !strings.Contains(ing.RenderRefused, refused) {
				t.Errorf("default/b: %+v, want render's reason naming %s", ing, refused)
			}
		}
	}
	if report.Summary["render_refused"] != 1 {
		t.Errorf("summary %v, want render_refused 1", report.Summary)
	}
	if msg := string(exit.Stderr); !strings.Contains(msg, "cannot be rendered") {
		t.Errorf("check's message %q does not say why it failed", msg)
	}
}
