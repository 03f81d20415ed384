package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
	"github.com/restysync/restysync/agent/internal/testenv/syncbuf"
)

// Bounds of every wait in these tests.
const (
	eventuallyTimeout = 15 * time.Second
	stopTimeout       = 10 * time.Second
)

// Binaries built once by TestMain.
var (
	agentBinary string
	demoBinary  string
)

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "restysync-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	agentBinary = filepath.Join(dir, "restysync")
	demoBinary = filepath.Join(dir, "demo")
	for bin, pkg := range map[string]string{
		agentBinary: "github.com/restysync/restysync/agent/cmd/restysync",
		demoBinary:  "github.com/restysync/restysync/agent/cmd/demo",
	} {
		// e2ehooks: the hooks of agent/internal/syncer/e2ehooks.go, inert
		// unless a test sets their environment variables.
		out, err := exec.Command("go", "build", "-tags", "e2ehooks", "-o", bin, pkg).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n%s", pkg, err, out)
			return 1
		}
	}
	return m.Run()
}

// stack is the whole pipeline on loopback: the agent binary on a folder of
// manifests (the file source), and a real nginx it configures.
type stack struct {
	t         *testing.T
	manifests string // the folder the agent watches
	shared    string // the shared dir: nginx's prefix
	port      int    // nginx's HTTP port on 127.0.0.1
	admin     string // the agent's admin server, http://127.0.0.1:PORT
	agent     *agentProcess
	agentArgs []string
	// agentPrefix, when set, is the command the agent runs under
	// (TestComposeTopology: setpriv with the compose file's capabilities).
	agentPrefix []string
	nginx       *nginxproc.Nginx
	client      *http.Client
}

// newStack writes files into a new manifests folder, starts the agent on
// it, then nginx on the config the agent wrote, as a pod would.
func newStack(t *testing.T, files map[string]string) *stack {
	t.Helper()
	s := &stack{t: t, manifests: t.TempDir()}
	for name, content := range files {
		s.writeFile(name, content)
	}
	s.start("--source", "file:"+s.manifests)
	return s
}

// start runs the agent with the source args and nginx beside it.
func (s *stack) start(sourceArgs ...string) {
	s.t.Helper()
	s.startAgentOnly(sourceArgs...)
	s.startNginx()
}

// startAgentOnly runs the agent with the source args and waits for its
// nginx.conf; startNginx then starts nginx on it.
func (s *stack) startAgentOnly(sourceArgs ...string) {
	t := s.t
	t.Helper()
	nginxproc.Binary(t) // fails under CI=true when nginx is missing
	s.shared, s.port = nginxproc.TempPrefix(t), nginxproc.FreePort(t)
	adminAddr := "127.0.0.1:" + strconv.Itoa(nginxproc.FreePort(t))
	s.admin = "http://" + adminAddr
	s.agentArgs = append(append([]string{"run"}, sourceArgs...),
		"--shared-dir", s.shared,
		"--http-port", strconv.Itoa(s.port),
		"--https-port", strconv.Itoa(nginxproc.FreePort(t)),
		"--listen-address", "127.0.0.1",
		"--worker-processes", "2",
		"--log-level", "debug",
		"--metrics-address", adminAddr,
	)
	for _, m := range nginxproc.DebianLoadModules() {
		s.agentArgs = append(s.agentArgs, "--load-module", m)
	}
	s.agent = startAgentUnder(t, s.agentPrefix, s.agentArgs...)
	s.eventually("the agent writes nginx.conf", func() error {
		_, err := os.Stat(filepath.Join(s.shared, "nginx.conf"))
		return err
	})
}

func (s *stack) startNginx() {
	t := s.t
	t.Helper()
	s.nginx = nginxproc.Start(t, s.shared)
	s.client = clientTo(s.port)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent log:\n%s", s.agent.log.String())
			t.Logf("%s", s.nginx.Logs())
		}
	})
	s.settle()
}

// settle waits until the agent is ready (its first config applied and
// confirmed) and no nginx worker of the bootstrap config is left, so a test's
// first request meets the config under test.
func (s *stack) settle() {
	s.t.Helper()
	s.eventually("the agent is ready", func() error { return s.expectAdmin("/readyz", http.StatusOK) })
	s.steadyWorkers()
}

// steadyWorkers waits until no worker of an earlier config is left and the
// set of workers has stayed the same for a moment (an old worker renames itself
// "shutting down" only some time after the master signals it), and returns it:
// the baseline for a "no reload" check.
func (s *stack) steadyWorkers() []int {
	s.t.Helper()
	const steadyFor = 200 * time.Millisecond
	var last []int
	var since time.Time
	s.eventually("the earlier config's workers are gone", func() error {
		now := s.nginx.WorkerPIDs()
		if !slices.Equal(now, last) || s.nginx.Draining() {
			last, since = now, time.Now()
		}
		if time.Since(since) < steadyFor {
			return fmt.Errorf("workers %v not steady for %s", last, steadyFor)
		}
		return nil
	})
	return last
}

// writeFile saves a manifest the way editors do: a temp file renamed over it.
func (s *stack) writeFile(name, content string) {
	s.t.Helper()
	tmp := filepath.Join(s.manifests, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		s.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(s.manifests, name)); err != nil {
		s.t.Fatal(err)
	}
}

func (s *stack) removeFile(name string) {
	s.t.Helper()
	if err := os.Remove(filepath.Join(s.manifests, name)); err != nil {
		s.t.Fatal(err)
	}
}

// get sends GET path with the Host header host and returns status and body.
func (s *stack) get(host, path string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+host+path, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, strings.TrimSpace(string(body)), err
}

// expect checks that host+path answers want: a backend name ("127.0.0.21")
// for a 200, or a status code ("404", "503").
func (s *stack) expect(host, path, want string) error {
	status, body, err := s.get(host, path)
	if err != nil {
		return err
	}
	got := strconv.Itoa(status)
	if status == http.StatusOK {
		got = body
	}
	if got != want {
		return fmt.Errorf("%s%s: got %s, want %s", host, path, got, want)
	}
	return nil
}

// eventually retries check every 20 ms until it passes or the bound is hit.
func (s *stack) eventually(what string, check func() error) {
	s.t.Helper()
	deadline := time.Now().Add(eventuallyTimeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: not within %s: %v", what, eventuallyTimeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// clientTo returns a client that sends every request to 127.0.0.1:port,
// whatever the URL's host, so the URL's host is the Host header.
func clientTo(port int) *http.Client {
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			},
			MaxIdleConnsPerHost: 4,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// agentProcess is the agent binary running in its own process group.
type agentProcess struct {
	cmd  *exec.Cmd
	log  *syncbuf.Buffer
	done chan struct{}
}

func startAgent(t *testing.T, args ...string) *agentProcess {
	t.Helper()
	return startAgentUnder(t, nil, args...)
}

// startAgentUnder is startAgent with the agent run by the command prefix,
// which must exec it (so that the agent keeps the pid it starts with).
func startAgentUnder(t *testing.T, prefix []string, args ...string) *agentProcess {
	t.Helper()
	argv := append(append(slices.Clone(prefix), agentBinary), args...)
	a := &agentProcess{cmd: exec.Command(argv[0], argv[1:]...), log: &syncbuf.Buffer{}, done: make(chan struct{})}
	a.cmd.Stdout, a.cmd.Stderr = a.log, a.log
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := a.cmd.Start(); err != nil {
		t.Fatalf("starting the agent: %v", err)
	}
	go func() {
		a.cmd.Wait()
		close(a.done)
	}()
	t.Cleanup(func() { a.stop(t) })
	return a
}

// stop sends SIGTERM and waits; past the bound it kills the process group.
func (a *agentProcess) stop(t *testing.T) {
	pid := a.cmd.Process.Pid
	syscall.Kill(pid, syscall.SIGTERM)
	select {
	case <-a.done:
	case <-time.After(stopTimeout):
		t.Errorf("agent did not stop within %s on SIGTERM; killing it", stopTimeout)
		syscall.Kill(-pid, syscall.SIGKILL)
		<-a.done
	}
}

// backends are HTTP servers on several loopback addresses and one port,
// each answering with its own address, as the endpoints of a Service do.
type backends struct {
	port int
	mu   sync.Mutex
	hits map[string]int
}

// startBackends listens on every address in addrs on one port that is free
// on all of them, and stops them when the test ends.
func startBackends(t *testing.T, addrs ...string) *backends {
	t.Helper()
	return startBackendsWith(t, func(addr string) string { return addr + "\n" }, addrs...)
}

// startBackendsWith is startBackends with the answer of each address given.
func startBackendsWith(t *testing.T, answer func(addr string) string, addrs ...string) *backends {
	t.Helper()
	for attempt := 0; attempt < 20; attempt++ {
		port := nginxproc.FreePort(t)
		var listeners []net.Listener
		for _, addr := range addrs {
			l, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(port)))
			if err != nil {
				break
			}
			listeners = append(listeners, l)
		}
		if len(listeners) < len(addrs) {
			for _, l := range listeners {
				l.Close()
			}
			continue
		}
		b := &backends{port: port, hits: map[string]int{}}
		for i, l := range listeners {
			name := addrs[i]
			srv := &http.Server{
				Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					b.mu.Lock()
					b.hits[name]++
					b.mu.Unlock()
					io.WriteString(w, answer(name))
				}),
				ReadHeaderTimeout: 5 * time.Second,
			}
			go srv.Serve(l)
			t.Cleanup(func() { srv.Close() })
		}
		return b
	}
	t.Fatalf("no port free on all of %v", addrs)
	return nil
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
