package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
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

// Bounds of the demo's start and stop (its own bound on the start is 30 s).
const (
	demoUpTimeout   = 45 * time.Second
	demoStopTimeout = 30 * time.Second
)

const demoUp = "restysync demo is up."

// demoRun is README command 1's program, started by a test.
type demoRun struct {
	t    *testing.T
	cmd  *exec.Cmd
	done chan error
	out  *syncbuf.Buffer // stdout and stderr, unless the test gave its own
	port int
	// manifests is the demo's folder, a copy of examples/local.
	manifests string
}

// startDemo runs the demo binary on a copy of examples/local, on port,
// its output into out (nil: a buffer of its own).
func startDemo(t *testing.T, port int, out io.Writer) *demoRun {
	t.Helper()
	nginxproc.Binary(t) // fails under CI=true when nginx is missing
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
	d := &demoRun{t: t, done: make(chan error, 1), out: &syncbuf.Buffer{}, port: port, manifests: manifests}
	if out == nil {
		out = d.out
	}
	d.cmd = exec.Command(demoBinary, "--agent", agentBinary, "--manifests", manifests, "--port", strconv.Itoa(port))
	d.cmd.Stdout, d.cmd.Stderr = out, out
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(func() {
		if d.cmd.ProcessState == nil { // still running: the test failed before stopping it
			ps, _ := exec.Command("ps", "-o", "pid,stat,args", "--ppid", strconv.Itoa(d.cmd.Process.Pid)).CombinedOutput()
			t.Logf("demo's children:\n%s", ps)
			// Its children are in groups of their own; SIGKILL to the demo
			// fires their parent-death signal.
			syscall.Kill(d.cmd.Process.Pid, syscall.SIGKILL)
			select {
			case <-d.done:
			case <-time.After(demoStopTimeout):
				t.Errorf("demo did not die within %s of SIGKILL", demoStopTimeout)
			}
		}
		if t.Failed() {
			t.Logf("demo output:\n%s", d.out.String())
		}
	})
	return d
}

// waitUp waits for the demo to say it is up.
func (d *demoRun) waitUp() {
	d.t.Helper()
	deadline := time.Now().Add(demoUpTimeout)
	for !strings.Contains(d.out.String(), demoUp) {
		select {
		case err := <-d.done:
			d.done <- err
			d.t.Fatalf("demo exited before it was up: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("demo not up within %s", demoUpTimeout)
		}
	}
}

// wait returns the demo's exit, failing the test past demoStopTimeout.
func (d *demoRun) wait() error {
	d.t.Helper()
	select {
	case err := <-d.done:
		return err
	case <-time.After(demoStopTimeout):
		d.t.Fatalf("demo did not exit within %s", demoStopTimeout)
		return nil
	}
}

// checkNothingLeft fails the test for each process of started still running,
// and if anything answers on the demo's port.
func (d *demoRun) checkNothingLeft(started map[int]string) {
	d.t.Helper()
	// Orphans the demo left would be re-parented, not gone: look them up by
	// pid and command line. A parent-death signal may still be on its way.
	deadline := time.Now().Add(stopTimeout)
	for {
		var left []string
		for pid, cmdline := range started {
			if now, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && string(now) == cmdline {
				left = append(left, fmt.Sprintf("%d (%s)", pid, strings.ReplaceAll(cmdline, "\x00", " ")))
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			d.t.Errorf("processes outlived the demo: %s", strings.Join(left, "; "))
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(d.port)), time.Second); err == nil {
		conn.Close()
		d.t.Error("something still listens on the demo's port after it stopped")
	}
}

// demoPort returns a port p with p+1 (the demo's HTTPS port) free as well.
func demoPort(t *testing.T) int {
	t.Helper()
	for range 20 {
		p := nginxproc.FreePort(t)
		if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p+1))); err == nil {
			l.Close()
			return p
		}
	}
	t.Fatal("no free pair of ports after 20 tries")
	return 0
}

// TestDemo runs README command 1's program: it says it is up only once its
// nginx answers, answers round robin across its three backends, moves
// traffic when the EndpointSlice file is edited, and exits 0 leaving
// nothing running after Ctrl-C.
func TestDemo(t *testing.T) {
	d := startDemo(t, demoPort(t), nil)
	d.waitUp()
	if !strings.Contains(d.out.String(), "http://demo.localhost:"+strconv.Itoa(d.port)+"/") {
		t.Errorf("the demo does not print its URL")
	}

	s := &stack{t: t, client: clientTo(d.port)}
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

	reloadsBefore := strings.Count(d.out.String(), "action=reload")
	data, err := os.ReadFile(filepath.Join(d.manifests, "endpointslice.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(data), `["127.0.0.11"]`, `["127.0.0.14"]`, 1)
	s.manifests = d.manifests
	s.writeFile("endpointslice.yaml", edited)
	s.eventually("demo-4 answers after the edit", func() error {
		_, body, err := s.get("demo.localhost", "/")
		if err != nil || !strings.HasPrefix(body, "demo-4") {
			return errorf("%q %v", body, err)
		}
		return nil
	})

	started := descendants(d.cmd.Process.Pid) // the agent, nginx's master and worker (the backends run in the demo)
	if len(started) < 3 {
		t.Errorf("the demo runs %d processes, want at least the agent and nginx's master and worker: %v", len(started), started)
	}
	s.client.CloseIdleConnections()
	if err := syscall.Kill(d.cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := d.wait(); err != nil {
		t.Errorf("demo exited with %v after Ctrl-C, want 0", err)
	}
	d.checkNothingLeft(started)
	if after := strings.Count(d.out.String(), "action=reload"); after != reloadsBefore {
		t.Errorf("the agent reloaded nginx on an endpoint edit (%d reloads, %d before)", after, reloadsBefore)
	}
	if !strings.Contains(d.out.String(), "action=push") {
		t.Error("the agent log shows no push")
	}
	// The file source takes the fast path for an EndpointSlice-only save,
	// and the sync log line names the slice.
	if want := `action=push path=fast changed="EndpointSlice default/demo-1"`; !strings.Contains(d.out.String(), want) {
		t.Errorf("the agent log has no line with %s", want)
	}
}

// A closed pipe on the demo's output (`go tool task demo | tee demo.log`,
// and tee ended) stops the demo and everything it started.
func TestDemoStopsWhenItsOutputCloses(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	d := startDemo(t, demoPort(t), w)
	w.Close() // the demo holds the write end now
	// Read the output until "up", then close the read end as tee would.
	up := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			d.out.Write([]byte(sc.Text() + "\n"))
			if strings.Contains(sc.Text(), demoUp) {
				up <- true
				return
			}
		}
		up <- false
	}()
	select {
	case ok := <-up:
		if !ok {
			t.Fatal("the demo's output ended before it was up")
		}
	case <-time.After(demoUpTimeout):
		t.Fatalf("demo not up within %s", demoUpTimeout)
	}
	started := descendants(d.cmd.Process.Pid)
	if len(started) < 3 {
		t.Errorf("the demo runs %d processes, want at least the agent and nginx's master and worker: %v", len(started), started)
	}
	r.Close()
	if err := d.wait(); err != nil {
		t.Errorf("demo exited with %v after its output closed, want 0", err)
	}
	d.checkNothingLeft(started)
}

// A port in use stops the demo before it starts anything, with a message
// naming the port: an old nginx (any server) on it can never pass for the
// demo's own.
func TestDemoRefusesABusyPort(t *testing.T) {
	for _, offset := range []int{0, 1} { // --port, and --port + 1 (HTTPS)
		t.Run([]string{"http", "https"}[offset], func(t *testing.T) {
			port := demoPort(t)
			busy := net.JoinHostPort("127.0.0.1", strconv.Itoa(port+offset))
			l, err := net.Listen("tcp", busy)
			if err != nil {
				t.Fatal(err)
			}
			old := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintln(w, "demo-1 (127.0.0.11:9000) / from an old nginx")
			}), ReadHeaderTimeout: 5 * time.Second}
			go old.Serve(l)
			defer old.Close()

			d := startDemo(t, port, nil)
			err = d.wait()
			if err == nil || d.cmd.ProcessState.ExitCode() == 0 {
				t.Errorf("demo exited with %v on a busy port, want non-zero", err)
			}
			out := d.out.String()
			if strings.Contains(out, demoUp) {
				t.Error("the demo says it is up while another server holds its port")
			}
			if !strings.Contains(out, busy+" ") || !strings.Contains(out, "is in use") || !strings.Contains(out, "--port") {
				t.Errorf("the error does not name %s as in use and --port as the way out:\n%s", busy, out)
			}
			if strings.Contains(out, "[agent]") || strings.Contains(out, "[nginx]") {
				t.Errorf("the demo started the agent or nginx before finding the port in use:\n%s", out)
			}
			if n := strings.Count(strings.TrimSpace(out), "\n"); n != 0 {
				t.Errorf("want one line, got %d:\n%s", n+1, out)
			}
		})
	}
}
