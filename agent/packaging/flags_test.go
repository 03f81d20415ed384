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
	out, err := exec.Command(agentBinary, "run", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("restysync run --help: %v\n%s", err, out)
	}
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+--([a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	if !flags["source"] || !flags["shared-dir"] {
		t.Fatalf("could not read the flags from restysync run --help:\n%s", out)
	}
	return flags
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
}
