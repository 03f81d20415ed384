package packaging

import (
	"bufio"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	line int    // first line, 1-based
	cmd  string // upper case: FROM, RUN, ...
	args string
}

// stage is the instructions from one FROM to the next.
type stage struct {
	from   string // image as written
	name   string // AS name
	instrs []instruction
}

// parseDockerfile splits a Dockerfile into instructions the way the
// Dockerfile frontend does for what this repository uses: comments and
// parser directives dropped, lines ending in a backslash joined. Heredocs
// are refused so that a later edit cannot slip past the checks.
func parseDockerfile(path string) (globalArgs []instruction, stages []stage, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	var (
		sc      = bufio.NewScanner(f)
		n       int
		pending strings.Builder
		start   int
	)
	var instrs []instruction
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if pending.Len() == 0 {
			start = n
		}
		if strings.Contains(trimmed, "<<") {
			return nil, nil, fmt.Errorf("%s:%d: heredocs are not supported by this check", path, n)
		}
		if strings.HasSuffix(trimmed, `\`) {
			pending.WriteString(strings.TrimSuffix(trimmed, `\`) + " ")
			continue
		}
		pending.WriteString(trimmed)
		text := pending.String()
		pending.Reset()
		cmd, args, _ := strings.Cut(text, " ")
		instrs = append(instrs, instruction{line: start, cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)})
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	if pending.Len() > 0 {
		return nil, nil, fmt.Errorf("%s: ends inside a continued line", path)
	}
	for _, in := range instrs {
		switch {
		case in.cmd == "FROM":
			fields := strings.Fields(in.args)
			st := stage{from: fields[0]}
			if len(fields) == 3 && strings.EqualFold(fields[1], "AS") {
				st.name = fields[2]
			} else if len(fields) != 1 {
				return nil, nil, fmt.Errorf("%s:%d: FROM %q: want IMAGE [AS NAME]", path, in.line, in.args)
			}
			stages = append(stages, st)
		case len(stages) == 0:
			if in.cmd != "ARG" {
				return nil, nil, fmt.Errorf("%s:%d: %s before the first FROM", path, in.line, in.cmd)
			}
			globalArgs = append(globalArgs, in)
		default:
			stages[len(stages)-1].instrs = append(stages[len(stages)-1].instrs, in)
		}
	}
	return globalArgs, stages, nil
}

func (s stage) all(cmd string) []instruction {
	var out []instruction
	for _, in := range s.instrs {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// argDefaults maps each ARG NAME=DEFAULT to its default.
func argDefaults(instrs []instruction) map[string]string {
	m := map[string]string{}
	for _, in := range instrs {
		if in.cmd != "ARG" {
			continue
		}
		name, def, _ := strings.Cut(in.args, "=")
		m[name] = def
	}
	return m
}

var dockerVarRE = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

func expand(s string, vars map[string]string) string {
	return dockerVarRE.ReplaceAllStringFunc(s, func(m string) string {
		name := strings.Trim(m, "${}")
		if v, ok := vars[name]; ok {
			return v
		}
		return m
	})
}

// dockerfileBuild is what the build stage's go build needs: the shell
// command and the output path the runtime stage copies.
type dockerfileBuild struct {
	run    string // the RUN line that calls go build
	output string // its -o path
}

// checkDockerfile checks agent/Dockerfile and returns its go build command.
func checkDockerfile(path string) (dockerfileBuild, []string) {
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	global, stages, err := parseDockerfile(path)
	if err != nil {
		return dockerfileBuild{}, []string{err.Error()}
	}
	if len(stages) != 2 {
		return dockerfileBuild{}, []string{fmt.Sprintf("%d stages, want 2 (build, runtime)", len(stages))}
	}
	build, runtime := stages[0], stages[1]
	globals := argDefaults(global)

	if img := expand(build.from, globals); !strings.HasPrefix(img, "golang:1.26") {
		fail("build stage FROM %s (%s), want golang:1.26", build.from, img)
	}
	if build.name == "" {
		fail("build stage has no AS name")
	}
	var b dockerfileBuild
	for _, in := range build.all("RUN") {
		if strings.Contains(in.args, "go build") {
			b.run = in.args
		}
	}
	if b.run == "" {
		fail("build stage: no RUN with go build")
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-X main.version=${VERSION}", "-X main.commit=${COMMIT}", "./agent/cmd/restysync"} {
		if !strings.Contains(b.run, want) {
			fail("build stage: go build lacks %q", want)
		}
	}
	if m := regexp.MustCompile(`-o\s+(\S+)`).FindStringSubmatch(b.run); m != nil {
		b.output = m[1]
	} else {
		fail("build stage: go build has no -o")
	}
	buildArgs := argDefaults(build.instrs)
	for _, a := range []string{"VERSION", "COMMIT"} {
		if _, ok := buildArgs[a]; !ok {
			fail("build stage: no ARG %s (the build argument that stamps main.%s)", a, strings.ToLower(a))
		}
	}
	for _, in := range build.all("COPY") {
		fields := strings.Fields(in.args)
		for _, src := range fields[:len(fields)-1] {
			if strings.HasPrefix(src, "--") {
				continue
			}
			if _, err := os.Stat(filepath.Join(repoRoot, src)); err != nil {
				fail("line %d: COPY source %s does not exist in the repository", in.line, src)
			}
		}
	}

	if runtime.from != "gcr.io/distroless/static:nonroot" {
		fail("runtime stage FROM %s, want gcr.io/distroless/static:nonroot", runtime.from)
	}
	users := runtime.all("USER")
	if len(users) == 0 {
		fail("runtime stage: no USER")
	} else {
		u := strings.Fields(users[len(users)-1].args)[0]
		uid, _, _ := strings.Cut(u, ":")
		if uid == "0" || uid == "root" || uid == "" {
			fail("runtime stage: USER %s is root", u)
		} else if strings.Trim(uid, "0123456789") != "" {
			fail("runtime stage: USER %s is not numeric (runAsNonRoot can verify only a numeric UID)", u)
		}
	}
	var copied string
	for _, in := range runtime.all("COPY") {
		fields := strings.Fields(in.args)
		if len(fields) == 3 && fields[0] == "--from="+build.name && fields[1] == b.output {
			copied = fields[2]
		}
	}
	if copied == "" {
		fail("runtime stage: no COPY --from=%s %s DEST", build.name, b.output)
	}
	entry := runtime.all("ENTRYPOINT")
	if len(entry) != 1 {
		fail("runtime stage: %d ENTRYPOINT, want 1", len(entry))
	} else {
		var argv []string
		if err := json.Unmarshal([]byte(entry[0].args), &argv); err != nil || len(argv) == 0 {
			fail("ENTRYPOINT %s: want the exec (JSON) form; distroless has no shell", entry[0].args)
		} else if argv[0] != copied {
			fail("ENTRYPOINT runs %s, but the binary is copied to %s", argv[0], copied)
		}
	}
	labels := strings.Join(func() []string {
		var s []string
		for _, in := range runtime.all("LABEL") {
			s = append(s, in.args)
		}
		return s
	}(), " ")
	for _, key := range []string{"org.opencontainers.image.title", "org.opencontainers.image.source", "org.opencontainers.image.version=\"${VERSION}\"", "org.opencontainers.image.revision=\"${COMMIT}\""} {
		if !strings.Contains(labels, key) {
			fail("runtime stage: no OCI label %s", key)
		}
	}
	runtimeArgs := argDefaults(runtime.instrs)
	for _, a := range []string{"VERSION", "COMMIT"} {
		if _, ok := runtimeArgs[a]; !ok {
			fail("runtime stage: no ARG %s for its label", a)
		}
	}
	return b, problems
}

// The Dockerfile has a golang:1.26 build stage that builds the agent static
// and stamped, and a distroless runtime stage that runs it as a non-root
// user with OCI labels. No Docker engine runs here: TestMain executes the
// build stage's own go build command (that is the binary every test in this
// package uses), and this test checks that the result is what the image
// would hold.
func TestDockerfile(t *testing.T) {
	_, problems := checkDockerfile(filepath.Join(repoRoot, "agent", "Dockerfile"))
	for _, p := range problems {
		t.Error(p)
	}

	// The binary from the Dockerfile's command: static (no ELF interpreter:
	// distroless/static has no libc) and stamped by the build arguments.
	f, err := elf.Open(agentBinary)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s has an ELF interpreter: not a static binary (CGO_ENABLED=0 missing?)", agentBinary)
		}
	}
	out, err := exec.Command(agentBinary, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("restysync version: %v\n%s", err, out)
	}
	if want := "restysync " + stampVersion + " (commit " + stampCommit; !strings.Contains(string(out), want) {
		t.Errorf("restysync version printed %q, want it to contain %q (ldflags -X not applied)", out, want)
	}
}
