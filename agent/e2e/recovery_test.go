package e2e

import (
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// load sends GET host/ in a loop until stop is called, counting requests
// and failures (an error or an answer other than want).
type load struct {
	requests, failures atomic.Int64
	stopCh             chan struct{}
	done               chan struct{}
}

func startLoad(s *stack, host, want string) *load {
	l := &load{stopCh: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for {
			select {
			case <-l.stopCh:
				return
			default:
			}
			l.requests.Add(1)
			if err := s.expect(host, "/", want); err != nil {
				l.failures.Add(1)
			}
		}
	}()
	return l
}

func (l *load) stop() (requests, failures int64) {
	close(l.stopCh)
	<-l.done
	return l.requests.Load(), l.failures.Load()
}

// An nginx cold start loses the shared dict and loads the state the agent
// saved (TestNginxColdRestartUnderLoad); the agent sees the new boot id,
// reads back what Lua holds and pushes what changed, without restarting
// itself.
func TestNginxColdRestart(t *testing.T) {
	b := startBackends(t, ipRR1)
	s := newStack(t, map[string]string{
		"classes.yaml": ingressClasses,
		"rr.yaml":      service("rr", b.port, ep(ipRR1)),
		"ingress.yaml": ingress("rr", ingressOpts{class: "restysync", host: "rr.test", paths: []path{prefix("/", "rr")}}),
	})
	s.eventually("served", func() error { return s.expect("rr.test", "/", ipRR1) })
	agentPID := s.agent.cmd.Process.Pid

	s.nginx.Stop(t)
	s.nginx = nginxproc.Start(t, s.shared) // answers GET /status: the dict is empty
	up := time.Now()
	s.eventually("the agent pushes its state to the new nginx", func() error { return s.expect("rr.test", "/", ipRR1) })
	t.Logf("served again %s after nginx answered", time.Since(up).Round(time.Millisecond))
	if s.agent.cmd.Process.Pid != agentPID || exited(s.agent) {
		t.Error("the agent restarted")
	}
	// nginx serves the saved state at once; the agent notices the new boot
	// within its status check.
	s.eventually("the agent logs the nginx restart", func() error {
		if !strings.Contains(s.agent.log.String(), "nginx restarted") {
			return errorf("no \"nginx restarted\" in the agent's log")
		}
		return nil
	})

	l := startLoad(s, "rr.test", ipRR1)
	time.Sleep(500 * time.Millisecond)
	requests, failures := l.stop()
	t.Logf("after the restart: %d requests, %d failed", requests, failures)
	if failures != 0 {
		t.Errorf("%d of %d requests failed after the restart", failures, requests)
	}
}

// SIGTERM stops the agent cleanly and quickly; nginx keeps serving.
func TestAgentSIGTERM(t *testing.T) {
	b := startBackends(t, ipRR1)
	s := newStack(t, map[string]string{
		"classes.yaml": ingressClasses,
		"rr.yaml":      service("rr", b.port, ep(ipRR1)),
		"ingress.yaml": ingress("rr", ingressOpts{class: "restysync", host: "rr.test", paths: []path{prefix("/", "rr")}}),
	})
	s.eventually("served", func() error { return s.expect("rr.test", "/", ipRR1) })
	l := startLoad(s, "rr.test", ipRR1)
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	syscall.Kill(s.agent.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-s.agent.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent did not exit within 10s of SIGTERM")
	}
	if code := s.agent.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
	t.Logf("agent exited %s after SIGTERM", time.Since(start).Round(time.Millisecond))
	time.Sleep(300 * time.Millisecond)
	requests, failures := l.stop()
	t.Logf("across the agent's exit: %d requests, %d failed", requests, failures)
	if failures != 0 || requests == 0 {
		t.Errorf("%d of %d requests failed", failures, requests)
	}
}

func exited(a *agentProcess) bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}
