package packaging

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

// The compose demo loads and validates with compose-go (the library Docker
// Compose itself uses), and has the topology the README promises: the
// stock OpenResty image, the agent built from agent/Dockerfile sharing
// OpenResty's process namespace and the volume, on the file source, with
// only real flags, and three backends whose names the EndpointSlice uses.
func TestComposeDemo(t *testing.T) {
	dir := filepath.Join("..", "..", "examples", "compose")
	opts, err := cli.NewProjectOptions([]string{filepath.Join(dir, "docker-compose.yml")},
		cli.WithWorkingDirectory(dir), cli.WithConsistency(true), cli.WithResolvedPaths(true))
	if err != nil {
		t.Fatal(err)
	}
	project, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("compose-go rejects the demo: %v", err)
	}
	service := func(name string) types.ServiceConfig {
		t.Helper()
		s, err := project.GetService(name)
		if err != nil {
			t.Fatalf("no service %s: %v", name, err)
		}
		return s
	}

	nginx := service("openresty")
	if !strings.HasPrefix(nginx.Image, "openresty/openresty:") || strings.HasSuffix(nginx.Image, ":latest") {
		t.Errorf("openresty image %q: want the stock image at a pinned tag", nginx.Image)
	}
	if !strings.Contains(strings.Join(nginx.Command, " "), "openresty -p /var/run/restysync/ -c nginx.conf") {
		t.Errorf("openresty command %q does not run the shared nginx.conf", nginx.Command)
	}
	// Without an init the nginx master is PID 1 of the shared namespace,
	// and the agent refuses to signal PID 1 (apply.Nginx.MasterPID).
	if nginx.Init == nil || !*nginx.Init {
		t.Error("openresty init is not true: the nginx master would be PID 1, which the agent never signals")
	}

	agent := service("agent")
	if agent.Build == nil || filepath.Base(agent.Build.Dockerfile) != "Dockerfile" || !strings.HasSuffix(filepath.Dir(agent.Build.Dockerfile), "agent") {
		t.Errorf("agent build %+v: want agent/Dockerfile", agent.Build)
	}
	if agent.Pid != "service:openresty" {
		t.Errorf("agent pid %q: want service:openresty, so SIGHUP reaches nginx", agent.Pid)
	}
	// KILL signals the root master; CHOWN gives htpasswd files the workers'
	// group (agent/e2e's TestComposeTopology runs basic auth with these).
	if !slices.Equal(agent.CapAdd, []string{"KILL", "CHOWN"}) || !slices.Equal(agent.CapDrop, []string{"ALL"}) || !agent.ReadOnly || agent.User != "0:0" {
		t.Errorf("agent user %q cap_add %v cap_drop %v read_only %v: want root with ALL dropped but KILL and CHOWN, read-only", agent.User, agent.CapAdd, agent.CapDrop, agent.ReadOnly)
	}
	shared := func(s types.ServiceConfig) bool {
		for _, v := range s.Volumes {
			if v.Source == "shared" && v.Target == "/var/run/restysync" {
				return true
			}
		}
		return false
	}
	if !shared(nginx) || !shared(agent) {
		t.Error("openresty and the agent do not both mount the shared volume at /var/run/restysync")
	}

	flags := agentFlags(t)
	args := agent.Command
	if len(args) == 0 || args[0] != "run" {
		t.Fatalf("agent command %q: want run …", args)
	}
	for _, a := range args[1:] {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !flags[name] {
			t.Errorf("agent argument %q is not a flag of restysync run", a)
		}
	}
	if !slices.Contains(args, "--source=file:/manifests") {
		t.Errorf("agent command %q: want the file source on /manifests", args)
	}

	for _, name := range []string{"backend-1", "backend-2", "backend-3"} {
		if s := service(name); s.Image == "" || strings.HasSuffix(s.Image, ":latest") {
			t.Errorf("%s image %q: want a pinned stock image", name, s.Image)
		}
	}
}
