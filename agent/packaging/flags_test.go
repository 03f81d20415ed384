package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
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
	flags, envs = commandHelp(t, "run")
	if !flags["source"] || !flags["shared-dir"] || envs["RESTYSYNC_SOURCE"] != "source" {
		t.Fatalf("could not read the flags and their environment variables from restysync run --help")
	}
	return flags, envs
}

// commandHelp returns the flag names `restysync COMMAND --help` lists
// (--help itself left out), and the environment variables it names for
// them, each mapped to its flag.
func commandHelp(t *testing.T, command string) (flags map[string]bool, envs map[string]string) {
	t.Helper()
	out, err := exec.Command(agentBinary, command, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("restysync %s --help: %v\n%s", command, err, out)
	}
	flags, envs = map[string]bool{}, map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s+--([a-z0-9-]+).*?(?:\[(\$[A-Z0-9_, $]+)\])?$`).FindAllStringSubmatch(string(out), -1) {
		if m[1] == "help" {
			continue
		}
		flags[m[1]] = true
		for _, e := range strings.Split(m[2], ",") {
			if e = strings.TrimPrefix(strings.TrimSpace(e), "$"); e != "" {
				envs[e] = m[1]
			}
		}
	}
	return flags, envs
}

// agentCommands returns the commands `restysync --help` lists (help left out).
func agentCommands(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command(agentBinary, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("restysync --help: %v\n%s", err, out)
	}
	_, section, _ := strings.Cut(string(out), "COMMANDS:\n")
	section, _, _ = strings.Cut(section, "\n\n")
	var commands []string
	for _, line := range strings.Split(section, "\n") {
		if name := strings.TrimRight(strings.Fields(line + " x")[0], ","); name != "help" && name != "x" {
			commands = append(commands, name)
		}
	}
	if !slices.Contains(commands, "run") || !slices.Contains(commands, "check") {
		t.Fatalf("could not read the commands from restysync --help:\n%s", out)
	}
	return commands
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

// TestREADMEMatchesHelp fails when the README's command examples and flag
// names drift from --help: every `restysync COMMAND --flag …` in its code
// (fenced blocks and inline spans) names a command `restysync --help` lists
// and flags that command's --help lists; every inline span that is a flag
// (`--hsts=false`) is a flag of some command; the tables of "## Flags" list
// exactly the flags of `restysync run --help`; and every `go tool task
// NAME` is a task of Taskfile.yml, the demo's flags ones it takes.
func TestREADMEMatchesHelp(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	commands := agentCommands(t)
	flagsOf := map[string]map[string]bool{}
	anyFlag := map[string]bool{}
	for _, c := range commands {
		flagsOf[c], _ = commandHelp(t, c)
		for f := range flagsOf[c] {
			anyFlag[f] = true
		}
	}
	tasks := taskNames(t)
	demoFlags := demoHelp(t)

	flagToken := regexp.MustCompile(`(?:^|\s)--([a-z][a-z0-9-]*)`)
	commandLine := regexp.MustCompile(`(?:^|\$ |-- )restysync ([a-z][a-z-]*)\b([^|;&#\n]*)`)
	taskLine := regexp.MustCompile(`go tool task ([a-z][a-z0-9-]*)(?: -- ([^|;&#\n` + "`" + `]*))?`)
	examples := 0
	for _, code := range readmeCode(string(readme)) {
		if strings.HasSuffix(code, ".") {
			continue // a sentence of output ("restysync demo is up."), not a command
		}
		for _, m := range commandLine.FindAllStringSubmatch(code, -1) {
			examples++
			cmd, rest := m[1], strings.TrimSpace(m[2])
			if flagsOf[cmd] == nil {
				t.Errorf("README: `restysync %s %s`: restysync --help lists no command %q (%s)", cmd, rest, cmd, strings.Join(commands, ", "))
				continue
			}
			for _, f := range flagToken.FindAllStringSubmatch(rest, -1) {
				if !flagsOf[cmd][f[1]] && f[1] != "help" {
					t.Errorf("README: `restysync %s %s`: restysync %s --help lists no --%s", cmd, rest, cmd, f[1])
				}
			}
		}
		if m := regexp.MustCompile(`^--([a-z][a-z0-9-]*)(?:[= ][^*]*)?$`).FindStringSubmatch(code); m != nil && !anyFlag[m[1]] {
			t.Errorf("README: `%s`: no restysync command has --%s", code, m[1])
		}
		for _, m := range taskLine.FindAllStringSubmatch(code, -1) {
			if !tasks[m[1]] {
				t.Errorf("README: `go tool task %s`: Taskfile.yml has no task %q", m[1], m[1])
			}
			if m[1] != "demo" {
				continue
			}
			for _, f := range flagToken.FindAllStringSubmatch(m[2], -1) {
				if !demoFlags[f[1]] {
					t.Errorf("README: `go tool task demo -- %s`: the demo has no --%s", m[2], f[1])
				}
			}
		}
	}
	if examples < 5 {
		t.Fatalf("only %d restysync command examples found in the README: the extraction is broken", examples)
	}

	// The "## Flags" tables against `restysync run --help`, both ways.
	_, section, _ := strings.Cut(string(readme), "\n## Flags\n")
	section, _, _ = strings.Cut(section, "\n## ")
	inTables := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `--([a-z0-9-]+)` \\|").FindAllStringSubmatch(section, -1) {
		inTables[m[1]] = true
		if !flagsOf["run"][m[1]] {
			t.Errorf("README ## Flags lists --%s, which restysync run --help does not", m[1])
		}
	}
	for f := range flagsOf["run"] {
		if !inTables[f] {
			t.Errorf("restysync run --help lists --%s, which the tables of README ## Flags do not", f)
		}
	}
}

// readmeCode returns the code of a Markdown text: each line of its fenced
// blocks, and each inline code span outside them.
func readmeCode(md string) []string {
	var code []string
	inFence := false
	span := regexp.MustCompile("`([^`\n]+)`")
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			code = append(code, strings.TrimSpace(line))
			continue
		}
		for _, m := range span.FindAllStringSubmatch(line, -1) {
			code = append(code, m[1])
		}
	}
	return code
}

// taskNames returns the tasks of Taskfile.yml.
func taskNames(t *testing.T) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "Taskfile.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var taskfile struct {
		Tasks map[string]any `yaml:"tasks"`
	}
	if err := yaml.Unmarshal(raw, &taskfile); err != nil {
		t.Fatalf("Taskfile.yml: %v", err)
	}
	names := map[string]bool{}
	for name := range taskfile.Tasks {
		names[name] = true
	}
	if !names["demo"] || !names["test"] {
		t.Fatalf("Taskfile.yml has no demo and test tasks: %v", names)
	}
	return names
}

// demoHelp builds the demo (agent/cmd/demo) and returns the flags its -h
// lists.
func demoHelp(t *testing.T) map[string]bool {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "demo")
	build := exec.Command("go", "build", "-o", bin, "./agent/cmd/demo")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the demo: %v\n%s", err, out)
	}
	out, _ := exec.Command(bin, "-h").CombinedOutput() // the flag package exits 2 after -h
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+-([a-z][a-z0-9-]*)`).FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	if !flags["port"] {
		t.Fatalf("could not read the flags from demo -h:\n%s", out)
	}
	return flags
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
