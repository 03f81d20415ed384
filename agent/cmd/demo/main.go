// Command demo is README command 1: it runs the whole pipeline on one
// machine — five demo backends on 127.0.0.11-15:9000, the agent on a folder
// of manifests (the file source), and nginx or OpenResty — prints the URL to
// curl, and stops everything it started on Ctrl-C.
//
// It is a Go program rather than a shell script so that starting and
// stopping are exact. Every port it needs is bound once before anything
// starts, so a busy port is an error naming it, not an nginx that fails
// after the demo said it was up; "up" is printed only when a request to its
// port comes back through nginx from its own backends carrying this run's
// token, so no server left on the port can pass for it. The agent and nginx
// run in process groups of their own with a parent-death signal: Ctrl-C, a
// closed pipe on stdout (SIGPIPE) or the demo's own death stops them, with
// a bounded wait before the group is killed.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The demo backends. examples/local/endpointslice.yaml lists the first
// three; the other two are there to be added by editing it.
var backendAddrs = []string{"127.0.0.11", "127.0.0.12", "127.0.0.13", "127.0.0.14", "127.0.0.15"}

const backendPort = 9000

// adminAddr is the agent's default --metrics-address, where `restysync
// inspect` finds it.
const adminAddr = "127.0.0.1:10254"

// tokenHeader carries this run's token in every backend answer.
const tokenHeader = "X-Restysync-Demo"

// debianLuaModules are the dynamic modules Debian's libnginx-mod-http-lua
// installs, in load order.
var debianLuaModules = []string{
	"/usr/share/nginx/modules/ndk_http_module.so",
	"/usr/share/nginx/modules/ngx_http_lua_module.so",
}

const (
	startTimeout = 30 * time.Second // from start to "up"
	stopTimeout  = 10 * time.Second // per process, before its group is killed
)

// debianHeadersMoreModule is Debian's libnginx-mod-http-headers-more-filter
// (go tool task nginx installs it): loaded when installed, snippets'
// more_set_headers are written as themselves.
const debianHeadersMoreModule = "/usr/share/nginx/modules/ngx_http_headers_more_filter_module.so"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run() error {
	agentBin := flag.String("agent", "", "path of the restysync binary")
	manifests := flag.String("manifests", "examples/local", "folder of manifests the agent watches")
	port := flag.Int("port", 8080, "port nginx serves HTTP on (127.0.0.1); HTTPS is on port+1")
	flag.Parse()
	if *agentBin == "" {
		return errors.New("--agent is required")
	}
	if *port < 1 || *port > 65534 {
		return fmt.Errorf("--port %d: want 1 to 65534 (HTTPS is on --port + 1)", *port)
	}
	dir, err := filepath.Abs(*manifests)
	if err != nil {
		return err
	}
	nginxBin, modules, err := findNginx()
	if err != nil {
		return err
	}

	ctx, cancel := stopContext()
	defer cancel()

	// Every port before anything starts.
	if err := checkFree(*port); err != nil {
		return err
	}
	token, err := newToken()
	if err != nil {
		return err
	}
	servers, err := startBackends(token)
	if err != nil {
		return err
	}
	defer func() {
		for _, s := range servers {
			s.Close()
		}
	}()

	shared, err := os.MkdirTemp("", "restysync-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(shared)
	// nginx workers run as an unprivileged user when the master is root.
	if err := os.Chmod(shared, 0o755); err != nil {
		return err
	}

	args := []string{"run", "--source", "file:" + dir, "--shared-dir", shared,
		"--http-port", strconv.Itoa(*port), "--https-port", strconv.Itoa(*port + 1),
		"--listen-address", "127.0.0.1", "--metrics-address", adminAddr,
		// One worker, so curl sees the round robin in order; each worker keeps its own turn.
		"--worker-processes", "1"}
	for _, m := range modules {
		args = append(args, "--load-module", m)
	}
	agent, err := startProcess("agent", *agentBin, args...)
	if err != nil {
		return err
	}
	defer agent.stop(syscall.SIGTERM)

	deadline := time.Now().Add(startTimeout)
	if err := waitFor(ctx, deadline, []*process{agent}, func() error {
		_, err := os.Stat(filepath.Join(shared, "nginx.conf"))
		return err
	}); err != nil {
		return stopped(ctx, fmt.Errorf("the agent wrote no nginx.conf: %w", err))
	}
	nginx, err := startProcess("nginx", nginxBin, "-p", shared+"/", "-c", "nginx.conf", "-e", "stderr", "-g", "daemon off;")
	if err != nil {
		return err
	}
	defer nginx.stop(syscall.SIGQUIT)

	url := fmt.Sprintf("http://demo.localhost:%d/", *port)
	client := demoClient(*port)
	if err := waitFor(ctx, deadline, []*process{agent, nginx}, func() error {
		return answersWith(client, url, token)
	}); err != nil {
		return stopped(ctx, fmt.Errorf("%s did not answer from this demo's backends: %w", url, err))
	}

	fmt.Printf(`
restysync demo is up.

  URL:        %[1]s
  try:        for i in 1 2 3 4 5 6; do curl -s %[1]s; done
  manifests:  %[2]s  (edit endpointslice.yaml: add 127.0.0.14 or .15, or remove one;
              traffic moves on the next request, without an nginx reload)
  nginx:      %[3]s -p %[4]s/ -c nginx.conf
  inspect:    restysync inspect --admin %[5]s

Ctrl-C stops everything.

`, url, dir, nginxBin, shared, adminAddr)

	select {
	case <-ctx.Done():
	case <-agent.done:
		return fmt.Errorf("the agent exited: %v", agent.cmd.ProcessState)
	case <-nginx.done:
		return fmt.Errorf("nginx exited: %v", nginx.cmd.ProcessState)
	}
	// A second Ctrl-C ends the demo at once; the parent-death signal stops the rest.
	signal.Reset(os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	fmt.Fprintln(os.Stderr, "\ndemo: stopping")
	return nil
}

// stopContext is done on Ctrl-C (SIGINT), SIGTERM or SIGHUP, and when
// stdout or stderr is a pipe whose reader has gone (`go tool task demo |
// tee demo.log`, and tee ended). SIGPIPE is caught for the demo's whole
// life: a write to the closed pipe fails with EPIPE instead of killing the
// demo before it has stopped what it started.
func stopContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	closed := outputClosed()
	go func() {
		select {
		case <-sigs:
		case <-closed:
		}
		cancel()
	}()
	return ctx, cancel
}

// stopped is err, or nil when a signal asked the demo to stop (Ctrl-C
// during the start is a clean stop too).
func stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		fmt.Fprintln(os.Stderr, "\ndemo: stopping")
		return nil
	}
	return err
}

// checkFree binds every port the agent and nginx will listen on, and
// releases them: a port in use is an error before anything starts.
func checkFree(port int) error {
	for _, p := range []struct{ addr, what string }{
		{net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), "nginx's HTTP port, --port"},
		{net.JoinHostPort("127.0.0.1", strconv.Itoa(port+1)), "nginx's HTTPS port, --port + 1"},
		{adminAddr, "the agent's admin server, where restysync inspect asks"},
	} {
		l, err := net.Listen("tcp", p.addr)
		if err != nil {
			return fmt.Errorf("%s (%s) is in use: stop what listens there (ss -ltnp 'sport = :%s' names it), or give the demo another port: go tool task demo -- --port 9090",
				p.addr, p.what, p.addr[strings.LastIndexByte(p.addr, ':')+1:])
		}
		l.Close()
	}
	return nil
}

func newToken() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// startBackends starts one HTTP server per demo address; each answers with
// its name, and with token in tokenHeader.
func startBackends(token string) ([]*http.Server, error) {
	var servers []*http.Server
	for i, addr := range backendAddrs {
		name := fmt.Sprintf("demo-%d", i+1)
		hostPort := net.JoinHostPort(addr, strconv.Itoa(backendPort))
		l, err := net.Listen("tcp", hostPort)
		if err != nil {
			for _, s := range servers {
				s.Close()
			}
			return nil, fmt.Errorf("demo backend %s: %s is in use (another demo still running?): %w", name, hostPort, err)
		}
		s := &http.Server{
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set(tokenHeader, token)
				fmt.Fprintf(w, "%s (%s) %s\n", name, hostPort, r.URL.Path)
			}),
			ReadHeaderTimeout: 5 * time.Second,
		}
		go s.Serve(l)
		servers = append(servers, s)
	}
	return servers, nil
}

// findNginx prefers openresty; else nginx, with Debian's Lua modules when installed.
func findNginx() (string, []string, error) {
	if path, err := exec.LookPath("openresty"); err == nil {
		return path, nil, nil
	}
	path, err := exec.LookPath("nginx")
	if err != nil {
		return "", nil, errors.New("neither openresty nor nginx is on PATH (go tool task nginx installs Debian's)")
	}
	if _, err := os.Stat(debianLuaModules[1]); err == nil {
		modules := slices.Clone(debianLuaModules)
		if _, err := os.Stat(debianHeadersMoreModule); err == nil {
			modules = append(modules, debianHeadersMoreModule)
		}
		return path, modules, nil
	}
	return path, nil, nil
}

// demoClient sends every request to 127.0.0.1:port, whatever the host, as
// curl does for *.localhost.
func demoClient(port int) *http.Client {
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			DisableKeepAlives: true, // nginx's graceful stop waits for idle connections too
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			},
		},
	}
}

// answersWith is nil when url answers 200 with this run's token, which only
// this demo's backends send.
func answersWith(c *http.Client, url, token string) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s", resp.Status)
	}
	if got := resp.Header.Get(tokenHeader); got != token {
		return fmt.Errorf("the answer is not from this demo's backends (%s: %q, want %q)", tokenHeader, got, token)
	}
	return nil
}

// waitFor polls ok until it returns nil, the deadline passes, ctx is done
// or one of procs exits.
func waitFor(ctx context.Context, deadline time.Time, procs []*process, ok func() error) error {
	for {
		err := ok()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s: %w", startTimeout, err)
		}
		for _, p := range procs {
			select {
			case <-p.done:
				return fmt.Errorf("%s exited (%v); its output is above", p.name, p.cmd.ProcessState)
			default:
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// outputClosed is closed when stdout or stderr is a pipe whose reader has
// gone, at once rather than at the demo's next write; a terminal that hangs
// up counts too.
func outputClosed() <-chan struct{} {
	closed := make(chan struct{})
	go func() {
		fds := []unix.PollFd{{Fd: 1}, {Fd: 2}} // no events asked: POLLERR and POLLHUP are always reported
		for {
			_, err := unix.Poll(fds, -1)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return
			}
			for _, f := range fds {
				if f.Revents&(unix.POLLERR|unix.POLLHUP) != 0 {
					close(closed)
					return
				}
			}
			return // POLLNVAL: not a descriptor to watch
		}
	}()
	return closed
}

// process is a child in its own process group, its output prefixed with
// its name on stderr.
type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

func startProcess(name, bin string, args ...string) (*process, error) {
	p := &process{name: name, cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Stdout = prefixWriter(name)
	p.cmd.Stderr = p.cmd.Stdout
	// Its own group, so a terminal's Ctrl-C reaches the demo alone and the
	// demo stops it in order; SIGTERM when the demo dies without stopping
	// it (nginx's master then stops its workers).
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// stop sends sig, waits up to stopTimeout, then kills the process group.
func (p *process) stop(sig syscall.Signal) {
	pid := p.cmd.Process.Pid
	syscall.Kill(pid, sig)
	select {
	case <-p.done:
	case <-time.After(stopTimeout):
		fmt.Fprintf(os.Stderr, "demo: %s did not stop within %s; killing it\n", p.name, stopTimeout)
		syscall.Kill(-pid, syscall.SIGKILL)
		<-p.done
	}
	syscall.Kill(-pid, syscall.SIGKILL) // no worker outlives its master
}

type linePrefixer struct {
	prefix string
	w      io.Writer
	atBOL  bool
}

func prefixWriter(name string) io.Writer {
	return &linePrefixer{prefix: fmt.Sprintf("[%s] ", name), w: os.Stderr, atBOL: true}
}

// Write never fails: a child must not block on a full pipe because the
// demo's stderr was closed.
func (l *linePrefixer) Write(p []byte) (int, error) {
	var b strings.Builder
	for _, c := range string(p) {
		if l.atBOL {
			b.WriteString(l.prefix)
		}
		b.WriteRune(c)
		l.atBOL = c == '\n'
	}
	io.WriteString(l.w, b.String())
	return len(p), nil
}
