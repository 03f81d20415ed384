//go:build linux

// Package podnet gives tests backends that stand where pods stand: each Pod
// is a network namespace joined to the host by a veth pair, with an address
// in 10.244.0.0/16 and a small HTTP server that answers with the pod's name.
//
// The API server rejects loopback addresses in EndpointSlices, as a cluster
// does, so tests against a real kube-apiserver cannot use 127.0.0.x
// backends. The server's socket is opened inside the namespace from a locked
// OS thread (setns), so no helper binary is needed: a socket stays in the
// namespace it was made in, whichever thread serves it later.
package podnet

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Port is the port every pod serves HTTP on.
const Port = 8080

// Pod is a network namespace with an HTTP server in it.
type Pod struct {
	// Name is what the server answers with.
	Name string
	// IP is the pod's address, reachable from the host.
	IP string

	netns  string
	hostIf string
	server *http.Server
	hits   atomic.Int64
	once   sync.Once
}

// Available says whether pods can be made here (root and `ip` on PATH), with
// the reason when not.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("`ip` (iproute2) is not on PATH; install it with `go tool task test-deps`")
	}
	return nil
}

// Require fails the test when CI=true and pods cannot be made, and skips it otherwise.
func Require(t testing.TB) {
	t.Helper()
	if err := Available(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("pod network needed (CI=true): %v", err)
		}
		t.Skipf("skipping: %v", err)
	}
}

// New makes a pod named name and starts its server. The test's cleanup
// removes it.
func New(t testing.TB, name string) *Pod {
	t.Helper()
	Require(t)
	p, err := NewNamespace(name)
	// Even on an error: a step that fails halfway leaves the veth or the
	// namespace, and Remove takes away whatever exists.
	t.Cleanup(p.Remove)
	if err != nil {
		t.Fatalf("pod %s: %v", name, err)
	}
	if err := p.serve(); err != nil {
		t.Fatalf("pod %s: %v", name, err)
	}
	return p
}

// NewNamespace makes a pod named name with no server in it, for a process
// the caller runs in it (Command). The caller removes it (Remove), also
// when NewNamespace returns an error.
func NewNamespace(name string) (*Pod, error) {
	p := &Pod{Name: name}
	subnet, err := p.link()
	if err != nil {
		return p, err
	}
	p.IP = fmt.Sprintf("10.244.%d.2", subnet)
	return p, nil
}

// Command is the command that runs bin with args inside the pod's network
// namespace (through `ip netns exec`, which execs bin: the process started
// is bin itself).
func (p *Pod) Command(bin string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", p.netns, bin}, args...)...)
}

// link claims a free /24 by creating the host end of the veth pair, whose
// name holds the subnet number: interface names are unique on the host, so
// tests running at once never share a subnet.
func (p *Pod) link() (int, error) {
	start := int(time.Now().UnixNano() % 250)
	for i := range 250 {
		subnet := 1 + (start+i)%250
		hostIf := fmt.Sprintf("rsp%dh", subnet)
		if err := ip("link", "add", hostIf, "type", "veth", "peer", "name", fmt.Sprintf("rsp%dp", subnet)); err != nil {
			if strings.Contains(err.Error(), "exists") {
				continue
			}
			return 0, err
		}
		p.hostIf = hostIf
		p.netns = fmt.Sprintf("rsp%d", subnet)
		podIf := fmt.Sprintf("rsp%dp", subnet)
		steps := [][]string{
			{"netns", "add", p.netns},
			{"link", "set", podIf, "netns", p.netns},
			{"addr", "add", fmt.Sprintf("10.244.%d.1/24", subnet), "dev", hostIf},
			{"link", "set", hostIf, "up"},
			{"netns", "exec", p.netns, "ip", "addr", "add", fmt.Sprintf("10.244.%d.2/24", subnet), "dev", podIf},
			{"netns", "exec", p.netns, "ip", "link", "set", podIf, "up"},
			{"netns", "exec", p.netns, "ip", "link", "set", "lo", "up"},
			{"netns", "exec", p.netns, "ip", "route", "add", "default", "via", fmt.Sprintf("10.244.%d.1", subnet)},
		}
		for _, step := range steps {
			if err := ip(step...); err != nil {
				return 0, err
			}
		}
		return subnet, nil
	}
	return 0, errors.New("no free subnet in 10.244.1-250.0/24")
}

// serve opens the listener inside the namespace and serves on it.
func (p *Pod) serve() error {
	l, err := listenIn(p.netns, net.JoinHostPort(p.IP, strconv.Itoa(Port)))
	if err != nil {
		return err
	}
	p.server = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.hits.Add(1)
			fmt.Fprintln(w, p.Name)
		}),
		ReadHeaderTimeout: 5 * time.Second,
	}
	go p.server.Serve(l)
	return nil
}

// Listen opens a TCP listener on the pod's address and port, inside its
// namespace, for a server of the caller's (an h2c backend, say).
func (p *Pod) Listen(port int) (net.Listener, error) {
	return listenIn(p.netns, net.JoinHostPort(p.IP, strconv.Itoa(port)))
}

// Hits is how many requests the pod served.
func (p *Pod) Hits() int64 { return p.hits.Load() }

// Remove stops the server and deletes the namespace and the veth pair.
// It is safe to call more than once.
func (p *Pod) Remove() {
	p.once.Do(func() {
		if p.server != nil {
			p.server.Close()
		}
		if p.hostIf != "" {
			ip("link", "del", p.hostIf) // takes its peer with it
		}
		if p.netns != "" {
			ip("netns", "del", p.netns)
		}
	})
}

// listenIn opens a TCP listener inside the named network namespace.
func listenIn(netns, addr string) (net.Listener, error) {
	runtime.LockOSThread()
	// The thread is unlocked only once it is back in the host namespace; a
	// thread that cannot go back dies with its goroutine.
	origin, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer origin.Close()
	target, err := os.Open("/run/netns/" + netns)
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("entering netns %s: %w", netns, err)
	}
	l, lerr := net.Listen("tcp", addr)
	if err := unix.Setns(int(origin.Fd()), unix.CLONE_NEWNET); err != nil {
		if l != nil {
			l.Close()
		}
		return nil, fmt.Errorf("leaving netns %s: %w", netns, err)
	}
	runtime.UnlockOSThread()
	return l, lerr
}

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
