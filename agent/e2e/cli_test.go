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
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
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

// A mistyped flag, a value its type cannot hold or an unknown command is
// one line on stderr, non-zero: the flag, the type wanted or the nearest
// name, and where the help is; never the command's fifty lines of help.
func TestFlagErrorsAreOneLine(t *testing.T) {
	cases := []struct {
		args []string
		env  string
		want []string // all in the one line
		not  string   // a suggestion that must not be made
	}{
		{args: []string{"run", "--sorce", "kube"}, want: []string{"unknown flag --sorce", "did you mean --source?", "restysync run --help"}},
		{args: []string{"run", "--loglevel", "debug"}, want: []string{"--loglevel", "did you mean --log-level?"}},
		{args: []string{"run", "--http-prot", "80"}, want: []string{"did you mean --http-port?"}},
		{args: []string{"run", "--bogus"}, want: []string{"unknown flag --bogus", "restysync run --help"}, not: "did you mean"},
		{args: []string{"check", "--sorce", "file:x"}, want: []string{"did you mean --source?", "restysync check --help"}},
		{args: []string{"inspect", "--admn", "127.0.0.1:1"}, want: []string{"did you mean --admin?", "restysync inspect --help"}},
		{args: []string{"run", "--http-port", "eighty"}, want: []string{`--http-port "eighty"`, "whole number", "restysync run --help"}},
		{args: []string{"run", "--kube-api-qps", "fast"}, want: []string{`--kube-api-qps "fast"`, "number"}},
		{args: []string{"run", "--reload-timeout", "10"}, want: []string{`--reload-timeout "10"`, "duration", "10s"}},
		{args: []string{"run", "--hsts=maybe"}, want: []string{`--hsts "maybe"`, "true or false"}},
		{args: []string{"run", "--source"}, want: []string{"--source needs a value"}},
		{args: []string{"run"}, env: "RESTYSYNC_HTTP_PORT=abc", want: []string{"$RESTYSYNC_HTTP_PORT", "--http-port", "whole number"}},
		{args: []string{"runn"}, want: []string{`unknown command "runn"`, "did you mean run?", "restysync --help"}},
		{args: []string{"--bogus"}, want: []string{"unknown flag --bogus", "see restysync --help"}},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " ")+c.env, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, agentBinary, c.args...)
			cmd.Env = append(os.Environ(), c.env)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if err == nil || cmd.ProcessState == nil || cmd.ProcessState.ExitCode() == 0 {
				t.Errorf("exit %v, want non-zero", err)
			}
			line := strings.TrimSuffix(stderr.String(), "\n")
			if stdout.Len() != 0 || strings.Contains(line, "\n") {
				t.Errorf("want one line on stderr and nothing on stdout; stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
			}
			for _, w := range c.want {
				if !strings.Contains(line, w) {
					t.Errorf("%q does not say %q", line, w)
				}
			}
			if c.not != "" && strings.Contains(line, c.not) {
				t.Errorf("%q says %q", line, c.not)
			}
		})
	}
}

// Without a kubeconfig, the kube source says where it looked and what to
// set, not client-go's "try setting KUBERNETES_MASTER environment variable".
func TestKubeSourceWithoutKubeconfig(t *testing.T) {
	home := t.TempDir()
	var env []string
	for _, e := range os.Environ() {
		switch name, _, _ := strings.Cut(e, "="); name {
		case "KUBECONFIG", "RESTYSYNC_KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "HOME":
		default:
			env = append(env, e)
		}
	}
	env = append(env, "HOME="+home)
	for _, args := range [][]string{
		{"run", "--source", "kube", "--shared-dir", t.TempDir()},
		{"check", "--source", "kube"},
		{"inspect", "--source", "kube"},
	} {
		t.Run(args[0], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, agentBinary, args...)
			cmd.Env = env
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Run(); err == nil {
				t.Fatalf("exit 0 without a cluster; stderr:\n%s", stderr.String())
			}
			out := stderr.String()
			for _, w := range []string{"--kubeconfig (not set)", "$KUBECONFIG (not set)", filepath.Join(home, ".kube", "config"),
				"in-cluster config ($KUBERNETES_SERVICE_HOST and _PORT not set", "Set --kubeconfig FILE", "--source file:DIR"} {
				if !strings.Contains(out, w) {
					t.Errorf("stderr does not say %q:\n%s", w, out)
				}
			}
			if strings.Contains(out, "KUBERNETES_MASTER") {
				t.Errorf("stderr still sends the user to KUBERNETES_MASTER:\n%s", out)
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
