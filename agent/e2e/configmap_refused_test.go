package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// A ConfigMap nginx refuses, changed while the agent runs, is blamed, not
// the Ingresses that changed meanwhile: /readyz says why, the ConfigMap has
// a Problem and a metric, no Ingress is quarantined, tenant A's new
// Ingress and endpoints are served on the ConfigMap nginx took before; once
// the ConfigMap is fixed, it applies and the agent is ready again.
//
// The value is an access log nginx cannot open (a folder where the file
// would be): the model accepts logs/NAME and cannot know the file system,
// only nginx can judge it.
func TestConfigMapNginxRefuses(t *testing.T) {
	const ipA, ipA2 = "127.0.0.234", "127.0.0.235"
	b := startBackends(t, ipA, ipA2)
	s := newConfigMapStack(t, map[string]string{
		"classes.yaml":   ingressClasses,
		"services.yaml":  service("a", b.port, ep(ipA)),
		"a.yaml":         ingress("a", ingressOpts{class: "restysync", host: "a.test", paths: []path{prefix("/", "a")}}),
		"configmap.yaml": configMap(map[string]string{"enable-access-log": "true", "access-log-path": "logs/access.log"}),
	})
	s.eventually("a.test served", func() error { return s.expect("a.test", "/", ipA) })
	if err := os.Mkdir(filepath.Join(s.shared, "logs", "blocked"), 0o755); err != nil {
		t.Fatal(err)
	}

	// The ConfigMap turns bad while A adds an Ingress.
	s.writeFile("configmap.yaml", configMap(map[string]string{"enable-access-log": "true", "access-log-path": "logs/blocked"}))
	s.writeFile("a2.yaml", ingress("a2", ingressOpts{class: "restysync", host: "a2.test", paths: []path{prefix("/", "a")}}))
	s.eventually("/readyz false, naming the ConfigMap", func() error {
		body, code, err := s.adminGet("/readyz")
		if err != nil {
			return err
		}
		if code != 503 || !strings.Contains(body, "ConfigMap") || !strings.Contains(body, "blocked") {
			return fmt.Errorf("/readyz: %d %s, want 503 naming the ConfigMap and nginx's reason", code, body)
		}
		return nil
	})
	s.eventually("A's new Ingress served on the good ConfigMap", func() error { return s.expect("a2.test", "/", ipA) })
	if q := s.debugState().Quarantined; len(q) != 0 {
		t.Errorf("quarantined %v for the ConfigMap's fault", q)
	}
	// The route of A's new Ingress is pushed in the sync nginx refuses, a
	// moment before the ConfigMap is blamed: the Problem follows.
	s.eventually("the ConfigMap's Problem in nginx's words", func() error {
		if problem := s.problemOf("ConfigMap " + cmName); !strings.Contains(problem, "nginx rejected") || !strings.Contains(problem, "Is a directory") {
			return fmt.Errorf("problem of the ConfigMap %q: want nginx's rejection in its words", problem)
		}
		return nil
	})
	s.metricAtLeast("the refusal is a metric", "restysync_configmap_refused", 1)
	var state struct {
		ConfigMapRefused string `json:"configmap_refused"`
	}
	if body, _, err := s.adminGet("/debug/state"); err != nil || json.Unmarshal([]byte(body), &state) != nil ||
		!strings.HasPrefix(state.ConfigMapRefused, "nginx rejected the config: ") {
		t.Errorf("/debug/state does not say the ConfigMap is refused (%v): %q", err, state.ConfigMapRefused)
	}
	if !strings.Contains(s.agent.log.String(), "the ConfigMap is refused") {
		t.Error("the agent did not log the refusal")
	}

	// While the ConfigMap is refused, A's changes keep applying.
	s.writeFile("services.yaml", service("a", b.port, ep(ipA2)))
	s.eventually("A's endpoints move", func() error {
		return cmpErr(s.expect("a.test", "/", ipA2), s.expect("a2.test", "/", ipA2))
	})
	s.writeFile("a3.yaml", ingress("a3", ingressOpts{class: "restysync", host: "a3.test", paths: []path{prefix("/", "a")}}))
	s.eventually("A's next Ingress served", func() error { return s.expect("a3.test", "/", ipA2) })

	// Fixed, the ConfigMap applies and the agent is ready.
	s.writeFile("configmap.yaml", configMap(map[string]string{"enable-access-log": "true", "access-log-path": "logs/fixed.log"}))
	s.eventually("/readyz true", func() error { return s.expectAdmin("/readyz", 200) })
	s.eventually("the fixed ConfigMap applies", func() error {
		if _, _, err := s.get("a3.test", "/"); err != nil {
			return err
		}
		_, err := os.Stat(filepath.Join(s.shared, "logs", "fixed.log"))
		return err
	})
	for _, host := range []string{"a.test", "a2.test", "a3.test"} {
		if err := s.expect(host, "/", ipA2); err != nil {
			t.Errorf("after the fix: %v", err)
		}
	}
	if q := s.debugState().Quarantined; len(q) != 0 {
		t.Errorf("quarantined %v after the fix", q)
	}
	if problem := s.problemOf("ConfigMap " + cmName); problem != "" {
		t.Errorf("the fixed ConfigMap still has a problem: %q", problem)
	}
	s.metricsWhere("the metric is back to 0", func(m map[string]float64) error {
		if v := m["restysync_configmap_refused"]; v != 0 {
			return fmt.Errorf("restysync_configmap_refused = %v", v)
		}
		return nil
	})

	// The same bad ConfigMap again, with no Ingress change: refused again.
	s.writeFile("configmap.yaml", configMap(map[string]string{"enable-access-log": "true", "access-log-path": "logs/blocked"}))
	s.eventually("/readyz false again", func() error { return s.expectAdmin("/readyz", 503) })
	if q := s.debugState().Quarantined; len(q) != 0 {
		t.Errorf("quarantined %v the second time", q)
	}
	if err := s.expect("a3.test", "/", ipA2); err != nil {
		t.Errorf("while refused again: %v", err)
	}
	s.writeFile("configmap.yaml", configMap(map[string]string{"enable-access-log": "true", "access-log-path": "logs/fixed.log"}))
	s.eventually("/readyz true again", func() error { return s.expectAdmin("/readyz", 200) })
}

// A ConfigMap nginx refuses when the agent starts before nginx does not
// keep nginx from starting: after the agent's start bound it leaves nginx
// the bootstrap config, made with the flags' settings alone; once nginx is
// up the ConfigMap is blamed, not the Ingresses, which are all served on
// the flags' settings while /readyz says why.
func TestConfigMapNginxRefusesAtStart(t *testing.T) {
	const ipA = "127.0.0.239"
	b := startBackends(t, ipA)
	s := &stack{t: t, manifests: t.TempDir()}
	for name, content := range map[string]string{
		"classes.yaml":   ingressClasses,
		"services.yaml":  service("a", b.port, ep(ipA)),
		"a.yaml":         ingress("a", ingressOpts{class: "restysync", host: "a.test", paths: []path{prefix("/", "a")}}),
		"a2.yaml":        ingress("a2", ingressOpts{class: "restysync", host: "a2.test", paths: []path{prefix("/", "a")}}),
		"configmap.yaml": configMap(map[string]string{"enable-access-log": "true", "access-log-path": "logs/blocked"}),
	} {
		s.writeFile(name, content)
	}
	s.startAgentOnly("--source", "file:"+s.manifests, "--configmap", cmName)
	if err := os.Mkdir(filepath.Join(s.shared, "logs", "blocked"), 0o755); err != nil {
		t.Fatal(err)
	}
	s.eventually("the agent leaves nginx a config it can start with", func() error {
		// Until then the agent may still write the config it wants,
		// ConfigMap and all, over the bootstrap.
		if !strings.Contains(s.agent.log.String(), "leaving it the last confirmed one to start with") {
			return errors.New("the agent still leaves nginx the config it wants")
		}
		if out, err := nginxproc.Test(t, s.shared); err != nil {
			return fmt.Errorf("nginx -t: %v: %s", err, out)
		}
		return nil
	})
	// Not startNginx: it waits for /readyz, which stays 503 here.
	s.nginx = nginxproc.Start(t, s.shared)
	s.client = clientTo(s.port)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent log:\n%s", s.agent.log.String())
			t.Logf("%s", s.nginx.Logs())
		}
	})
	s.eventually("both Ingresses served", func() error {
		return cmpErr(s.expect("a.test", "/", ipA), s.expect("a2.test", "/", ipA))
	})
	s.eventually("/readyz false, naming the ConfigMap", func() error {
		body, code, err := s.adminGet("/readyz")
		if err != nil {
			return err
		}
		if code != 503 || !strings.Contains(body, "ConfigMap") || !strings.Contains(body, "blocked") {
			return fmt.Errorf("/readyz: %d %s, want 503 naming the ConfigMap", code, body)
		}
		return nil
	})
	if q := s.debugState().Quarantined; len(q) != 0 {
		t.Errorf("quarantined %v for the ConfigMap's fault", q)
	}

	s.writeFile("configmap.yaml", configMap(map[string]string{"enable-access-log": "true", "access-log-path": "logs/fixed.log"}))
	s.eventually("/readyz true once fixed", func() error { return s.expectAdmin("/readyz", 200) })
	s.eventually("the fixed ConfigMap applies", func() error {
		_, _, _ = s.get("a.test", "/")
		_, err := os.Stat(filepath.Join(s.shared, "logs", "fixed.log"))
		return err
	})
}
