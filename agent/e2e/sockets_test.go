package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Least privilege: nginx listens on its HTTP and HTTPS ports and the config
// socket in the shared dir, the agent on its admin address, and nothing
// else — in particular the Lua config API is never on TCP.
func TestListeningSockets(t *testing.T) {
	if _, err := exec.LookPath("ss"); err != nil {
		missingTool(t, "ss (iproute2)")
	}
	b := startBackends(t, ipRR1)
	s := newStack(t, map[string]string{
		"classes.yaml": ingressClasses,
		"rr.yaml":      service("rr", b.port, ep(ipRR1)),
		"ingress.yaml": ingress("rr", ingressOpts{class: "restysync", host: "rr.test", paths: []path{prefix("/", "rr")}}),
	})
	s.eventually("served", func() error { return s.expect("rr.test", "/", ipRR1) })

	owners := map[int]string{s.agent.cmd.Process.Pid: "agent", s.nginx.MasterPID(): "nginx"}
	for _, pid := range s.nginx.WorkerPIDs() {
		owners[pid] = "nginx"
	}
	want := []string{
		"agent " + strings.TrimPrefix(s.admin, "http://"),
		"nginx 127.0.0.1:" + strconv.Itoa(s.port),
		"nginx 127.0.0.1:" + strconv.Itoa(stackHTTPSPort(t, s)),
		"nginx " + filepath.Join(s.shared, "restysync.sock"),
	}
	got := listening(t, owners)
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("%q is not listening; listening: %v", w, got)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			t.Errorf("unexpected listening socket %q", g)
		}
	}
	// nginx creates the socket 0666; the agent narrows it to its pod's
	// user and group.
	info, err := os.Stat(filepath.Join(s.shared, "restysync.sock"))
	if err != nil {
		t.Fatal(err)
	}
	if mode := info.Mode().Perm(); mode&^0o660 != 0 {
		t.Errorf("the config socket has mode %#o, want 0660 or tighter", mode)
	}
}

var ssPID = regexp.MustCompile(`pid=(\d+)`)

// listening returns "owner local-address" for every listening TCP, UDP or
// unix socket of the processes in owners.
func listening(t *testing.T, owners map[int]string) []string {
	t.Helper()
	out, err := exec.Command("ss", "-Hlnp", "-A", "inet,unix").CombinedOutput()
	if err != nil {
		t.Fatalf("ss: %v\n%s", err, out)
	}
	var got []string
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		owner := ""
		for _, m := range ssPID.FindAllStringSubmatch(line, -1) {
			pid, _ := strconv.Atoi(m[1])
			if o, ok := owners[pid]; ok {
				owner = o
			}
		}
		if owner == "" {
			continue
		}
		// Netid State Recv-Q Send-Q Local Peer ...: the local address is the 5th field.
		entry := owner + " " + fields[4]
		if !slices.Contains(got, entry) {
			got = append(got, entry)
		}
	}
	slices.Sort(got)
	return got
}

func missingTool(t *testing.T, what string) {
	t.Helper()
	if isCI() {
		t.Fatalf("%s is needed (CI=true)", what)
	}
	t.Skipf("skipping: %s is not installed", what)
}

func isCI() bool { return os.Getenv("CI") == "true" }
