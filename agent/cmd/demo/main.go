// Command demo is README command 1: it runs the whole pipeline on one
// machine — five demo backends on 127.0.0.11-15:9000, the agent on a folder
// of manifests (the file source), and nginx or OpenResty — prints the URL to
// curl, and stops everything it started on Ctrl-C.
//
// It is a Go program rather than a shell script so that stopping is exact:
// nginx gets SIGQUIT and a bounded wait, then its process group is killed,
// and nothing outlives the demo.
package main

import (
	"context"
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
)

// The demo backends. examples/local/endpointslice.yaml lists the first
// three; the other two are there to be added by editing it.
var backendAddrs = []string{"127.0.0.11", "127.0.0.12", "127.0.0.13", "127.0.0.14", "127.0.0.15"}

const backendPort = 9000

// debianLuaModules are the dynamic modules Debian's libnginx-mod-http-lua
// installs, in load order.
var debianLuaModules = []string{
	"/usr/share/nginx/modules/ndk_http_module.so",
	"/usr/share/nginx/modules/ngx_http_lua_module.so",
}

// debianHeadersMoreModule is Debian's libnginx-mod-http-headers-more-filter
// (go tool task nginx installs it): loaded when installed, snippets'
// more_set_headers are written as themselves.
const debianHeadersMoreModule = "/usr/share/nginx/modules/ngx_http_headers_more_filter_module.so"

const stopTimeout = 10 * time.Second

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run() error {
	agentBin := flag.String("agent", "", "path of the restysync binary")
	manifests := flag.String("manifests", "examples/local", "folder of manifests the agent watches")
	port := flag.Int("port", 8080, "port nginx serves HTTP on (127.0.0.1)")
	check := flag.Int("check", 0, "send this many requests, print the answers and exit (for tests)")
	flag.Parse()
	if *agentBin == "" {
		return errors.New("--agent is required")
	}
	dir, err := filepath.Abs(*manifests)
	if err != nil {
		return err
	}

	shared, err := os.MkdirTemp("", "restysync-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(shared)
	// nginx workers run as an unprivileged user when the master is root.
	if err := os.Chmod(shared, 0o755); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	servers, err := startBackends()
	if err != nil {
		return err
	}
	defer func() {
		for _, s := range servers {
			s.Close()
		}
	}()

	nginxBin, modules, err := findNginx()
	if err != nil {
		return err
	}

	args := []string{"run", "--source", "file:" + dir, "--shared-dir", shared,
		"--http-port", strconv.Itoa(*port), "--https-port", strconv.Itoa(*port + 1),
		"--listen-address", "127.0.0.1",
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

	if err := waitFor(ctx, 10*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(shared, "nginx.conf"))
		return err == nil
	}); err != nil {
		return fmt.Errorf("agent wrote no nginx.conf: %w", err)
	}
	os.Remove(filepath.Join(shared, "restysync.sock")) // stale only; this folder is new
	nginx, err := startProcess("nginx", nginxBin, "-p", shared+"/", "-c", "nginx.conf", "-e", "stderr", "-g", "daemon off;")
	if err != nil {
		return err
	}
	defer nginx.stop(syscall.SIGQUIT)

	url := fmt.Sprintf("http://demo.localhost:%d/", *port)
	client := demoClient(*port)
	if err := waitFor(ctx, 20*time.Second, func() bool {
		resp, err := client.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}); err != nil {
		return fmt.Errorf("%s did not answer 200: %w", url, err)
	}

	if *check > 0 {
		for range *check {
			body, err := get(client, url)
			if err != nil {
				return err
			}
			fmt.Print(body)
		}
		return nil
	}

	fmt.Printf(`
restysync demo is up.

  URL:        %[1]s
  try:        for i in 1 2 3 4 5 6; do curl -s %[1]s; done
  manifests:  %[2]s  (edit endpointslice.yaml: add 127.0.0.14 or .15, or remove one;
              traffic moves on the next request, without an nginx reload)
  nginx:      %[3]s -p %[4]s/ -c nginx.conf

Ctrl-C stops everything.

`, url, dir, nginxBin, shared)

	select {
	case <-ctx.Done():
	case <-agent.done:
		return fmt.Errorf("agent exited: %v", agent.cmd.ProcessState)
	case <-nginx.done:
		return fmt.Errorf("nginx exited: %v", nginx.cmd.ProcessState)
	}
	fmt.Println("\nstopping")
	return nil
}

// startBackends starts one HTTP server per demo address; each answers with its name.
func startBackends() ([]*http.Server, error) {
	var servers []*http.Server
	for i, addr := range backendAddrs {
		name := fmt.Sprintf("demo-%d", i+1)
		hostPort := net.JoinHostPort(addr, strconv.Itoa(backendPort))
		l, err := net.Listen("tcp", hostPort)
		if err != nil {
			for _, s := range servers {
				s.Close()
			}
			return nil, fmt.Errorf("demo backend %s: %w", name, err)
		}
		s := &http.Server{
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			},
		},
	}
}

func get(c *http.Client, url string) (string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return string(body), nil
}

func waitFor(ctx context.Context, timeout time.Duration, ok func() bool) error {
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// process is a child in its own process group, its output prefixed with its name.
type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

func startProcess(name, bin string, args ...string) (*process, error) {
	p := &process{name: name, cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Stdout = prefixWriter(name)
	p.cmd.Stderr = p.cmd.Stdout
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
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

func (l *linePrefixer) Write(p []byte) (int, error) {
	var b strings.Builder
	for _, c := range string(p) {
		if l.atBOL {
			b.WriteString(l.prefix)
		}
		b.WriteRune(c)
		l.atBOL = c == '\n'
	}
	_, err := io.WriteString(l.w, b.String())
	return len(p), err
}
