package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// The balancing tests run the agent, nginx and Go backends on loopback and
// check each policy of the Lua balancer over HTTP: round robin and EWMA
// distributions, consistent hashing's remap share, cookie stickiness across
// endpoint pushes, and failover with passive health on a killed backend.
// Every policy change and endpoint change here is a push: the tests check
// that nginx's workers stay the same.

// pool is a set of HTTP backends on loopback addresses sharing one port,
// each answering with its address, which a test can slow down, kill and
// bring back.
type pool struct {
	t    *testing.T
	port int
	mu   sync.Mutex
	srvs map[string]*http.Server
	hits map[string]int
	slow map[string]time.Duration
}

func startPool(t *testing.T, addrs ...string) *pool {
	t.Helper()
	for attempt := 0; attempt < 20; attempt++ {
		p := &pool{t: t, port: nginxproc.FreePort(t), srvs: map[string]*http.Server{}, hits: map[string]int{}, slow: map[string]time.Duration{}}
		var listeners []net.Listener
		for _, addr := range addrs {
			l, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(p.port)))
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
		for i, l := range listeners {
			p.serve(addrs[i], l)
		}
		t.Cleanup(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			for _, srv := range p.srvs {
				srv.Close()
			}
		})
		return p
	}
	t.Fatalf("no port free on all of %v", addrs)
	return nil
}

func (p *pool) serve(addr string, l net.Listener) {
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.mu.Lock()
			p.hits[addr]++
			delay := p.slow[addr]
			p.mu.Unlock()
			time.Sleep(delay)
			io.WriteString(w, addr+"\n")
		}),
		ReadHeaderTimeout: 5 * time.Second,
	}
	p.mu.Lock()
	p.srvs[addr] = srv
	p.mu.Unlock()
	go srv.Serve(l)
}

// setDelay makes addr answer after delay.
func (p *pool) setDelay(addr string, delay time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.slow[addr] = delay
}

// kill closes the listener of addr and every connection to it.
func (p *pool) kill(addr string) {
	p.mu.Lock()
	srv := p.srvs[addr]
	delete(p.srvs, addr)
	p.mu.Unlock()
	srv.Close()
}

// revive listens on addr again.
func (p *pool) revive(addr string) {
	p.t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(p.port)))
	if err != nil {
		p.t.Fatalf("listening on %s again: %v", addr, err)
	}
	p.serve(addr, l)
}

// spread sends n GETs to host+path and counts the answers by backend.
func (s *stack) spread(t *testing.T, host string, n int) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for range n {
		status, body, err := s.get(host, "/")
		if err != nil || status != http.StatusOK {
			t.Fatalf("GET %s: %d %q %v", host, status, body, err)
		}
		counts[body]++
	}
	return counts
}

// noReload fails the test if nginx's workers are not those of before.
func (s *stack) noReload(t *testing.T, before []int, what string) {
	t.Helper()
	if now := s.nginx.WorkerPIDs(); !slices.Equal(before, now) {
		t.Errorf("%s reloaded nginx: workers %v, now %v", what, before, now)
	}
}

// A policy change is a push; EWMA sends a slow endpoint far less than round
// robin does.
func TestBalancingRoundRobinToEWMA(t *testing.T) {
	const fast1, fast2, slow = "127.0.0.81", "127.0.0.82", "127.0.0.83"
	p := startPool(t, fast1, fast2, slow)
	p.setDelay(slow, 40*time.Millisecond)
	web := func(algorithm string) string {
		return ingress("web", ingressOpts{class: "restysync", host: "lb.test", paths: []path{prefix("/", "web")},
			annotations: map[string]string{
				"restysync.io/load-balance": algorithm,
				// A non-default policy either way: both are the same backend
				// variant, so the change is a push, not a reload.
				"nginx.ingress.kubernetes.io/proxy-next-upstream-tries": "3",
			}})
	}
	s := newStack(t, map[string]string{
		"classes.yaml":  ingressClasses,
		"services.yaml": service("web", p.port, ep(fast1), ep(fast2), ep(slow)),
		"web.yaml":      web("round_robin"),
	})
	s.eventually("served", func() error { return seen(s, "lb.test", slow, 6) })
	s.settle()
	workers := s.steadyWorkers()

	const n = 300
	rr := s.spread(t, "lb.test", n)
	t.Logf("round robin, %d requests: %v", n, rr)
	for _, addr := range []string{fast1, fast2, slow} {
		// Each worker keeps its own turn: within a few of n/3.
		if c := rr[addr]; c < n/3-10 || c > n/3+10 {
			t.Errorf("round robin: %s served %d of %d, want about %d: %v", addr, c, n, n/3, rr)
		}
	}

	s.writeFile("web.yaml", web("ewma"))
	s.eventually("EWMA takes over", func() error {
		if c := s.spread(t, "lb.test", 60)[slow]; c > 10 {
			return fmt.Errorf("the slow endpoint still served %d of 60", c)
		}
		return nil
	})
	counts := s.spread(t, "lb.test", n)
	t.Logf("EWMA, %d requests, %s answering 40 ms late: %v", n, slow, counts)
	// Round robin gives it n/3 = 100; peak-EWMA with two choices keeps it
	// well below, whatever the noise of a shared machine.
	if c := counts[slow]; c > n/9 {
		t.Errorf("EWMA: the slow endpoint served %d of %d, want at most %d: %v", c, n, n/9, counts)
	}
	if counts[fast1] < n/4 || counts[fast2] < n/4 {
		t.Errorf("EWMA: the fast endpoints should share the load: %v", counts)
	}
	s.noReload(t, workers, "load-balance round_robin → ewma")
}

// Consistent hashing: adding an 11th endpoint to 10 moves about 1/11 of the
// keys, all of them to the new endpoint.
func TestConsistentHashRemap(t *testing.T) {
	var addrs []string
	for i := 101; i <= 111; i++ {
		addrs = append(addrs, "127.0.0."+strconv.Itoa(i))
	}
	p := startPool(t, addrs...)
	slice := func(addrs []string) string {
		var eps []endpoint
		for _, a := range addrs {
			eps = append(eps, ep(a))
		}
		return service("hashed", p.port, eps...)
	}
	s := newStack(t, map[string]string{
		"classes.yaml":  ingressClasses,
		"services.yaml": slice(addrs[:10]),
		"web.yaml": ingress("hashed", ingressOpts{class: "restysync", host: "hash.test", paths: []path{prefix("/", "hashed")},
			annotations: map[string]string{"nginx.ingress.kubernetes.io/upstream-hash-by": "$request_uri"}}),
	})
	s.eventually("served", func() error { return s.served("hash.test") })
	s.settle()
	workers := s.steadyWorkers()

	const keys = 1000
	uri := func(i int) string { return "/key/" + strconv.Itoa(i) }
	before := make([]string, keys)
	perEndpoint := map[string]int{}
	for i := range keys {
		before[i] = s.answer(t, "hash.test", uri(i))
		perEndpoint[before[i]]++
	}
	t.Logf("%d keys over 10 endpoints: %v", keys, perEndpoint)
	if len(perEndpoint) != 10 {
		t.Errorf("keys went to %d endpoints, want all 10: %v", len(perEndpoint), perEndpoint)
	}
	for i := range 50 { // the same key keeps its endpoint
		if got := s.answer(t, "hash.test", uri(i)); got != before[i] {
			t.Fatalf("%s went to %s, then to %s", uri(i), before[i], got)
		}
	}

	s.writeFile("services.yaml", slice(addrs))
	newest := addrs[10]
	s.eventually("the 11th endpoint takes keys", func() error {
		for i := range keys {
			if s.answer(t, "hash.test", uri(i)) == newest {
				return nil
			}
		}
		return fmt.Errorf("no key went to %s", newest)
	})
	moved, elsewhere := 0, 0
	for i := range keys {
		got := s.answer(t, "hash.test", uri(i))
		if got != before[i] {
			moved++
			if got != newest {
				elsewhere++
			}
		}
	}
	share := float64(moved) / keys
	bound := 1.0/11 + 0.05
	t.Logf("adding an 11th endpoint moved %d of %d keys (share %.3f; 1/11 = %.3f, bound %.3f); %d went elsewhere than the new endpoint",
		moved, keys, share, 1.0/11, bound, elsewhere)
	if share > bound || moved == 0 {
		t.Errorf("share of moved keys %.3f, want in (0, %.3f]", share, bound)
	}
	if elsewhere != 0 {
		t.Errorf("%d keys moved between old endpoints; all moved keys should go to the new one", elsewhere)
	}
	s.noReload(t, workers, "adding an endpoint")
}

// served says whether host answers GET / with 200.
func (s *stack) served(host string) error {
	status, body, err := s.get(host, "/")
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("GET %s: %d %q", host, status, body)
	}
	return nil
}

// answer GETs host+path and returns the backend that answered.
func (s *stack) answer(t *testing.T, host, path string) string {
	t.Helper()
	status, body, err := s.get(host, path)
	if err != nil || status != http.StatusOK {
		t.Fatalf("GET %s%s: %d %q %v", host, path, status, body, err)
	}
	return body
}

// getWithCookie GETs host/ with the Cookie header cookie (none if "") and
// returns the backend and the Set-Cookie header.
func (s *stack) getWithCookie(t *testing.T, host, cookie string) (string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+host+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	if cookie != "" {
		req.Header.Set("Cookie", cookie)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", host, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", host, resp.StatusCode, body)
	}
	return strings.TrimSpace(string(body)), resp.Header.Get("Set-Cookie")
}

// A client pinned by the affinity cookie stays on its endpoint across a
// push that adds endpoints (affinity-mode persistent: balanced, the
// default, may move it to a new one; see TestAffinityModes), and is
// re-pinned when its endpoint goes.
func TestStickySessions(t *testing.T) {
	addrs := []string{"127.0.0.121", "127.0.0.122", "127.0.0.123", "127.0.0.124", "127.0.0.125"}
	p := startPool(t, addrs...)
	slice := func(addrs ...string) string {
		var eps []endpoint
		for _, a := range addrs {
			eps = append(eps, ep(a))
		}
		return service("sticky", p.port, eps...)
	}
	s := newStack(t, map[string]string{
		"classes.yaml":  ingressClasses,
		"services.yaml": slice(addrs[:3]...),
		"web.yaml": ingress("sticky", ingressOpts{class: "restysync", host: "sticky.test", paths: []path{prefix("/", "sticky")},
			annotations: map[string]string{
				"nginx.ingress.kubernetes.io/affinity":                "cookie",
				"nginx.ingress.kubernetes.io/affinity-mode":           "persistent",
				"nginx.ingress.kubernetes.io/session-cookie-name":     "route",
				"nginx.ingress.kubernetes.io/session-cookie-max-age":  "3600",
				"nginx.ingress.kubernetes.io/session-cookie-samesite": "Lax",
			}}),
	})
	s.eventually("served", func() error { return s.served("sticky.test") })
	s.settle()
	workers := s.steadyWorkers()

	pinned, setCookie := s.getWithCookie(t, "sticky.test", "")
	cookie, attrs, _ := strings.Cut(setCookie, ";")
	t.Logf("first answer %s with Set-Cookie %q", pinned, setCookie)
	if !strings.HasPrefix(cookie, "route=") || strings.Contains(setCookie, "127.0.0.") {
		t.Fatalf("Set-Cookie %q: want route=<id> that does not show the address", setCookie)
	}
	for _, want := range []string{"Path=/", "Max-Age=3600", "SameSite=Lax", "HttpOnly"} {
		if !strings.Contains(attrs, want) {
			t.Errorf("Set-Cookie %q lacks %s", setCookie, want)
		}
	}
	stays := func(what string, n int) {
		t.Helper()
		for range n {
			got, again := s.getWithCookie(t, "sticky.test", cookie)
			if got != pinned || again != "" {
				t.Fatalf("%s: the pinned client got %s (Set-Cookie %q), want %s", what, got, again, pinned)
			}
		}
	}
	stays("before the push", 30)

	// Add two endpoints: clients without the cookie reach them, the pinned
	// one stays where it is.
	s.writeFile("services.yaml", slice(addrs...))
	s.eventually("the new endpoints serve", func() error {
		counts := s.spread(t, "sticky.test", 30)
		if counts[addrs[3]] == 0 || counts[addrs[4]] == 0 {
			return fmt.Errorf("new endpoints not among %v", counts)
		}
		return nil
	})
	stays("after adding endpoints", 30)
	t.Logf("the client stayed on %s for 60 requests across the push", pinned)

	// Remove the pinned endpoint: the client is re-pinned elsewhere, once.
	var rest []string
	for _, a := range addrs {
		if a != pinned {
			rest = append(rest, a)
		}
	}
	s.writeFile("services.yaml", slice(rest...))
	var repinned string
	s.eventually("the client is re-pinned", func() error {
		got, again := s.getWithCookie(t, "sticky.test", cookie)
		if got == pinned {
			return fmt.Errorf("still served by the removed %s", pinned)
		}
		if !strings.HasPrefix(again, "route=") {
			return fmt.Errorf("served by %s without a new cookie", got)
		}
		repinned, cookie = got, strings.SplitN(again, ";", 2)[0]
		return nil
	})
	t.Logf("after %s was removed the client was re-pinned to %s", pinned, repinned)
	pinned = repinned
	stays("after re-pinning", 30)
	s.noReload(t, workers, "endpoint changes")
}

// Under constant idempotent load, killing one of three backends fails no
// request (retries go to the next endpoint); the dead endpoint is then
// skipped for fail-timeout seconds at a time, tried again after each, and
// served again once it is back.
func TestFailoverAndPassiveHealth(t *testing.T) {
	addrs := []string{"127.0.0.131", "127.0.0.132", "127.0.0.133"}
	dead := addrs[2]
	p := startPool(t, addrs...)
	s := newStack(t, map[string]string{
		"classes.yaml":  ingressClasses,
		"services.yaml": service("fo", p.port, ep(addrs[0]), ep(addrs[1]), ep(addrs[2])),
		"web.yaml": ingress("fo", ingressOpts{class: "restysync", host: "fo.test", paths: []path{prefix("/", "fo")},
			annotations: map[string]string{
				"restysync.io/fail-timeout": "2",
				"restysync.io/max-fails":    "3",
			}}),
	})
	s.eventually("served", func() error { return seen(s, "fo.test", dead, 6) })
	s.settle()
	workers := s.steadyWorkers()

	l := startAnyLoad(s, "fo.test", addrs, 2)
	time.Sleep(500 * time.Millisecond)
	sentBefore := l.requests.Load()
	p.kill(dead)
	killed := time.Now()
	// Run until the dead endpoint was tried in at least three separate
	// bursts (skipped in between), within a bound.
	var attempts []time.Time
	for time.Since(killed) < 20*time.Second {
		time.Sleep(250 * time.Millisecond)
		attempts = s.connectFailures(t, dead, p.port)
		if len(bursts(attempts)) >= 3 && time.Since(killed) > 5*time.Second {
			break
		}
	}
	sent, failed, failures := l.stop()
	afterKill := sent - sentBefore
	t.Logf("failover: %d requests sent (%d after the kill over %s), %d failed %v",
		sent, afterKill, time.Since(killed).Round(100*time.Millisecond), failed, failures)
	if failed != 0 {
		t.Errorf("%d of %d idempotent requests failed when one backend of three was killed", failed, sent)
	}

	b := bursts(attempts)
	t.Logf("passive health: %d connection attempts to the dead %s, in bursts at %s", len(attempts), dead, describeBursts(b, killed))
	// Without passive health a third of the requests after the kill would
	// try it first; with it, about max-fails (+1 per worker) per window.
	if max := 6 * len(b); len(attempts) > max || int64(len(attempts)) > afterKill/10 {
		t.Errorf("%d connection attempts to the dead endpoint in %d bursts (%d requests): it was not skipped", len(attempts), len(b), afterKill)
	}
	if len(b) < 2 {
		t.Errorf("the dead endpoint was tried in %d burst(s): it was not tried again after fail-timeout", len(b))
	}
	for i := 1; i < len(b); i++ {
		// nginx logs whole seconds: two bursts 2 s apart are at least 1 s apart there.
		if gap := b[i].Sub(b[i-1]); gap < time.Second {
			t.Errorf("bursts %d and %d only %s apart, want about fail-timeout (2 s)", i-1, i, gap)
		}
	}

	p.revive(dead)
	s.eventually("the revived endpoint serves again", func() error { return seen(s, "fo.test", dead, 12) })
	s.noReload(t, workers, "killing a backend")
}

// anyLoad is constant GET load from several clients; an answer from any of
// want is a success.
type anyLoad struct {
	requests, failed atomic.Int64
	mu               sync.Mutex
	failures         []string
	stopCh, done     chan struct{}
}

func startAnyLoad(s *stack, host string, want []string, clients int) *anyLoad {
	l := &anyLoad{stopCh: make(chan struct{}), done: make(chan struct{})}
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		// Each client has a connection of its own, closed at the end: a
		// shared pool may dial a spare connection that never carries a
		// request, which nginx waits for when it quits.
		c := clientTo(s.port)
		go func() {
			defer wg.Done()
			defer c.CloseIdleConnections()
			for i := 0; i < 1_000_000; i++ {
				select {
				case <-l.stopCh:
					return
				default:
				}
				l.requests.Add(1)
				status, body, err := getFrom(c, host)
				if err != nil || status != http.StatusOK || !slices.Contains(want, body) {
					l.failed.Add(1)
					l.mu.Lock()
					if len(l.failures) < 5 {
						l.failures = append(l.failures, fmt.Sprintf("%d %q %v", status, body, err))
					}
					l.mu.Unlock()
				}
			}
		}()
	}
	go func() {
		wg.Wait()
		close(l.done)
	}()
	return l
}

func (l *anyLoad) stop() (requests, failed int64, failures []string) {
	close(l.stopCh)
	<-l.done
	return l.requests.Load(), l.failed.Load(), l.failures
}

// getFrom sends GET http://host/ with c and returns status and body.
func getFrom(c *http.Client, host string) (int, string, error) {
	resp, err := c.Get("http://" + host + "/")
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, strings.TrimSpace(string(body)), err
}

// connectFailures returns the times (whole seconds, as nginx logs them) of
// the failed connection attempts to addr:port in nginx's error log.
func (s *stack) connectFailures(t *testing.T, addr string, port int) []time.Time {
	t.Helper()
	f, err := os.Open(filepath.Join(s.shared, "logs", "error.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	upstream := fmt.Sprintf(`upstream: "http://%s:%d/`, addr, port)
	var times []time.Time
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if len(line) < 19 || !strings.Contains(line, upstream) || !strings.Contains(line, "failed (111") {
			continue
		}
		at, err := time.ParseInLocation("2006/01/02 15:04:05", line[:19], time.Local)
		if err == nil {
			times = append(times, at)
		}
	}
	return times
}

// bursts groups sorted times into bursts: a new one starts after a second
// or more without attempts. It returns the start of each.
func bursts(times []time.Time) []time.Time {
	var starts []time.Time
	for i, at := range times {
		if i == 0 || at.Sub(times[i-1]) > time.Second {
			starts = append(starts, at)
		}
	}
	return starts
}

func describeBursts(b []time.Time, since time.Time) string {
	var parts []string
	for _, at := range b {
		parts = append(parts, at.Format("15:04:05"))
	}
	return strings.Join(parts, ", ") + " (killed at " + since.Format("15:04:05.000") + ")"
}
