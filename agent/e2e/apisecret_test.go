package e2e

import (
	"slices"
	"testing"

	"github.com/restysync/restysync/agent/internal/luaapi"
)

// A restarted agent keeps the config API's secret the running nginx
// master read (a new one would lock it out until a reload): its first
// sync reads back what Lua holds and an endpoint change is pushed, with
// no reload.
func TestAgentRestartKeepsTheAPISecret(t *testing.T) {
	b := startBackends(t, ipRR1, ipRR2)
	s := newStack(t, map[string]string{
		"classes.yaml": ingressClasses,
		"rr.yaml":      service("rr", b.port, ep(ipRR1)),
		"ingress.yaml": ingress("rr", ingressOpts{class: "restysync", host: "rr.test", paths: []path{prefix("/", "rr")}}),
	})
	s.eventually("served", func() error { return s.expect("rr.test", "/", ipRR1) })
	before, err := luaapi.ReadSecret(s.shared)
	if err != nil {
		t.Fatal(err)
	}
	workers := s.steadyWorkers()

	s.agent.stop(t)
	s.agent = startAgent(t, s.agentArgs...)
	s.eventually("the restarted agent is ready", func() error { return s.expectAdmin("/readyz", 200) })
	s.writeFile("rr.yaml", service("rr", b.port, ep(ipRR2)))
	s.eventually("the new endpoint is served", func() error { return s.expect("rr.test", "/", ipRR2) })

	if after, err := luaapi.ReadSecret(s.shared); err != nil || after != before {
		t.Errorf("the secret changed across the agent's restart (%v)", err)
	}
	if now := s.nginx.WorkerPIDs(); !slices.Equal(now, workers) {
		t.Errorf("nginx was reloaded: workers %v, before %v\n%s", now, workers, s.agent.log.String())
	}
}
