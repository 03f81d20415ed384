package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// ipRollout is the backend both pods' nginx proxy to.
const ipRollout = "127.0.0.217"

// Timings of TestRolloutDropsNothing: the chart's hook sleeps 15 s and
// drains for up to 60; here the same script sleeps 2 s and the endpoint
// leaves the Service 300 ms into it.
const (
	rolloutSleep      = 2 * time.Second
	rolloutDrainBound = 10 // seconds, the script's second argument
	rolloutFlipAfter  = 300 * time.Millisecond
	rolloutBackendLag = 100 * time.Millisecond
	rolloutHookBound  = 20 * time.Second
)

// A pod stopped the way the kubelet stops the chart's pod drops no request.
// Two pods (an agent and Debian's nginx each) serve one host; clients send
// GET load to "the Service": each new connection goes to the pod that is
// the endpoint at that moment, and an open connection stays with its pod,
// as with kube-proxy's conntrack. Six clients keep their connection alive,
// two open one per request. The test runs the chart's preStop hook
// (charts/restysync/files/prestop.sh, the file the chart and the sidecar
// example run) on the first pod, takes that pod out of the Service during
// the hook's sleep, and, once the hook is done, sends the SIGQUIT the
// kubelet sends (the image's STOPSIGNAL). Every request must succeed, the
// old pod must still have been serving keep-alive connections when SIGQUIT
// arrived (requests in flight), and its nginx must have exited within the
// hook. Debian's nginx stands for the image's: the hook needs only sh and
// the pid file.
func TestRolloutDropsNothing(t *testing.T) {
	script, err := os.ReadFile(filepath.Join("..", "..", "charts", "restysync", "files", "prestop.sh"))
	if err != nil {
		t.Fatal(err)
	}
	backendPort := startSlowBackend(t, ipRollout, rolloutBackendLag)
	files := map[string]string{
		"classes.yaml": ingressClasses,
		"svc.yaml":     service("slow", backendPort, ep(ipRollout)),
		"ingress.yaml": ingress("slow", ingressOpts{class: "restysync", host: "rollout.test", paths: []path{prefix("/", "slow")}}),
	}
	old, next := newStack(t, files), newStack(t, files)
	for _, s := range []*stack{old, next} {
		s.eventually("served", func() error { return s.expect("rollout.test", "/", ipRollout) })
	}

	var endpoint atomic.Int64 // the port new connections go to: the Service's endpoint
	endpoint.Store(int64(old.port))
	load := startRolloutLoad(&endpoint, "rollout.test", 6, 2)
	time.Sleep(500 * time.Millisecond)

	// The kubelet runs the hook (sh -c SCRIPT prestop SLEEP DRAIN PIDFILE).
	oldPID := old.nginx.MasterPID()
	ctx, cancel := context.WithTimeout(context.Background(), rolloutHookBound)
	defer cancel()
	hook := exec.CommandContext(ctx, "sh", "-c", string(script), "prestop",
		strconv.Itoa(int(rolloutSleep/time.Second)), strconv.Itoa(rolloutDrainBound), filepath.Join(old.shared, "nginx.pid"))
	out, err := hook.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var hookErr strings.Builder
	hook.Stderr = &hookErr
	hookStart := time.Now()
	if err := hook.Start(); err != nil {
		t.Fatal(err)
	}
	quitAt := make(chan time.Time, 1)
	var hookOut strings.Builder
	outDone := make(chan struct{})
	go func() {
		defer close(outDone)
		lines := bufio.NewScanner(out)
		for lines.Scan() {
			if strings.Contains(lines.Text(), "SIGQUIT to nginx master") {
				quitAt <- time.Now()
			}
			hookOut.WriteString(lines.Text() + "\n")
		}
	}()

	// The endpoint leaves the Service while the hook sleeps.
	time.Sleep(rolloutFlipAfter)
	endpoint.Store(int64(next.port))

	hookDone := make(chan error, 1)
	go func() {
		<-outDone // Wait closes the pipe: read it all first
		hookDone <- hook.Wait()
	}()
	var hookEnd time.Time
	select {
	case err := <-hookDone:
		hookEnd = time.Now()
		if err != nil {
			t.Errorf("preStop hook: %v\nstdout:\n%s\nstderr:\n%s", err, hookOut.String(), hookErr.String())
		}
	case <-time.After(rolloutHookBound + time.Second):
		t.Fatalf("preStop hook still running after %s", rolloutHookBound)
	}
	// Then the kubelet sends the stop signal: nginx has gone already.
	if err := syscall.Kill(oldPID, syscall.SIGQUIT); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("SIGQUIT after the hook: %v, want no such process (nginx drained and exited within the hook)", err)
	}
	time.Sleep(300 * time.Millisecond) // load on the new pod alone
	results := load.stop()

	var quit time.Time
	select {
	case quit = <-quitAt:
	default:
		t.Fatalf("the hook never sent SIGQUIT\nstdout:\n%s\nstderr:\n%s", hookOut.String(), hookErr.String())
	}
	var failed, toOld, toNext, oldAfterFlip, inFlight int
	flip := hookStart.Add(rolloutFlipAfter)
	for _, r := range results {
		switch {
		case r.err != nil || r.status != http.StatusOK || r.body != ipRollout:
			failed++
			if failed <= 5 {
				t.Errorf("request at +%s: %d %q %v", r.start.Sub(hookStart).Round(time.Millisecond), r.status, r.body, r.err)
			}
		case r.port == old.port:
			toOld++
			if r.start.After(flip) {
				oldAfterFlip++
			}
			if r.start.Before(quit) && r.end.After(quit) {
				inFlight++
			}
		case r.port == next.port:
			toNext++
		}
	}
	t.Logf("%d requests: %d failed; old pod %d (%d sent after it left the Service, %d in flight at SIGQUIT), new pod %d; SIGQUIT %s into the hook, hook done after %s",
		len(results), failed, toOld, oldAfterFlip, inFlight, toNext,
		quit.Sub(hookStart).Round(time.Millisecond), hookEnd.Sub(hookStart).Round(time.Millisecond))
	if failed > 0 {
		t.Errorf("%d of %d requests failed during the rollout", failed, len(results))
	}
	if inFlight == 0 {
		t.Error("no request to the old pod was in flight when SIGQUIT arrived: the test proved no drain")
	}
	if oldAfterFlip == 0 || toNext == 0 {
		t.Errorf("old pod served %d requests after leaving the Service, new pod %d: want both", oldAfterFlip, toNext)
	}
	if quit.Sub(hookStart) < rolloutSleep {
		t.Errorf("SIGQUIT %s into the hook, before its %s sleep", quit.Sub(hookStart), rolloutSleep)
	}
}

// startSlowBackend serves its own address on ip after lag, on a free port,
// until the test ends, and returns the port.
func startSlowBackend(t *testing.T, ip string, lag time.Duration) int {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(nginxproc.FreePort(t))))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(lag)
		io.WriteString(w, ip+"\n")
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

// rolloutResult is one request of rolloutLoad: which nginx (port) served
// it, when, and what came back.
type rolloutResult struct {
	port       int
	start, end time.Time
	status     int
	body       string
	err        error
}

// rolloutLoad is GET load from clients that dial the port endpoint holds
// when they open a connection.
type rolloutLoad struct {
	stopCh chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex
	all    []rolloutResult
}

func startRolloutLoad(endpoint *atomic.Int64, host string, keepAlive, perRequest int) *rolloutLoad {
	l := &rolloutLoad{stopCh: make(chan struct{})}
	for i := range keepAlive + perRequest {
		c := &http.Client{
			Timeout: 10 * time.Second,
			Transport: &http.Transport{
				DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
					var d net.Dialer
					return d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", strconv.Itoa(int(endpoint.Load()))))
				},
				DisableKeepAlives: i >= keepAlive,
			},
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer c.CloseIdleConnections()
			for range 1_000_000 {
				select {
				case <-l.stopCh:
					return
				default:
				}
				r := rolloutGet(c, host)
				l.mu.Lock()
				l.all = append(l.all, r)
				l.mu.Unlock()
			}
		}()
	}
	return l
}

// stop ends the load and returns every request's result.
func (l *rolloutLoad) stop() []rolloutResult {
	close(l.stopCh)
	l.wg.Wait()
	return l.all
}

// rolloutGet sends GET http://host/ and notes the nginx that answered.
func rolloutGet(c *http.Client, host string) rolloutResult {
	r := rolloutResult{start: time.Now()}
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		if a, ok := info.Conn.RemoteAddr().(*net.TCPAddr); ok {
			r.port = a.Port
		}
	}}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodGet, "http://"+host+"/", nil)
	if err != nil {
		r.err, r.end = err, time.Now()
		return r
	}
	resp, err := c.Do(req)
	if err != nil {
		r.err, r.end = err, time.Now()
		return r
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	r.status, r.body, r.err, r.end = resp.StatusCode, strings.TrimSpace(string(body)), err, time.Now()
	if r.err == nil && r.status != http.StatusOK {
		r.err = fmt.Errorf("status %d", r.status)
	}
	return r
}
