//go:build bench

package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
	"github.com/restysync/restysync/agent/internal/testenv/syncbuf"
)

// B9 is issue 25's regex attack, measured: does tenant B, with 100
// catastrophic-backtracking use-regex paths on b.test and two connections
// sending "/aaa…a!" to them, slow tenant A's a.test? Two stacks (agent
// with the file source, nginx with one worker) run side by side from the
// same two backends:
//
//   - "regex": a.test has Prefix "/"; b.test has the 100 use-regex paths of
//     e2e's catastrophicPaths ("/first", then "/(a+)+(?:$|/xN)"), each of
//     which backtracks without end on the attack URL.
//   - "plain": the same, but b.test's 100 paths are plain Prefix paths
//     ("/first", "/xN"); the attack URL is a 404 there.
//
// In each round, on each stack in turn (the order alternating), wrk keeps
// the attack going on two connections, each request with "Connection:
// close", while one client sends A's requests, one at a time on one
// keep-alive connection, and times each. The attack closes its connection
// after each request on both stacks because nginx closes it after every
// 500 (ngx_http_special_response_handler, error_page or not): were the
// 404s of "plain" kept alive, the row would set a new TCP connection per
// request (the worker's accept, close and handshake: 11 to 16 µs of its
// CPU, about what the failed match costs) against none, a cost any client
// imposes on any host with that header, patterns or not. A's client
// (this test) runs on the CPU of wrk and the backends, off nginx's (see
// pinSelf). A
// third measurement, A alone on the plain stack, is the quiet reference.
// The row is the median over the rounds of A's p99 with the patterns ÷ A's
// p99 without them (the target: ≤ 2).

const (
	b9Host        = "a.test"
	b9AttackHost  = "b.test"
	b9Attackers   = 2
	b9RegexPaths  = 100
	b9AttackLimit = 2 * time.Minute // wrk's -d; it is stopped long before
)

// b9Attack is the URL each catastrophic path backtracks on: no byte it
// requires lets PCRE skip the work.
var b9Attack = "/" + strings.Repeat("a", 40) + "!"

func TestB9RegexAttack(t *testing.T) {
	if !wanted("B9") {
		t.Skip("B9 is not among -only")
	}
	wrk := lookWrk(t)
	nginxproc.Binary(t)

	rounds, requests := 7, 3000
	if *quick {
		rounds, requests = 3, 1000
	}
	fail := func(format string, args ...any) {
		t.Helper()
		reason := fmt.Sprintf(format, args...)
		report(t, Row{ID: "B9", What: b9What, Target: b9Target, Measured: "not measured: " + oneLine(reason)})
		t.Fatal(reason)
	}

	// nginx (master and worker) on one CPU; wrk, the backends and, once
	// the agents run, A's client (this process) on the other.
	pin := b3Pinning()
	backends, _ := startBackendProcess(t, 2, pin)
	regex := startB9Stack(t, "regex", backends, true)
	plain := startB9Stack(t, "plain", backends, false)
	stacks := []*b9Stack{regex, plain}
	for _, s := range stacks {
		pin.nginx(t, &b3Variant{name: s.name, nginx: s.agent.nginx})
		if err := s.check(); err != nil {
			fail("%s stack: %v\n%s", s.name, err, s.agent.nginx.Logs())
		}
	}
	if err := pinSelf(t, pin); err != nil {
		fail("pinning A's client: %v", err)
	}

	// Warm-up: connections, JIT-compiled regexes, the Go client.
	for _, s := range stacks {
		if _, err := s.measure(wrk, pin, requests/5, true); err != nil {
			fail("warm-up of %s: %v", s.name, err)
		}
	}

	var results []b9Round
	for round := 1; round <= rounds; round++ {
		if waited, quiet := waitQuiet(3 * time.Second); waited > 0 {
			t.Logf("waited %s for other processes to leave the CPUs (quiet: %v)", waited.Round(100*time.Millisecond), quiet)
		}
		order := slices.Clone(stacks)
		if round%2 == 0 {
			slices.Reverse(order)
		}
		var r b9Round
		for _, s := range order {
			m, err := s.measure(wrk, pin, requests, true)
			if err != nil {
				fail("round %d, %s: %v", round, s.name, err)
			}
			if s == regex {
				r.regex = m
			} else {
				r.plain = m
			}
			t.Logf("round %d %-5s under attack: A %s; attack %.0f req/s (%d requests, %d non-2xx, p99 %s), regex failures %.0f/s, nginx worker busy %.0f%%",
				round, s.name, m.a, m.attackRate(), m.attackRequests, m.attackNon2xx, ms(m.attackP99), m.regexFailureRate(), 100*m.workerBusy())
		}
		m, err := plain.measure(wrk, pin, requests, false)
		if err != nil {
			fail("round %d, quiet: %v", round, err)
		}
		r.quiet = m
		t.Logf("round %d quiet (plain, no attack): A %s", round, m.a)
		t.Logf("round %d: A's p99 with ÷ without the patterns %.3f, p50 %.3f", round, r.p99Ratio(), r.p50Ratio())
		results = append(results, r)
	}

	of := func(f func(b9Round) float64) []float64 { return mapSlice(results, f) }
	p99Ratios := of(b9Round.p99Ratio)
	p99Ratio := median(p99Ratios)
	p50Ratio := median(of(b9Round.p50Ratio))
	secondsOf := func(f func(b9Round) time.Duration) float64 {
		return median(of(func(r b9Round) float64 { return f(r).Seconds() }))
	}
	pooled := func(f func(b9Round) b9Measure) stats {
		var all []time.Duration
		for _, r := range results {
			all = append(all, f(r).latencies...)
		}
		return summarize(all)
	}
	regexAll, plainAll, quietAll := pooled(func(r b9Round) b9Measure { return r.regex }),
		pooled(func(r b9Round) b9Measure { return r.plain }), pooled(func(r b9Round) b9Measure { return r.quiet })

	report(t, Row{
		ID:     "B9",
		What:   b9What,
		Target: b9Target,
		Measured: fmt.Sprintf("median %s (min–max %s–%s, n=%d); A's p99 median with the patterns %s, without %s (difference per round, median %+.2f ms); p50 %s and %s (ratio %s)",
			ceil3(p99Ratio), ceil3(slices.Min(p99Ratios)), ceil3(slices.Max(p99Ratios)), len(p99Ratios),
			secondsString(secondsOf(func(r b9Round) time.Duration { return r.regex.a.p99 })),
			secondsString(secondsOf(func(r b9Round) time.Duration { return r.plain.a.p99 })),
			1000*secondsOf(func(r b9Round) time.Duration { return r.regex.a.p99 - r.plain.a.p99 }),
			secondsString(secondsOf(func(r b9Round) time.Duration { return r.regex.a.p50 })),
			secondsString(secondsOf(func(r b9Round) time.Duration { return r.plain.a.p50 })),
			ceil3(p50Ratio)),
		Pass: p99Ratio <= 2,
		Note: fmt.Sprintf("%d interleaved rounds, order alternating; in each, on each stack, wrk -t1 -c%d loops GET b.test%s with Connection: close (a new connection per request on both stacks: nginx closes it after every 500) while A sends %d GETs to a.test, one at a time on one keep-alive connection; "+
			"1 nginx worker per stack (agent with the file source; lua_regex_match_limit and the per-request regex budget as shipped); %s; "+
			"attack medians: with the patterns %.0f req/s, every one a 500, %.0f regex failures/s counted, the attack's own p99 %s; without %.0f req/s (404s), p99 %s; nginx worker busy with %.0f%%, without %.0f%%, its CPU per request (attack and A's) with %.1f µs, without %.1f µs; "+
			"all rounds pooled: A with %s; without %s; A alone (no attack, plain stack) %s; nginx's log of the failures: %s; "+
			"on the regex stack's new worker GET b.test/first answered 500 %d times before its 200 (regexes are compiled when the worker loads the host's routes; the budget counts CPU time)",
			len(results), b9Attackers, b9Attack, requests, b9Pinning(pin),
			median(of(func(r b9Round) float64 { return r.regex.attackRate() })), median(of(func(r b9Round) float64 { return r.regex.regexFailureRate() })),
			secondsString(median(of(func(r b9Round) float64 { return r.regex.attackP99.Seconds() }))),
			median(of(func(r b9Round) float64 { return r.plain.attackRate() })),
			secondsString(median(of(func(r b9Round) float64 { return r.plain.attackP99.Seconds() }))),
			median(of(func(r b9Round) float64 { return 100 * r.regex.workerBusy() })), median(of(func(r b9Round) float64 { return 100 * r.plain.workerBusy() })),
			median(of(func(r b9Round) float64 { return micros(r.regex.cpuPerRequest()) })), median(of(func(r b9Round) float64 { return micros(r.plain.cpuPerRequest()) })),
			regexAll, plainAll, quietAll, regex.failureLine(), regex.coldFailures),
	})

	// The reference: the same attack with nginx.conf's lua_regex_match_limit
	// taken out (PCRE's default limit, as before issue 25), the regex
	// budget still in Lua: what the bench shows when the defense is off.
	undefended, err := regex.withoutMatchLimit(t, pin)
	if err != nil {
		report(t, Row{ID: "B9-undefended", What: b9UndefendedWhat, Target: "reported", NoTarget: true, Measured: "not measured: " + oneLine(err.Error())})
		t.Fatal(err)
	}
	m, err := regex.measure(wrk, pin, b9UndefendedRequests, true)
	if err != nil {
		report(t, Row{ID: "B9-undefended", What: b9UndefendedWhat, Target: "reported", NoTarget: true, Measured: "not measured: " + oneLine(err.Error())})
		t.Fatal(err)
	}
	t.Logf("undefended (%s): A %s; attack %.0f req/s (%d requests, %d non-2xx), regex failures %.0f/s, nginx worker busy %.0f%%",
		undefended, m.a, m.attackRate(), m.attackRequests, m.attackNon2xx, m.regexFailureRate(), 100*m.workerBusy())
	report(t, Row{
		ID:       "B9-undefended",
		What:     b9UndefendedWhat,
		Target:   "reported",
		NoTarget: true,
		Measured: fmt.Sprintf("A's p99 %s, p50 %s: p99 %.0f× B9's A without the patterns", ms(m.a.p99), ms(m.a.p50), m.a.p99.Seconds()/secondsOf(func(r b9Round) time.Duration { return r.plain.a.p99 })),
		Note: fmt.Sprintf("after B9's rounds, on its regex stack: %s, nginx reloaded; %d of A's GETs under the same attack (%.0f req/s, %.0f regex failures/s); nginx worker busy %.0f%%",
			undefended, b9UndefendedRequests, m.attackRate(), m.regexFailureRate(), 100*m.workerBusy()),
	})
}

const (
	b9UndefendedWhat = "B9's attack with lua_regex_match_limit taken out of nginx.conf (reference: the defense off)"
	// b9UndefendedRequests is few: each of A's requests may wait behind
	// two attack requests of tens of milliseconds.
	b9UndefendedRequests = 200
)

// b9MatchLimit is the line of the rendered nginx.conf that withoutMatchLimit
// takes out.
var b9MatchLimit = regexp.MustCompile(`(?m)^\s*lua_regex_match_limit\s+[0-9]+;\n`)

// withoutMatchLimit takes lua_regex_match_limit out of the stack's
// nginx.conf and reloads nginx; it says what it took out.
func (s *b9Stack) withoutMatchLimit(t *testing.T, pin b3Pin) (string, error) {
	t.Helper()
	file := filepath.Join(s.agent.shared, "nginx.conf")
	conf, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	line := b9MatchLimit.Find(conf)
	if line == nil {
		return "", fmt.Errorf("%s has no lua_regex_match_limit line", file)
	}
	if err := os.WriteFile(file, b9MatchLimit.ReplaceAll(conf, nil), 0o644); err != nil {
		return "", err
	}
	s.agent.nginx.Reload(t)
	pin.nginx(t, &b3Variant{name: s.name, nginx: s.agent.nginx})
	// The new worker compiles each regex at its first use, and that time
	// counts against the request's budget: the first requests to b.test
	// may answer 500 until the regexes are compiled.
	failed, err := s.warmRegexes()
	if err != nil {
		return "", fmt.Errorf("after the reload: %w\n%s", err, tail(s.agent.nginx.Logs(), 3000))
	}
	t.Logf("after the reload, GET b.test/first answered 500 %d times before its 200", failed)
	if err := s.check(); err != nil {
		return "", fmt.Errorf("after the reload: %w\n%s", err, tail(s.agent.nginx.Logs(), 3000))
	}
	return fmt.Sprintf("%q taken out", strings.TrimSpace(string(line))), nil
}

const (
	b9What   = "tenant A's p99 latency, B's 100 catastrophic regex paths under attack ÷ B with plain paths under the same attack"
	b9Target = "median ≤ 2.0"
)

// b9Pinning describes where B9's processes run.
func b9Pinning(p b3Pin) string {
	if p.taskset == "" {
		return fmt.Sprintf("not pinned (no taskset or fewer than 2 CPUs): %d CPUs shared", p.cpus)
	}
	return fmt.Sprintf("taskset: both stacks' nginx master and worker on CPU %s, wrk, the 2 Go backends and A's client (this test) on CPU %s, agents not pinned, of %d CPUs", p.nginxCPU, p.other, p.cpus)
}

// pinSelf moves every thread of this process, A's client, to the CPU of
// wrk and the backends until the test ends. Unpinned, the kernel wakes the
// client on the CPU of the nginx worker that answered it, and there,
// under the regex attack, the busier worker (63-73% against 55%) runs for
// milliseconds without sleeping (perf sched: on-CPU stretches p99 1.4 ms
// against 0.12 ms): A's p99 was the client's wait for that CPU (its waits
// of 0.5 ms or more 58 a second against 25), while A's time inside nginx,
// access phase to log phase, was the same on both stacks (p99 ≤ 0.3 ms).
func pinSelf(t *testing.T, p b3Pin) error {
	if p.taskset == "" {
		return nil
	}
	all := make([]string, 0, p.cpus)
	for _, cpu := range allowedCPUs() {
		all = append(all, strconv.Itoa(cpu))
	}
	pid := strconv.Itoa(os.Getpid())
	if out, err := exec.Command(p.taskset, "-a", "-p", "-c", p.other, pid).CombinedOutput(); err != nil {
		return fmt.Errorf("taskset -a -p -c %s %s: %v: %s", p.other, pid, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(p.taskset, "-a", "-p", "-c", strings.Join(all, ","), pid).CombinedOutput(); err != nil {
			t.Errorf("taskset -a -p -c %s %s: %v: %s", strings.Join(all, ","), pid, err, out)
		}
	})
	return nil
}

// b9Round is one round: A under attack on each stack, and A alone.
type b9Round struct {
	regex, plain, quiet b9Measure
}

func (r b9Round) p99Ratio() float64 { return r.regex.a.p99.Seconds() / r.plain.a.p99.Seconds() }
func (r b9Round) p50Ratio() float64 { return r.regex.a.p50.Seconds() / r.plain.a.p50.Seconds() }

// b9Measure is one stack's measurement: A's latencies and what the attack did.
type b9Measure struct {
	a              stats
	latencies      []time.Duration
	attackRequests int64
	attackNon2xx   int64
	attackTime     time.Duration // how long wrk ran
	attackP99      time.Duration // the attack requests' own p99 latency
	regexFailures  float64       // restysync_lua_regex_failures_total's increase
	workerCPU      time.Duration
	elapsed        time.Duration // the whole measurement, attack included
}

func (m b9Measure) attackRate() float64 {
	if m.attackTime <= 0 {
		return 0
	}
	return float64(m.attackRequests) / m.attackTime.Seconds()
}

func (m b9Measure) regexFailureRate() float64 {
	if m.attackTime <= 0 {
		return 0
	}
	return m.regexFailures / m.attackTime.Seconds()
}

// cpuPerRequest is the nginx worker's CPU time per request, the attack's
// and A's together.
func (m b9Measure) cpuPerRequest() time.Duration {
	n := m.attackRequests + int64(len(m.latencies))
	if n == 0 {
		return 0
	}
	return m.workerCPU / time.Duration(n)
}

func (m b9Measure) workerBusy() float64 { return m.workerCPU.Seconds() / m.elapsed.Seconds() }

// b9Stack is an agent with its nginx, serving a.test and b.test.
type b9Stack struct {
	name   string
	regex  bool // b.test has the catastrophic use-regex paths
	agent  *agent
	admin  string       // http://HOST:PORT of the agent's admin server
	client *http.Client // A's: one keep-alive connection to nginx
	// coldFailures is how many times GET b.test/first answered 500 on
	// the new worker before its 200.
	coldFailures int
}

// startB9Stack runs an agent on a folder of manifests: a.test's Prefix "/"
// to backends[0], and b.test's 100 paths to backends[1], use-regex
// catastrophic ones if regex, plain prefixes if not.
func startB9Stack(t *testing.T, name string, backends []string, regex bool) *b9Stack {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"classes.yaml":  b9IngressClass,
		"services.yaml": b9Service("a", backends[0]) + "---\n" + b9Service("b", backends[1]),
		"a.yaml":        b9Ingress("a", b9Host, false, []string{"/"}),
	}
	bPaths := []string{"/first"}
	for i := 1; i < b9RegexPaths; i++ {
		if regex {
			bPaths = append(bPaths, fmt.Sprintf("/(a+)+(?:$|/x%d)", i))
		} else {
			bPaths = append(bPaths, fmt.Sprintf("/x%d", i))
		}
	}
	files["b.yaml"] = b9Ingress("b", b9AttackHost, regex, bPaths)
	for file, content := range files {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	admin := "127.0.0.1:" + strconv.Itoa(nginxproc.FreePort(t))
	a := startAgentOn(t, []string{"--source", "file:" + dir}, "--metrics-address", admin)
	s := &b9Stack{name: name, regex: regex, agent: a, admin: "http://" + admin}
	s.client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", strconv.Itoa(a.port)))
		},
		MaxIdleConnsPerHost: 1,
		MaxConnsPerHost:     1,
	}}
	a.waitFor(b9Host, "/", "backend 1", waitBound)
	failed, err := s.warmRegexes()
	if err != nil {
		t.Fatalf("%s stack: %v\n%s", name, err, tail(a.nginx.Logs(), 3000))
	}
	s.coldFailures = failed
	return s
}

// check says whether the stack routes as B9 needs: A and B's "/first"
// reach their backends, and the attack is a 500 (the regex failed, fast)
// with the patterns or a 404 without them.
func (s *b9Stack) check() error {
	for _, c := range []struct {
		host, path string
		status     int
		body       string
	}{
		{b9Host, "/", http.StatusOK, "backend 1"},
		{b9AttackHost, "/first", http.StatusOK, "backend 2"},
		{b9AttackHost, "/x5", map[bool]int{true: http.StatusNotFound, false: http.StatusOK}[s.regex], ""},
		{b9AttackHost, b9Attack, map[bool]int{true: http.StatusInternalServerError, false: http.StatusNotFound}[s.regex], ""},
	} {
		start := time.Now()
		status, body := s.agent.get(c.host, c.path)
		if status != c.status || (c.body != "" && body != c.body) {
			return fmt.Errorf("GET %s%s: %d %q, want %d %q", c.host, c.path, status, body, c.status, c.body)
		}
		if took := time.Since(start); took > time.Second {
			return fmt.Errorf("GET %s%s took %s", c.host, c.path, took)
		}
	}
	if strings.Contains(s.agent.log.String(), "regex paths, the most one host may have") {
		return fmt.Errorf("the agent left regex paths out:\n%s", tail(s.agent.log.String(), 2000))
	}
	return nil
}

// warmRegexes sends GET b.test/first until it answers 200 (at most 100
// times) and returns how many 500s came before: a new worker compiles
// each regex at its first use, within the request's regex budget.
func (s *b9Stack) warmRegexes() (int, error) {
	failed := 0
	for range 100 {
		status, body := s.agent.get(b9AttackHost, "/first")
		switch {
		case status == http.StatusOK && body == "backend 2":
			return failed, nil
		case status == http.StatusInternalServerError:
			failed++
		default:
			return failed, fmt.Errorf("GET %s/first: %d %q", b9AttackHost, status, body)
		}
	}
	return failed, fmt.Errorf("GET %s/first answered 500 100 times", b9AttackHost)
}

// measure times n of A's requests, under attack if attack.
func (s *b9Stack) measure(wrk string, pin b3Pin, n int, attack bool) (b9Measure, error) {
	var m b9Measure
	workers := s.agent.nginx.WorkerPIDs()
	failuresBefore, err := s.regexFailures()
	if err != nil {
		return m, err
	}
	cpuBefore, err := cpuTime(workers)
	if err != nil {
		return m, err
	}
	start := time.Now()
	var stopAttack func() (wrkAttack, error)
	if attack {
		if stopAttack, err = startAttack(wrk, pin, s.agent.port); err != nil {
			return m, err
		}
		time.Sleep(200 * time.Millisecond) // wrk connects and loops
	}
	m.latencies, err = s.timeA(n)
	if stopAttack != nil {
		w, werr := stopAttack()
		if err == nil {
			err = werr
		}
		m.attackRequests, m.attackNon2xx, m.attackTime, m.attackP99 = w.requests, w.non2xx, w.duration, w.p99
	}
	if err != nil {
		return m, err
	}
	m.elapsed = time.Since(start)
	cpuAfter, err := cpuTime(workers)
	if err != nil {
		return m, err
	}
	m.workerCPU = cpuAfter - cpuBefore
	failuresAfter, err := s.regexFailures()
	if err != nil {
		return m, err
	}
	m.regexFailures = failuresAfter - failuresBefore
	if attack && m.attackNon2xx != m.attackRequests {
		return m, fmt.Errorf("%d of wrk's %d attack requests were answered 2xx or 3xx", m.attackRequests-m.attackNon2xx, m.attackRequests)
	}
	if attack && m.attackRequests == 0 {
		return m, errors.New("wrk sent no attack requests")
	}
	m.a = summarize(m.latencies)
	return m, nil
}

// timeA sends n GETs to a.test one after the other and returns how long
// each took; any answer but backend 1's 200 is an error.
func (s *b9Stack) timeA(n int) ([]time.Duration, error) {
	deadline := time.Now().Add(time.Minute)
	latencies := make([]time.Duration, 0, n)
	for i := range n {
		req, err := http.NewRequest(http.MethodGet, "http://"+b9Host+"/", nil)
		if err != nil {
			return nil, err
		}
		start := time.Now()
		resp, err := s.client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("A's request %d: %w", i, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		if err != nil || resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "backend 1" {
			return nil, fmt.Errorf("A's request %d: %d %q %v", i, resp.StatusCode, body, err)
		}
		latencies = append(latencies, took)
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("A's %d requests took over a minute (%d done)", n, i+1)
		}
	}
	return latencies, nil
}

// regexFailures reads restysync_lua_regex_failures_total from the agent.
func (s *b9Stack) regexFailures() (float64, error) {
	resp, err := http.Get(s.admin + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s/metrics: %d %v", s.admin, resp.StatusCode, err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if value, ok := strings.CutPrefix(line, "restysync_lua_regex_failures_total "); ok {
			return strconv.ParseFloat(strings.TrimSpace(value), 64)
		}
	}
	return 0, errors.New("the agent's /metrics has no restysync_lua_regex_failures_total")
}

// failureLine is the first line nginx logged about a failed regex of b.test.
func (s *b9Stack) failureLine() string {
	for _, line := range strings.Split(s.agent.nginx.Logs(), "\n") {
		if i := strings.Index(line, "restysync: route of "+b9AttackHost); i >= 0 {
			line = line[i:]
			if j := strings.Index(line, ", client:"); j >= 0 {
				line = line[:j]
			}
			line, _, _ = strings.Cut(line, "\n")
			return strings.ReplaceAll(strconv.Quote(line), "|", `\|`) // a Markdown table cell
		}
	}
	return "none"
}

// wrkAttack is what wrk reports of the attack.
type wrkAttack struct {
	requests, non2xx int64
	duration         time.Duration
	p99              time.Duration // of the attack requests
}

var wrkRequestsIn = regexp.MustCompile(`(?m)^\s*([0-9]+) requests in ([0-9.]+)(us|ms|s|m)`)

// startAttack runs wrk with b9Attackers connections looping GET
// b.test/aaa…a! with "Connection: close" (a new connection per request, as
// nginx's 500s force) against nginx on port; the function it returns stops wrk
// (SIGINT, after which wrk prints its counts) and reads them.
func startAttack(wrk string, pin b3Pin, port int) (func() (wrkAttack, error), error) {
	name, args := pin.command(wrk, "-t1", fmt.Sprintf("-c%d", b9Attackers), "--latency", fmt.Sprintf("-d%ds", int(b9AttackLimit.Seconds())),
		"-H", "Host: "+b9AttackHost, "-H", "Connection: close", fmt.Sprintf("http://127.0.0.1:%d%s", port, b9Attack))
	cmd := exec.Command(name, args...)
	out := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting wrk: %w", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	return func() (wrkAttack, error) {
		var w wrkAttack
		cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
			return w, fmt.Errorf("wrk did not stop within 10 s of SIGINT\n%s", out.String())
		}
		text := out.String()
		m := wrkRequestsIn.FindStringSubmatch(text)
		if m == nil {
			return w, fmt.Errorf("no request count in wrk's output\n%s", text)
		}
		w.requests, _ = strconv.ParseInt(m[1], 10, 64)
		value, _ := strconv.ParseFloat(m[2], 64)
		unit := map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second, "m": time.Minute}[m[3]]
		w.duration = time.Duration(value * float64(unit))
		if p := wrkP99.FindStringSubmatch(text); p != nil {
			value, _ := strconv.ParseFloat(p[1], 64)
			w.p99 = time.Duration(value * float64(map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second, "m": time.Minute}[p[2]]))
		}
		if n := wrkNon2xx.FindStringSubmatch(text); n != nil {
			w.non2xx, _ = strconv.ParseInt(n[1], 10, 64)
		}
		return w, nil
	}, nil
}

const b9IngressClass = `apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: restysync
  annotations:
    ingressclass.kubernetes.io/is-default-class: "true"
spec:
  controller: restysync.io/ingress-controller
`

// b9Service is a Service "name" on port 80 and its EndpointSlice with the
// endpoints addrs ("IP:port", all on the first one's port).
func b9Service(name string, addrs ...string) string {
	_, port, _ := net.SplitHostPort(addrs[0])
	var endpoints strings.Builder
	for _, addr := range addrs {
		host, _, _ := net.SplitHostPort(addr)
		fmt.Fprintf(&endpoints, "  - addresses: [%q]\n", host)
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: %[1]s
  namespace: default
spec:
  ports:
    - name: http
      port: 80
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: %[1]s-1
  namespace: default
  labels:
    kubernetes.io/service-name: %[1]s
addressType: IPv4
ports:
  - name: http
    port: %[2]s
endpoints:
%[3]s`, name, port, endpoints.String())
}

// b9Ingress is an Ingress "name" for host whose paths go to the Service of
// the same name; use-regex makes them ImplementationSpecific regexes,
// else they are Prefix paths.
func b9Ingress(name, host string, useRegex bool, paths []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: %s\n  namespace: default\n", name)
	pathType := "Prefix"
	if useRegex {
		b.WriteString("  annotations:\n    nginx.ingress.kubernetes.io/use-regex: \"true\"\n")
		pathType = "ImplementationSpecific"
	}
	fmt.Fprintf(&b, "spec:\n  ingressClassName: restysync\n  rules:\n    - host: %q\n      http:\n        paths:\n", host)
	for _, p := range paths {
		fmt.Fprintf(&b, "          - path: %q\n            pathType: %s\n            backend:\n              service:\n                name: %s\n                port:\n                  number: 80\n",
			p, pathType, name)
	}
	return b.String()
}
