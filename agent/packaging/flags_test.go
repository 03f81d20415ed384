package packaging

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// agentFlags returns the flag names `restysync run --help` lists.
func agentFlags(t *testing.T) map[string]bool {
	t.Helper()
	flags, _ := agentHelp(t)
	return flags
}

// agentHelp returns the flag names `restysync run --help` lists, and the
// environment variables it names for them, each mapped to its flag.
func agentHelp(t *testing.T) (flags map[string]bool, envs map[string]string) {
	t.Helper()
	out, err := exec.Command(agentBinary, "run", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("restysync run --help: %v\n%s", err, out)
	}
	flags, envs = map[string]bool{}, map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s+--([a-z0-9-]+).*?(?:\[(\$[A-Z0-9_, $]+)\])?$`).FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
		for _, e := range strings.Split(m[2], ",") {
			if e = strings.TrimPrefix(strings.TrimSpace(e), "$"); e != "" {
				envs[e] = m[1]
			}
		}
	}
	if !flags["source"] || !flags["shared-dir"] || envs["RESTYSYNC_SOURCE"] != "source" {
		t.Fatalf("could not read the flags and their environment variables from restysync run --help:\n%s", out)
	}
	return flags, envs
}

// Every flag the chart and the sidecar example pass to the agent, in every
// value set, is a flag of `restysync run`. TestAPIServer then runs the agent
// with the rendered arguments.
func TestAgentArgsAreRealFlags(t *testing.T) {
	flags := agentFlags(t)
	check := func(t *testing.T, args []string) {
		if len(args) == 0 || args[0] != "run" {
			t.Fatalf("args %q do not start with the run command", args)
		}
		for _, a := range args[1:] {
			if !strings.HasPrefix(a, "--") {
				t.Errorf("argument %q is not a --flag", a)
				continue
			}
			name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			if flags[name] {
				continue
			}
			t.Errorf("--%s is not a flag of restysync run", name)
		}
	}
	for _, vs := range valueSets {
		t.Run("chart/"+vs.name, func(t *testing.T) {
			objs, _ := mustRender(t, vs.values)
			agent, _ := agentContainer(t, podSpec(t, objs))
			check(t, agent.Args)
			if len(agent.Command) != 0 {
				t.Errorf("agent command %q: the image's ENTRYPOINT runs the agent", agent.Command)
			}
		})
	}
	t.Run("sidecar", func(t *testing.T) {
		agent, _ := agentContainer(t, podSpec(t, buildSidecar(t)))
		check(t, agent.Args)
	})
	// sidecar-stream sets flags through the environment: each RESTYSYNC_
	// variable is one `restysync run` reads.
	t.Run("sidecar-stream", func(t *testing.T) {
		_, envs := agentHelp(t)
		agent, _ := agentContainer(t, podSpec(t, buildSidecarStream(t)))
		check(t, agent.Args)
		n := 0
		for _, e := range agent.Env {
			if !strings.HasPrefix(e.Name, "RESTYSYNC_") {
				continue
			}
			n++
			if _, ok := envs[e.Name]; !ok {
				t.Errorf("env %s is not a variable of restysync run", e.Name)
			}
		}
		if n == 0 {
			t.Error("sidecar-stream sets no RESTYSYNC_ variable")
		}
	})
}

// Every --load-module the help suggests for Debian's nginx says what to do
// on OpenResty, the chart's image, where a load_module of a module built
// in stops nginx at start.
func TestHelpLoadModuleFitsOpenResty(t *testing.T) {
	out, err := exec.Command(agentBinary, "run", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("restysync run --help: %v\n%s", err, out)
	}
	n := 0
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.Contains(line, "Debian") || !strings.Contains(line, "--load-module") {
			continue
		}
		n++
		if !strings.Contains(line, "OpenResty") || !strings.Contains(line, "no --load-module") {
			t.Errorf("a Debian --load-module without what OpenResty needs:\n%s", line)
		}
	}
	if n < 2 {
		t.Errorf("%d lines of restysync run --help suggest a Debian --load-module; want those of --load-module and --enable-ssl-passthrough:\n%s", n, out)
	}
}
