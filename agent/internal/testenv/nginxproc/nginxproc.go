// Package nginxproc starts a real nginx for tests of the data plane (render
// and lua): nginx runs a rendered nginx.conf from a prefix folder, and the
// test talks to it over HTTP and over the config API socket.
//
// nginx is stopped the way DESIGN.md says it must be: SIGQUIT and a bounded
// wait, then SIGKILL of the whole process group, because a master killed
// alone leaves its workers listening.
package nginxproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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

	"github.com/restysync/restysync/agent/internal/luaapi"
	"github.com/restysync/restysync/agent/internal/testenv/freeport"
	"github.com/restysync/restysync/agent/internal/testenv/syncbuf"
)

// File names in the prefix; they match render's layout.
const (
	configName = "nginx.conf"
	pidName    = "nginx.pid"
	socketName = "restysync.sock"
)

// Timeouts of starting, reloading and stopping nginx.
const (
	startTimeout = 10 * time.Second
	stopTimeout  = 10 * time.Second
)

// debianModules are where Debian's libnginx-mod-http-lua and its dependency
// ndk put their dynamic modules, in load order.
var debianModules = []string{
	"/usr/share/nginx/modules/ndk_http_module.so",
	"/usr/share/nginx/modules/ngx_http_lua_module.so",
}

// find picks the binary: openresty (Lua built in) if it is on PATH, else
// nginx, with Debian's dynamic Lua module if it is installed. It looks once.
var find = sync.OnceValues(func() (found, error) {
	if path, err := exec.LookPath("openresty"); err == nil {
		return found{binary: path}, nil
	}
	path, err := exec.LookPath("nginx")
	if err != nil {
		return found{}, errors.New("neither openresty nor nginx is on PATH; install them with `go tool task nginx`")
	}
	if _, err := os.Stat(debianModules[1]); err == nil {
		return found{binary: path, modules: slices.Clone(debianModules)}, nil
	}
	out, err := exec.Command(path, "-V").CombinedOutput()
	if err != nil {
		return found{}, fmt.Errorf("running %s -V: %w", path, err)
	}
	if !bytes.Contains(out, []byte("lua")) {
		return found{}, fmt.Errorf("%s has no Lua module built in and %s is not installed; install libnginx-mod-http-lua with `go tool task nginx`", path, debianModules[1])
	}
	return found{binary: path}, nil
})

type found struct {
	binary  string
	modules []string // load_module paths the binary needs for Lua
}

// Binary returns the path of the nginx (or openresty) to test with. If none
// is installed the test fails when CI=true, and is skipped otherwise.
func Binary(t testing.TB) string {
	t.Helper()
	f, err := find()
	if err != nil {
		missing(t, err.Error())
	}
	return f.binary
}

// DebianLoadModules returns the ndk and Lua module paths to pass as
// load_module when Lua is a dynamic module of Debian's nginx here, or nil
// when the binary needs none (openresty, or no Debian module installed).
func DebianLoadModules() []string {
	f, _ := find()
	return slices.Clone(f.modules)
}

// debianStreamModule is Debian's libnginx-mod-stream: the stream block,
// with ssl_preread.
const debianStreamModule = "/usr/share/nginx/modules/ngx_stream_module.so"

// StreamLoadModules returns the stream module to load after
// DebianLoadModules when nginx is Debian's, nil for openresty (built in).
// Without it installed the test fails when CI=true, and is skipped
// otherwise.
func StreamLoadModules(t testing.TB) []string {
	t.Helper()
	return debianModule(t, debianStreamModule, "libnginx-mod-stream")
}

// debianHeadersMoreModule is Debian's libnginx-mod-http-headers-more-filter.
const debianHeadersMoreModule = "/usr/share/nginx/modules/ngx_http_headers_more_filter_module.so"

// HeadersMoreLoadModules returns the headers-more module to load after
// DebianLoadModules when nginx is Debian's, nil for openresty (built in).
// Without it installed the test fails when CI=true, and is skipped
// otherwise.
func HeadersMoreLoadModules(t testing.TB) []string {
	t.Helper()
	return debianModule(t, debianHeadersMoreModule, "libnginx-mod-http-headers-more-filter")
}

// debianModule returns path, a module of Debian's package pkg, to load
// after DebianLoadModules when nginx is Debian's, nil for openresty (which
// has it built in). A missing nginx or package fails the test when
// CI=true and skips it otherwise.
func debianModule(t testing.TB, path, pkg string) []string {
	t.Helper()
	f, err := find()
	if err != nil {
		missing(t, err.Error())
	}
	if f.modules == nil {
		return nil
	}
	if _, err := os.Stat(path); err != nil {
		missing(t, path+" is not installed; install "+pkg+" with `go tool task nginx`")
	}
	return []string{path}
}

// Debian's ModSecurity: libnginx-mod-http-modsecurity (the module and its
// recommended configuration) and modsecurity-crs (the OWASP Core Rule Set).
const (
	debianModSecurityModule = "/usr/share/nginx/modules/ngx_http_modsecurity_module.so"
	debianModSecurityRules  = "/etc/nginx/modsecurity.conf"
	debianCoreRuleSetProbe  = "/usr/share/modsecurity-crs/rules/REQUEST-949-BLOCKING-EVALUATION.conf"
)

// ModSecurity is what a test needs to run Debian's ModSecurity module.
type ModSecurity struct {
	// LoadModules is the module, to load after DebianLoadModules.
	LoadModules []string
	// Rules is a copy of Debian's recommended configuration
	// (/etc/nginx/modsecurity.conf) whose audit log is in the test's
	// folder instead of /var/log/nginx.
	Rules string
	// AuditLog is that audit log.
	AuditLog string
}

// ModSecurityModules returns Debian's ModSecurity module and rules for a
// test. Without them (or with openresty, whose image has no ModSecurity)
// the test fails when CI=true, and is skipped otherwise.
func ModSecurityModules(t testing.TB) ModSecurity {
	t.Helper()
	m, reason := FindModSecurity(t)
	if reason != "" {
		missing(t, reason)
	}
	return m
}

// FindModSecurity is ModSecurityModules for tests that run without
// ModSecurity too: it returns why it is missing instead of skipping.
func FindModSecurity(t testing.TB) (ModSecurity, string) {
	t.Helper()
	f, err := find()
	if err != nil {
		return ModSecurity{}, err.Error()
	}
	if f.modules == nil {
		return ModSecurity{}, f.binary + " is not Debian's nginx with dynamic modules; OpenResty's packages and image have no ModSecurity module"
	}
	for _, p := range []string{debianModSecurityModule, debianModSecurityRules, debianCoreRuleSetProbe} {
		if _, err := os.Stat(p); err != nil {
			return ModSecurity{}, p + " is not installed; install libnginx-mod-http-modsecurity and modsecurity-crs with `go tool task test-deps`"
		}
	}
	recommended, err := os.ReadFile(debianModSecurityRules)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "modsecurity-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m := ModSecurity{LoadModules: []string{debianModSecurityModule}, Rules: filepath.Join(dir, "modsecurity.conf"),
		AuditLog: filepath.Join(dir, "modsec_audit.log")}
	lines := strings.Split(string(recommended), "\n")
	for i, line := range lines {
		switch fields := strings.Fields(line); {
		case len(fields) > 1 && fields[0] == "SecAuditLog":
			lines[i] = "SecAuditLog " + m.AuditLog
		case len(fields) > 1 && fields[0] == "SecUnicodeMapFile" && !filepath.IsAbs(fields[1]):
			// Relative to the file that names it: Debian's is beside it.
			lines[i] = "SecUnicodeMapFile " + filepath.Join(filepath.Dir(debianModSecurityRules), fields[1]) + " " + strings.Join(fields[2:], " ")
		}
	}
	if err := os.WriteFile(m.Rules, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	return m, ""
}

func missing(t testing.TB, reason string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("real nginx needed (CI=true): %s", reason)
	}
	t.Skipf("skipping: %s", reason)
}

// TempPrefix returns a new prefix folder with logs/ and tmp/ in it, readable
// by nobody (the user nginx workers run as when the master is root) down
// from /. It is removed when the test ends. t.TempDir does not fit: its
// parent folder is 0700.
func TempPrefix(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "nginx-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, d := range []string{dir, filepath.Join(dir, "logs"), filepath.Join(dir, "tmp")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// ClosedPrefix is TempPrefix under a folder only root may enter: an nginx
// master started by root runs its workers as nobody, who then cannot read
// anything under it. It fails the test when CI=true and the test does not
// run as root, and skips it otherwise.
func ClosedPrefix(t testing.TB) string {
	t.Helper()
	if os.Geteuid() != 0 {
		missing(t, "needs root, so that nginx's workers run as nobody")
	}
	parent := t.TempDir()
	if err := os.Chmod(parent, 0o700); err != nil {
		t.Fatal(err)
	}
	prefix := filepath.Join(parent, "shared")
	for _, d := range []string{prefix, filepath.Join(prefix, "logs"), filepath.Join(prefix, "tmp")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return prefix
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago,
// below the ephemeral range (package freeport says why).
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := freeport.Pick()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// Test runs `nginx -t` on prefix/nginx.conf and returns its output, or an
// error holding the output if nginx rejects the config.
func Test(t testing.TB, prefix string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, Binary(t), "-t", "-e", "stderr", "-p", prefix+"/", "-c", configName).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("nginx -t: %w\n%s", err, out)
	}
	return string(out), nil
}

// Nginx is an nginx master started by Start.
type Nginx struct {
	// Prefix is the folder nginx runs in (-p); it holds nginx.conf.
	Prefix string

	cmd    *exec.Cmd
	output *syncbuf.Buffer
	done   chan struct{} // closed when the master has exited
	client *http.Client
}

// Start runs nginx from prefix/nginx.conf in the foreground, in its own
// process group, and waits until the pid file exists and the config API
// answers GET /status. The test's cleanup stops it.
func Start(t testing.TB, prefix string) *Nginx {
	t.Helper()
	binary := Binary(t)
	if err := os.Chmod(prefix, 0o755); err != nil {
		t.Fatalf("making %s readable by nginx workers: %v", prefix, err)
	}
	removeStaleSocket(t, filepath.Join(prefix, socketName))
	if _, _, err := luaapi.EnsureSecret(prefix); err != nil {
		t.Fatal(err)
	}
	n := &Nginx{
		Prefix: prefix,
		output: &syncbuf.Buffer{},
		done:   make(chan struct{}),
		client: UnixClient(filepath.Join(prefix, socketName)),
	}
	n.cmd = exec.Command(binary, "-p", prefix+"/", "-c", configName, "-e", "stderr", "-g", "daemon off;")
	n.cmd.Stdout = n.output
	n.cmd.Stderr = n.output
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := n.cmd.Start(); err != nil {
		t.Fatalf("starting nginx: %v", err)
	}
	go func() {
		n.cmd.Wait()
		close(n.done)
	}()
	t.Cleanup(func() { n.stop(t) })

	deadline := time.Now().Add(startTimeout)
	for {
		if n.exited() {
			t.Fatalf("nginx exited at start: %s\n%s", n.cmd.ProcessState, n.Logs())
		}
		if _, err := os.Stat(filepath.Join(prefix, pidName)); err == nil && n.ready() {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx did not answer GET /status within %s\n%s", startTimeout, n.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// removeStaleSocket removes a socket file nobody listens on, as an nginx
// killed with SIGKILL leaves behind: nginx does not remove it at start and
// fails with "bind() ... Address already in use".
func removeStaleSocket(t testing.TB, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		return
	}
	conn, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		conn.Close()
		t.Fatalf("%s: another process listens on it", path)
	}
	if err := os.Remove(path); err != nil {
		t.Fatalf("removing stale socket: %v", err)
	}
}

// UnixClient returns an HTTP client that sends every request to the unix
// socket at path, whatever the URL's host, with the config API's secret
// from the file beside it once there is one (Start writes it).
func UnixClient(path string) *http.Client {
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: luaapi.WithSecret(&http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", path)
			},
			DisableKeepAlives: true, // old workers exit promptly after a HUP
		}, filepath.Dir(path)),
	}
}

// API returns a client for the config API socket of n.
func (n *Nginx) API() *http.Client { return n.client }

func (n *Nginx) ready() bool {
	resp, err := n.client.Get("http://restysync/status")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (n *Nginx) exited() bool {
	select {
	case <-n.done:
		return true
	default:
		return false
	}
}

// MasterPID returns the pid of the nginx master.
func (n *Nginx) MasterPID() int { return n.cmd.Process.Pid }

// WorkerPIDs returns the pids of the master's children, sorted.
func (n *Nginx) WorkerPIDs() []int {
	return children(n.MasterPID())
}

// Draining reports whether a worker of an earlier config is still shutting
// down: until it exits it may accept one more connection on a listener the
// configs share and answer it with the old config.
func (n *Nginx) Draining() bool {
	for _, pid := range n.WorkerPIDs() {
		title, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if err == nil && bytes.Contains(title, []byte("shutting down")) {
			return true
		}
	}
	return false
}

// Reload sends SIGHUP and waits until every worker of the old config has
// exited, new workers run and the config API answers.
func (n *Nginx) Reload(t testing.TB) {
	t.Helper()
	old := n.WorkerPIDs()
	if err := syscall.Kill(n.MasterPID(), syscall.SIGHUP); err != nil {
		t.Fatalf("signalling nginx: %v", err)
	}
	deadline := time.Now().Add(startTimeout)
	for {
		now := n.WorkerPIDs()
		replaced := len(now) > 0 && !slices.ContainsFunc(now, func(pid int) bool { return slices.Contains(old, pid) })
		if replaced && n.ready() {
			return
		}
		if n.exited() {
			t.Fatalf("nginx exited on reload: %s\n%s", n.cmd.ProcessState, n.Logs())
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx did not replace workers %v within %s (now %v)\n%s", old, startTimeout, now, n.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop stops nginx gracefully (SIGQUIT), and kills its process group if it
// has not exited within 10 s. A graceful stop removes the API socket.
func (n *Nginx) Stop(t testing.TB) {
	t.Helper()
	n.stop(t)
}

func (n *Nginx) stop(t testing.TB) {
	if n.exited() {
		return
	}
	pgid := n.cmd.Process.Pid
	if err := syscall.Kill(pgid, syscall.SIGQUIT); err != nil && !errors.Is(err, syscall.ESRCH) {
		t.Errorf("signalling nginx to quit: %v", err)
	}
	select {
	case <-n.done:
	case <-time.After(stopTimeout):
		t.Errorf("nginx did not quit within %s; killing its process group", stopTimeout)
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-n.done
	}
	// Workers may outlive a master that died; none may outlive the test.
	syscall.Kill(-pgid, syscall.SIGKILL)
}

// Stderr returns what nginx wrote to stderr (and stdout) so far: its
// error log at the config's stderr level.
func (n *Nginx) Stderr() string { return n.output.String() }

// Logs returns what nginx wrote to stderr and the tail of its error log.
func (n *Nginx) Logs() string {
	var b strings.Builder
	b.WriteString("--- nginx stderr ---\n")
	b.WriteString(n.output.String())
	b.WriteString("--- " + filepath.Join(n.Prefix, "logs/error.log") + " (tail) ---\n")
	data, err := os.ReadFile(filepath.Join(n.Prefix, "logs", "error.log"))
	if err != nil {
		b.WriteString(err.Error())
	}
	if len(data) > 8192 {
		data = data[len(data)-8192:]
	}
	b.Write(data)
	return b.String()
}

// children lists the processes whose parent is pid, from /proc.
func children(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if parent, ok := parentOf(child); ok && parent == pid {
			pids = append(pids, child)
		}
	}
	slices.Sort(pids)
	return pids
}

// parentOf reads the ppid from /proc/<pid>/stat: "pid (comm) state ppid ...",
// where comm may hold spaces and parentheses.
func parentOf(pid int) (int, bool) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, false
	}
	fields := strings.Fields(string(data[i+1:]))
	if len(fields) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(fields[1])
	return ppid, err == nil
}
