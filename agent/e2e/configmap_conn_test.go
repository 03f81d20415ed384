package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Connection keys of the ConfigMap over real sockets:
//   - proxy-connect-timeout: a backend whose accept queue is full never
//     completes a connect; nginx gives up after the ConfigMap's timeout, or
//     after the Ingress's own (the annotation overrides the ConfigMap);
//   - upstream-keepalive-timeout: nginx closes an idle connection to the
//     backend after that many seconds;
//   - max-worker-connections: one worker with 256 connections accepts no
//     more than that many clients at once.
func TestConfigMapConnectionKeys(t *testing.T) {
	const ipWeb, ipFull = "127.0.0.157", "127.0.0.158"
	var closed atomic.Int64
	l, err := net.Listen("tcp", net.JoinHostPort(ipWeb, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second,
		ConnState: func(_ net.Conn, state http.ConnState) {
			if state == http.StateClosed {
				closed.Add(1)
			}
		},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/hold" {
				time.Sleep(3 * time.Second)
			}
			io.WriteString(w, "ok")
		})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	webPort := l.Addr().(*net.TCPAddr).Port
	fullPort := fullBacklogListener(t, ipFull)

	s := newConfigMapStack(t, map[string]string{
		"classes.yaml": ingressClasses,
		"web.yaml":     service("web", webPort, ep(ipWeb)),
		"full.yaml":    service("full", fullPort, ep(ipFull)),
		"web-ing.yaml": ingress("web", ingressOpts{class: "restysync", host: "conn.test", paths: []path{prefix("/", "web")}}),
		"full-ing.yaml": ingress("full", ingressOpts{class: "restysync", host: "full.test",
			paths: []path{prefix("/", "full")}}),
		"full-slow-ing.yaml": ingress("full-slow", ingressOpts{class: "restysync", host: "full-slow.test",
			paths:       []path{prefix("/", "full")},
			annotations: map[string]string{"nginx.ingress.kubernetes.io/proxy-connect-timeout": "3"}}),
		"settings.yaml": configMap(map[string]string{
			"worker-processes":           "1",
			"max-worker-connections":     "256",
			"proxy-connect-timeout":      "1",
			"upstream-keepalive-timeout": "1",
		}),
	})
	s.eventually("served with the ConfigMap", func() error {
		if n := len(s.nginx.WorkerPIDs()); n != 1 {
			return fmt.Errorf("%d nginx workers, want 1", n)
		}
		_, body, err := s.request("GET", "conn.test", "/", nil, nil)
		if err == nil && body != "ok" {
			err = fmt.Errorf("body %q", body)
		}
		return err
	})

	t.Run("proxy-connect-timeout", func(t *testing.T) {
		took := func(host string) time.Duration {
			start := time.Now()
			c := clientTo(s.port)
			c.Timeout = 10 * time.Second
			resp, err := c.Get("http://" + host + "/")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusGatewayTimeout {
				t.Errorf("GET %s, a backend that never accepts: %d, want 504", host, resp.StatusCode)
			}
			return time.Since(start)
		}
		if d := took("full.test"); d < 900*time.Millisecond || d > 2500*time.Millisecond {
			t.Errorf("proxy-connect-timeout 1 in the ConfigMap: 504 after %s, want about 1 s", d)
		}
		if d := took("full-slow.test"); d < 2900*time.Millisecond {
			t.Errorf("annotation proxy-connect-timeout 3 over the ConfigMap's 1: 504 after %s, want about 3 s", d)
		}
	})

	t.Run("upstream-keepalive-timeout", func(t *testing.T) {
		before := closed.Load()
		if _, body, err := s.request("GET", "conn.test", "/", nil, nil); err != nil || body != "ok" {
			t.Fatalf("GET conn.test: %q %v", body, err)
		}
		// Only nginx closes the idle connection: the backend has no idle timeout.
		deadline := time.Now().Add(5 * time.Second)
		for closed.Load() == before && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if closed.Load() == before {
			t.Errorf("nginx kept its idle backend connection over 5 s with upstream-keepalive-timeout 1")
		}
	})

	t.Run("max-worker-connections", func(t *testing.T) {
		const clients = 300
		served, refused := holdConnections(t, s.port, "conn.test", clients)
		// Each slot of the worker also holds its listening sockets and
		// its connections to the backend: fewer than 256 clients fit.
		if served == 0 || served >= 256 {
			t.Errorf("%d of %d simultaneous clients served with max-worker-connections 256 and one worker, want some but under 256", served, clients)
		}
		t.Logf("%d of %d simultaneous clients served, %d not", served, clients, refused)
		// nginx says so at [alert] (to the file and stderr) or, when it can
		// reuse an idle connection, at [warn] (stderr only).
		s.eventually("nginx's error log says worker_connections are not enough", func() error {
			if !strings.Contains(s.nginx.Stderr(), "worker_connections are not enough") {
				return errorf("not in nginx's stderr (served %d, refused %d)", served, refused)
			}
			return nil
		})
	})
}

// fullBacklogListener listens on addr with a backlog of 0, never accepts,
// and fills the accept queue: the kernel drops every further SYN, so a
// connect to it neither succeeds nor fails until the client gives up.
func fullBacklogListener(t *testing.T, addr string) int {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	ip := net.ParseIP(addr).To4()
	sa := &syscall.SockaddrInet4{Addr: [4]byte(ip)}
	if err := syscall.Bind(fd, sa); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	bound, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	port := bound.(*syscall.SockaddrInet4).Port
	target := net.JoinHostPort(addr, strconv.Itoa(port))
	for range 8 {
		c, err := net.DialTimeout("tcp", target, 300*time.Millisecond)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return port // the queue is full
			}
			t.Fatalf("filling the accept queue of %s: %v", target, err)
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Fatalf("the accept queue of %s did not fill after 8 connections", target)
	return 0
}

// holdConnections opens n connections to nginx at once, sends a request
// for a slow path on each, and counts the answered ones and the rest.
func holdConnections(t *testing.T, port int, host string, n int) (served, refused int) {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for range n {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			refused++
			continue
		}
		conns = append(conns, c)
		// /hold keeps the request (and its connection) busy for 3 s.
		fmt.Fprintf(c, "GET /hold HTTP/1.1\r\nHost: %s\r\n\r\n", host)
	}
	// Past 4.5 s only the first wave has had its answer: the clients nginx
	// accepts once those end would answer at about 6 s.
	deadline := time.Now().Add(4500 * time.Millisecond)
	for _, c := range conns {
		c.SetReadDeadline(deadline)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			refused++
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			served++
		} else {
			refused++
		}
	}
	return served, refused
}
