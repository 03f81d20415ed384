//go:build bench

package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/testenv/podnet"
)

// TestB7Footprint measures what the agent costs to ship and to keep
// running: its stripped binary (as the image builds it) and its resident
// memory when idle with 100 Ingresses from the real API server.
func TestB7Footprint(t *testing.T) {
	if !wanted("B7") {
		t.Skip("not selected")
	}
	dir := t.TempDir()
	stripped := filepath.Join(dir, "restysync")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", stripped,
		"github.com/restysync/restysync/agent/cmd/restysync")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	if err != nil {
		t.Fatalf("building the agent: %v\n%s", err, out)
	}
	info, err := os.Stat(stripped)
	if err != nil {
		t.Fatal(err)
	}
	size := info.Size()
	report(t, Row{ID: "B7-binary", What: "agent binary, stripped (CGO_ENABLED=0, -trimpath, -ldflags '-s -w', as agent/Dockerfile builds it)",
		Target: "≤ 40 MB", Measured: fmt.Sprintf("%.1f MB", float64(size)/(1<<20)), Pass: size <= 40<<20})

	podnet.Require(t)
	c := startCluster(t)
	pod := podnet.New(t, "pod-b7")
	const n = 100
	var objs []any
	for i := range n {
		name := "idle" + strconv.Itoa(i)
		objs = append(objs, service(name), slice(name, pod.IP), ingress(name, name+".idle.test", name))
	}
	c.createAll(objs)
	a := startAgent(t, c)
	a.waitFor("idle99.idle.test", "/", "", 60*time.Second)
	// Idle: let the first syncs' garbage be collected (the Go runtime
	// returns memory to the OS a few minutes after a GC at the latest;
	// RSS is read after 10 s, as a pod's first minute would show it).
	time.Sleep(10 * time.Second)
	rss := a.rssKiB()
	report(t, Row{ID: "B7-rss", What: fmt.Sprintf("agent RSS idle, %d Ingresses from the real API server", n),
		Target: "≤ 35 MB", Measured: fmt.Sprintf("%.1f MB", float64(rss)/1024), Pass: rss > 0 && rss <= 35*1024,
		Note: "VmRSS of the agent process 10 s after it served the first Ingress"})
}
