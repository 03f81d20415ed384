package packaging

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

var (
	// repoRoot is the restysync repository (this module is agent/packaging).
	repoRoot string
	// agentBinary is the agent, built by the Dockerfile's own go build
	// command.
	agentBinary string
)

// The build arguments TestMain stamps the binary with.
const (
	stampVersion = "v0.0.0-packaging-test"
	stampCommit  = "0123456789abcdef"
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	repoRoot = filepath.Dir(filepath.Dir(wd))
	tmp, err := os.MkdirTemp("", "restysync-packaging-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	agentBinary = filepath.Join(tmp, "restysync")
	if err := buildLikeDockerfile(agentBinary); err != nil {
		fmt.Fprintln(os.Stderr, "building the agent with the Dockerfile's command:", err)
		return 1
	}
	return m.Run()
}

// buildLikeDockerfile runs the build stage's RUN line of agent/Dockerfile in
// the repository root, with the build arguments set and its -o path
// replaced by out.
func buildLikeDockerfile(out string) error {
	b, problems := checkDockerfile(filepath.Join(repoRoot, "agent", "Dockerfile"))
	if b.run == "" || b.output == "" {
		return fmt.Errorf("no go build command found: %s", strings.Join(problems, "; "))
	}
	vars := map[string]string{
		"VERSION":    stampVersion,
		"COMMIT":     stampCommit,
		"TARGETOS":   runtime.GOOS,
		"TARGETARCH": runtime.GOARCH,
	}
	script := strings.Replace(expand(b.run, vars), "-o "+b.output, "-o "+out, 1)
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = repoRoot
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %v\n%s", script, err, stderr.String())
	}
	return nil
}
