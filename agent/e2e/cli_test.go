package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
	"github.com/restysync/restysync/agent/internal/testenv/syncbuf"
)

// A bad flag or value stops the agent at once, non-zero, naming the flag.
func TestRunRejectsBadFlags(t *testing.T) {
	shared := t.TempDir()
	cases := []struct {
		args []string
		env  string
		want string
	}{
		{args: []string{"--bogus"}, want: "bogus"},
		{args: []string{"--source", "nope"}, want: "--source"},
		{args: []string{"--source", "file:"}, want: "--source"},
		{args: []string{"--http-port", "0"}, want: "--http-port"},
		{args: []string{"--https-port", "70000"}, want: "--https-port"},
		{args: []string{"--http-port", "8080", "--https-port", "8080"}, want: "--http-port"},
		{args: []string{"--http-port", "8080", "--status-port", "8080"}, want: "--status-port"},
		{args: []string{"--status-port", "-1"}, want: "--status-port"},
		{args: []string{"--default-ssl-certificate", "no-slash"}, want: "--default-ssl-certificate"},
		{args: []string{"--default-ssl-certificate", "ns/Bad_Name"}, want: "--default-ssl-certificate"},
		{args: []string{"--http-port", "eighty"}, want: "http-port"},
		{args: []string{"--log-level", "loud"}, want: "--log-level"},
		{args: []string{"--log-format", "xml"}, want: "--log-format"},
		{args: []string{"--load-module", "relative/ngx_http_lua_module.so"}, want: "--load-module"},
		{args: []string{"--load-module", "/x.so; daemon on"}, want: "--load-module"},
		{args: []string{"--worker-processes", "many"}, want: "--worker-processes"},
		{args: []string{"--ingress-class", ""}, want: "--ingress-class"},
		{args: []string{"--reload-timeout", "-1s"}, want: "--reload-timeout"},
		{args: []string{"--push-mode", "some"}, want: "--push-mode"},
		{args: []string{"--metrics-address", "10254"}, want: "--metrics-address"},
		{args: []string{"--source", "kube", "--publish-service", "nons"}, want: "--publish-service"},
		{args: []string{"--source", "kube", "--kube-api-qps", "0"}, want: "--kube-api-qps"},
		{env: "RESTYSYNC_HTTP_PORT=99999", want: "--http-port"},
	}
	for _, c := range cases {
		name := strings.Join(c.args, " ") + c.env
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			args := append([]string{"run", "--source", "file:" + t.TempDir(), "--shared-dir", shared}, c.args...)
			cmd := exec.CommandContext(ctx, agentBinary, args...)
			if c.env != "" {
				cmd.Env = append(os.Environ(), c.env)
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			if err == nil || cmd.ProcessState == nil || cmd.ProcessState.ExitCode() == 0 {
				t.Fatalf("exit %v, want non-zero; stderr:\n%s", err, stderr.String())
			}
			if !strings.Contains(stderr.String(), c.want) {
				t.Errorf("stderr does not name %q:\n%s", c.want, stderr.String())
			}
		})
	}
}

func TestVersion(t *testing.T) {
	out, err := exec.Command(agentBinary, "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "restysync ") || !strings.Contains(string(out), "commit") {
		t.Fatalf("restysync version: %q, %v", out, err)
	}
}

// Before anything else, run writes the Lua modules and a bootstrap
// nginx.conf that nginx accepts, even when nothing else works yet.
func TestStartupContract(t *testing.T) {
	shared := nginxproc.TempPrefix(t)
	port := nginxproc.FreePort(t)
	args := []string{"run", "--source", "file:" + t.TempDir(), "--shared-dir", shared,
		"--http-port", strconv.Itoa(port), "--listen-address", "127.0.0.1"}
	for _, m := range nginxproc.DebianLoadModules() {
		args = append(args, "--load-module", m)
	}
	a := startAgent(t, args...)
	deadline := time.Now().Add(eventuallyTimeout)
	for {
		_, errConf := os.Stat(filepath.Join(shared, "nginx.conf"))
		_, errLua := os.Stat(filepath.Join(shared, "lua", "restysync", "balancer.lua"))
		if errConf == nil && errLua == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no nginx.conf and Lua modules in %s: %v, %v\n%s", shared, errConf, errLua, a.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if out, err := nginxproc.Test(t, shared); err != nil {
		t.Fatalf("nginx rejects the bootstrap config: %v\n%s", err, out)
	}
	nginxproc.Start(t, shared)
	s := &stack{t: t, client: clientTo(port)}
	s.eventually("nginx answers 404 with nothing to serve", func() error { return s.expect("any.test", "/", "404") })
}

// TestDemo runs README command 1's program: the demo answers round robin
// across its three backends, moves traffic when the EndpointSlice file is
// edited, and leaves nothing running after Ctrl-C.
func TestDemo(t *testing.T) {
	nginxproc.Binary(t)
	manifests := t.TempDir()
	for _, name := range []string{"ingress.yaml", "service.yaml", "endpointslice.yaml"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "examples", "local", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(manifests, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	port := nginxproc.FreePort(t)
	out := &syncbuf.Buffer{}
	cmd := exec.Command(demoBinary, "--agent", agentBinary, "--manifests", manifests, "--port", strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			if t.Failed() {
				ps, _ := exec.Command("ps", "-o", "pid,stat,wchan:20,args", "-g", strconv.Itoa(cmd.Process.Pid)).CombinedOutput()
				t.Logf("demo processes:\n%s", ps)
			}
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			t.Logf("demo output:\n%s", out.String())
		}
	})

	s := &stack{t: t, client: clientTo(port)}
	// The demo starts three processes; on a loaded machine that can take a while.
	s.eventually("the demo prints its URL", func() error {
		if !strings.Contains(out.String(), "http://demo.localhost:"+strconv.Itoa(port)+"/") {
			return errorf("no URL yet")
		}
		return nil
	})
	counts := map[string]int{}
	for range 6 {
		_, body, err := s.get("demo.localhost", "/")
		if err != nil {
			t.Fatal(err)
		}
		counts[strings.Fields(body)[0]]++
	}
	for _, name := range []string{"demo-1", "demo-2", "demo-3"} {
		if counts[name] == 0 {
			t.Errorf("%s never answered: %v", name, counts)
		}
	}

	reloadsBefore := strings.Count(out.String(), "action=reload")
	data, err := os.ReadFile(filepath.Join(manifests, "endpointslice.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(data), `["127.0.0.11"]`, `["127.0.0.14"]`, 1)
	s.manifests = manifests
	s.writeFile("endpointslice.yaml", edited)
	s.eventually("demo-4 answers after the edit", func() error {
		_, body, err := s.get("demo.localhost", "/")
		if err != nil || !strings.HasPrefix(body, "demo-4") {
			return errorf("%q %v", body, err)
		}
		return nil
	})

	started := descendants(cmd.Process.Pid) // the agent, nginx's master and worker (the backends run in the demo)
	if len(started) < 3 {
		t.Errorf("the demo runs %d processes, want at least the agent and nginx's master and worker: %v", len(started), started)
	}
	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		stopped = true
		if err != nil {
			t.Errorf("demo exited with %v after Ctrl-C", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("demo did not stop within 30s of Ctrl-C")
	}
	for pid, cmdline := range started {
		if now, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && string(now) == cmdline {
			t.Errorf("process %d (%s) outlived the demo's Ctrl-C", pid, strings.ReplaceAll(cmdline, "\x00", " "))
		}
	}
	if _, _, err := s.get("demo.localhost", "/"); err == nil {
		t.Error("something still serves the demo port after Ctrl-C")
	}
	if after := strings.Count(out.String(), "action=reload"); after != reloadsBefore {
		t.Errorf("the agent reloaded nginx on an endpoint edit (%d reloads, %d before)", after, reloadsBefore)
	}
	if !strings.Contains(out.String(), "action=push") {
		t.Error("the agent log shows no push")
	}
	// The file source takes the fast path for an EndpointSlice-only save,
	// and the sync log line names the slice.
	if want := `action=push path=fast changed="EndpointSlice default/demo-1"`; !strings.Contains(out.String(), want) {
		t.Errorf("the agent log has no line with %s", want)
	}
}

// descendants returns every process below pid, by pid, with its command
// line (to tell it from a later process that reuses the pid).
func descendants(pid int) map[int]string {
	parent := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) > 1 {
			if pp, err := strconv.Atoi(fields[1]); err == nil {
				parent[p] = pp
			}
		}
	}
	out := map[int]string{}
	for p := range parent {
		for a := parent[p]; a > 1; a = parent[a] {
			if a == pid {
				if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p)); err == nil {
					out[p] = string(cmdline)
				}
				break
			}
		}
	}
	return out
}
