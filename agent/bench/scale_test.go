//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/testenv/podnet"
)

// TestB4Churn keeps a keep-alive load on one host while its endpoints
// change ten times a second, and counts failed requests and reloads.
func TestB4Churn(t *testing.T) {
	if !wanted("B4") {
		t.Skip("not selected")
	}
	wrk := lookWrk(t)
	podnet.Require(t)
	c := startCluster(t)
	pods := make([]*podnet.Pod, 6)
	for i := range pods {
		pods[i] = podnet.New(t, "pod-"+strconv.Itoa(i))
	}
	ips := func(set []int) []string {
		var out []string
		for _, i := range set {
			out = append(out, pods[i].IP)
		}
		return out
	}
	set := []int{0, 1, 2}
	c.createAll([]any{service("b4"), slice("b4", ips(set)...), ingress("b4", "b4.test", "b4")})
	a := startAgent(t, c, "--worker-processes", "2")
	a.waitFor("b4.test", "/", "", 60*time.Second)
	// nginx may have started on the bootstrap config and been reloaded:
	// wait until only the two workers of the running config are left.
	workers := a.settledWorkers(2)

	duration := 60 * time.Second
	if *quick {
		duration = 10 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	var changes int
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if i%2 == 0 && len(set) < len(pods) {
				for p := range pods {
					if !slices.Contains(set, p) {
						set = append(set, p)
						break
					}
				}
			} else if len(set) > 1 {
				set = set[1:]
			}
			c.setEndpoints("b4", ips(set)...)
			changes++
		}
	}()
	out := runChurnWrk(t, wrk, a.port, "b4.test", duration)
	cancel()
	wg.Wait()
	reloads := 0
	if !slices.Equal(a.nginx.WorkerPIDs(), workers) {
		reloads = 1 // at least one; the workers were replaced
	}
	failed := out.non2xx + out.socketErrors
	if failed > 0 || reloads > 0 {
		t.Logf("agent log (tail):\n%s", tail(a.log.String(), 3000))
		t.Logf("%s", tail(a.nginx.Logs(), 3000))
	}
	report(t, Row{ID: "B4", What: fmt.Sprintf("churn: %d endpoint changes in %s under keep-alive load", changes, duration),
		Target:   "0 failed requests, 0 reloads",
		Measured: fmt.Sprintf("%d requests, %d non-2xx, %d socket errors, %d reloads", out.requests, out.non2xx, out.socketErrors, reloads),
		Pass:     failed == 0 && reloads == 0 && out.requests > 0,
		Note:     "wrk -t1 -c16 on the same 2 CPUs as nginx (2 workers), agent and API server"})
}

// TestB5Structural measures a new Ingress → first 200 through nginx with
// 1,000 Ingresses present: plain Ingresses (B5); Ingresses with an
// annotation whose setting already has a profile, 1,000 such present
// (B5-annotated: a routes push); and Ingresses each with a setting never
// seen before (B5-new-profile: one reload each).
func TestB5Structural(t *testing.T) {
	if !wanted("B5") {
		t.Skip("not selected")
	}
	podnet.Require(t)
	c := startCluster(t)
	pod := podnet.New(t, "pod-b5")
	objs := []any{service("b5"), slice("b5", pod.IP)}
	for i := range 1000 {
		objs = append(objs, ingress("i"+strconv.Itoa(i), "i"+strconv.Itoa(i)+".b5.test", "b5"))
	}
	c.createAll(objs)
	a := startAgent(t, c)
	a.waitFor("i999.b5.test", "/", "", 60*time.Second)
	n := 30
	if *quick {
		n = 8
	}
	measure := func(prefix string, annotations func(i int) map[string]string) stats {
		var latencies []time.Duration
		for i := range n {
			host := prefix + strconv.Itoa(i) + ".b5.test"
			ing := ingress(prefix+strconv.Itoa(i), host, "b5")
			ing.Annotations = annotations(i)
			if err := c.create(ing); err != nil {
				t.Fatal(err)
			}
			latencies = append(latencies, a.waitFor(host, "/", "", waitBound))
			time.Sleep(300 * time.Millisecond) // let the old workers drain
		}
		return summarize(latencies)
	}
	none := func(int) map[string]string { return nil }
	routed := measure("new", none)
	reloadsRouted := strings.Count(a.log.String(), "action=reload")

	// 1,000 Ingresses with the same annotation, then more of them.
	objs = nil
	for i := range 1000 {
		ing := ingress("r"+strconv.Itoa(i), "r"+strconv.Itoa(i)+".b5.test", "b5")
		ing.Annotations = sharedSetting
		objs = append(objs, ing)
	}
	c.createAll(objs)
	a.waitFor("r999.b5.test", "/", "", 120*time.Second)
	time.Sleep(time.Second)
	before := strings.Count(a.log.String(), "action=reload")
	annotated := measure("newr", func(int) map[string]string { return sharedSetting })
	reloadsAnnotated := strings.Count(a.log.String(), "action=reload") - before
	before = strings.Count(a.log.String(), "action=reload")
	fresh := measure("newp", func(i int) map[string]string {
		return map[string]string{"nginx.ingress.kubernetes.io/proxy-body-size": strconv.Itoa(100+i) + "m"}
	})
	reloadsFresh := strings.Count(a.log.String(), "action=reload") - before
	conf, _ := os.ReadFile(filepath.Join(a.shared, "nginx.conf"))
	for _, line := range strings.Split(a.log.String(), "\n") {
		if strings.Contains(line, "action=reload") || strings.Contains(line, "route_upserts=1") {
			t.Logf("%s", line)
		}
	}
	report(t, Row{ID: "B5", What: "new Ingress → first 200, 1,000 Ingresses present", Target: "p99 ≤ 300 ms",
		Measured: routed.String(), Pass: routed.p99 <= 300*time.Millisecond && routed.n > 0,
		Note: fmt.Sprintf("plain Ingresses (no annotation of their own): a routes push (%d reloads in the agent's log up to here, the first config included)", reloadsRouted)})
	report(t, Row{ID: "B5-annotated", What: "new Ingress whose settings have a profile, 1,000 annotated Ingresses present", Target: "p99 ≤ 100 ms, 0 reloads",
		Measured: fmt.Sprintf("%s; %d reloads", annotated, reloadsAnnotated), Pass: annotated.p99 <= 100*time.Millisecond && annotated.n > 0 && reloadsAnnotated == 0,
		Note: "every Ingress has nginx.ingress.kubernetes.io/proxy-body-size: 8m, one shared profile: a routes push"})
	report(t, Row{ID: "B5-new-profile", What: "new Ingress with a setting never seen, 1,000 annotated Ingresses present", Target: "reported",
		Measured: fmt.Sprintf("%s; %d reloads", fresh, reloadsFresh), Pass: true,
		Note: fmt.Sprintf("proxy-body-size 100m, 101m, …: each a new profile, one reload of nginx.conf (%d bytes at the end)", len(conf))})
}

// sharedSetting is an annotation that needs nginx directives: a profile,
// the same for every Ingress that carries it.
var sharedSetting = map[string]string{"nginx.ingress.kubernetes.io/proxy-body-size": "8m"}

// TestB8NginxMemory measures nginx, not the agent: the RSS of each nginx
// process with 5,000 annotated Ingresses over 20 distinct settings, and
// the cold start (agent and nginx) to fully serving with 10,000 of them.
func TestB8NginxMemory(t *testing.T) {
	if !wanted("B8") {
		t.Skip("not selected")
	}
	podnet.Require(t)
	c := startCluster(t)
	pod := podnet.New(t, "pod-b8")
	n := 5000
	if *quick {
		n = 500
	}
	annotated := func(from, to int) []any {
		var objs []any
		for i := from; i < to; i++ {
			ing := ingress("a"+strconv.Itoa(i), "a"+strconv.Itoa(i)+".b8.test", "b8")
			ing.Annotations = map[string]string{"nginx.ingress.kubernetes.io/proxy-body-size": strconv.Itoa(1+i%20) + "m"}
			objs = append(objs, ing)
		}
		return objs
	}
	c.createAll(append([]any{service("b8"), slice("b8", pod.IP)}, annotated(0, n)...))
	a := startAgent(t, c)
	last := "a" + strconv.Itoa(n-1) + ".b8.test"
	a.waitFor(last, "/", "", 120*time.Second)
	time.Sleep(2 * time.Second)
	var rss []string
	largest := 0
	for _, pid := range append([]int{a.nginx.MasterPID()}, a.nginx.WorkerPIDs()...) {
		kib := rssOf(pid)
		largest = max(largest, kib)
		rss = append(rss, fmt.Sprintf("%.0f", float64(kib)/1024))
	}
	conf, _ := os.ReadFile(filepath.Join(a.shared, "nginx.conf"))
	report(t, Row{ID: "B8-rss", What: fmt.Sprintf("RSS of each nginx process, %d annotated Ingresses over 20 distinct settings", n),
		Target: "≤ 100 MB each", Measured: strings.Join(rss, ", ") + " MB (master, workers)", Pass: largest > 0 && largest <= 100*1024,
		Note: fmt.Sprintf("nginx.conf %d bytes, %d profiles", len(conf), strings.Count(string(conf), "location @restysync_p_"))})

	// Twice as many, then a cold start of both.
	c.createAll(annotated(n, 2*n))
	a.waitFor("a"+strconv.Itoa(2*n-1)+".b8.test", "/", "", 120*time.Second)
	a.stop()
	a.nginx.Stop(t)
	b := startAgent(t, c)
	cold := time.Since(b.start) + b.waitFor("a"+strconv.Itoa(2*n-1)+".b8.test", "/", "", 120*time.Second)
	report(t, Row{ID: "B8-start", What: fmt.Sprintf("cold start → fully serving, %d annotated Ingresses", 2*n),
		Target: "≤ 5 s", Measured: cold.Round(10 * time.Millisecond).String(), Pass: cold <= 5*time.Second,
		Note: "agent and nginx started together; the last Ingress answers"})
}

// rssOf is VmRSS of pid in KiB (0 when it cannot be read).
func rssOf(pid int) int { return procStatusKiB(pid, "VmRSS:") }

// TestB6Scale fills the API server with 10,000 Ingresses and Services and
// 100,000 endpoints, then cold-starts the agent.
func TestB6Scale(t *testing.T) {
	if !wanted("B6") {
		t.Skip("not selected")
	}
	podnet.Require(t)
	n := 10000
	if *quick {
		n = 1000
	}
	c := startCluster(t)
	pods := []*podnet.Pod{podnet.New(t, "pod-a"), podnet.New(t, "pod-b")}
	var objs []any
	for i := range n - 1 {
		name := "s" + strconv.Itoa(i)
		objs = append(objs, service(name), slice(name, fakeAddrs(10*i, 10)...), ingress(name, name+".scale.test", name))
	}
	objs = append(objs, service("probe"), slice("probe", append([]string{pods[0].IP}, fakeAddrs(10*n, 0)...)...),
		ingress("probe", "probe.scale.test", "probe"))
	fill := time.Now()
	c.createAll(objs)
	t.Logf("created %d objects in %s", len(objs), time.Since(fill).Round(time.Millisecond))

	a := startAgent(t, c)
	cold := time.Since(a.start) + a.waitFor("probe.scale.test", "/", pods[0].Name, 120*time.Second)
	time.Sleep(2 * time.Second)
	rss := a.rssKiB()
	build, render := firstRender(a.log.String())
	for i, line := range strings.Split(a.log.String(), "\n") {
		if strings.Contains(line, "msg=sync") || strings.Contains(line, "sync failed") {
			t.Logf("%s", line)
			if i > 40 {
				break
			}
		}
	}

	syncsBefore := len(fastSyncs(a.log.String()))
	var latencies []time.Duration
	current := 0
	changes := 50
	if *quick {
		changes = 20
	}
	for range changes {
		current = 1 - current
		c.setEndpoints("probe", pods[current].IP)
		latencies = append(latencies, a.waitFor("probe.scale.test", "/", pods[current].Name, waitBound))
	}
	b1 := summarize(latencies)
	rssAfterChanges := a.rssKiB()
	// One structural change: a new Ingress (an incremental sync since issue 31:
	// only its host is built, rendered and pushed).
	c.createAll([]any{ingress("late", "late.scale.test", "probe")})
	a.waitFor("late.scale.test", "/", pods[current].Name, waitBound)
	rssFullPeak := a.rssKiB()
	time.Sleep(2 * time.Second) // as for the first reading
	rssAfterFull := a.rssKiB()
	// The agent's share: its fast-path syncs of these changes, from its
	// log (event coalescing and the API server's watch come before them).
	agentShare := summarize(fastSyncs(a.log.String())[syncsBefore:])
	for _, line := range strings.Split(a.log.String(), "\n") {
		if strings.Contains(line, "path=fast") && strings.Contains(line, "action=push") {
			t.Logf("%s", line)
		}
	}
	size := fmt.Sprintf("%d Ingresses, %d Services, %d endpoints", n, n, 10*(n-1)+1)
	report(t, Row{ID: "B6-start", What: "cold start → fully serving, " + size, Target: "≤ 20 s",
		Measured: cold.Round(10 * time.Millisecond).String(), Pass: cold <= 20*time.Second})
	report(t, Row{ID: "B6-rss", What: "agent RSS after sync, " + size, Target: "≤ 200 MB",
		Measured: fmt.Sprintf("%.0f MB", float64(rss)/1024), Pass: rss > 0 && rss <= 200*1024,
		Note: fmt.Sprintf("read 2 s after the first sync; %.0f MB after the %d endpoint changes of B6-B1; after one new Ingress (an incremental sync) %.0f MB as it is served, %.0f MB 2 s later",
			float64(rssAfterChanges)/1024, changes, float64(rssFullPeak)/1024, float64(rssAfterFull)/1024)})
	report(t, Row{ID: "B6-render", What: "render nginx.conf, " + size, Target: "≤ 1 s",
		Measured: render.Round(time.Millisecond).String(), Pass: render > 0 && render <= time.Second,
		Note: "model build " + build.Round(time.Millisecond).String() + "; both from the agent's sync log line"})
	report(t, Row{ID: "B6-B1", What: "endpoint propagation at that scale", Target: "p50 ≤ 20 ms, p99 ≤ 50 ms",
		Measured: b1.String(), Pass: b1.p50 <= 20*time.Millisecond && b1.p99 <= 50*time.Millisecond,
		Note: "the agent's fast-path syncs (push included) in that time: " + agentShare.String()})
}

var fastSyncTime = regexp.MustCompile(`msg="?sync.*? path=fast .*? duration=(\S+)`)

// fastSyncs returns the durations of the agent's fast-path syncs that
// pushed, in log order.
func fastSyncs(log string) []time.Duration {
	var out []time.Duration
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "action=push") {
			continue
		}
		if m := fastSyncTime.FindStringSubmatch(line); m != nil {
			if d, err := time.ParseDuration(m[1]); err == nil {
				out = append(out, d)
			}
		}
	}
	return out
}

var syncTimes = regexp.MustCompile(`msg="?sync.*? build=(\S+) render=(\S+)`)

// firstRender returns the build and render times of the agent's first
// sync that rendered nginx.conf, from its log.
func firstRender(log string) (build, render time.Duration) {
	for _, m := range syncTimes.FindAllStringSubmatch(log, -1) {
		b, err1 := time.ParseDuration(m[1])
		r, err2 := time.ParseDuration(m[2])
		if err1 == nil && err2 == nil && r > 0 {
			return b, r
		}
	}
	return 0, 0
}

type churnResult struct {
	requests, non2xx, socketErrors int
	rps                            float64
}

var (
	churnRequests = regexp.MustCompile(`(\d+) requests in`)
	churnNon2xx   = regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`)
	churnSocket   = regexp.MustCompile(`Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
	churnRPS      = regexp.MustCompile(`Requests/sec:\s+([\d.]+)`)
)

// runWrk runs wrk against nginx on port with the Host header host.
func runChurnWrk(t *testing.T, wrk string, port int, host string, d time.Duration) churnResult {
	t.Helper()
	args := []string{"-t1", "-c16", "-d" + strconv.Itoa(int(d.Seconds())) + "s", "-H", "Host: " + host,
		"http://127.0.0.1:" + strconv.Itoa(port) + "/"}
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, wrk, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("wrk: %v\n%s", err, out)
	}
	var r churnResult
	if m := churnRequests.FindSubmatch(out); m != nil {
		r.requests, _ = strconv.Atoi(string(m[1]))
	}
	if m := churnNon2xx.FindSubmatch(out); m != nil {
		r.non2xx, _ = strconv.Atoi(string(m[1]))
	}
	if m := churnSocket.FindSubmatch(out); m != nil {
		for _, g := range m[1:] {
			n, _ := strconv.Atoi(string(g))
			r.socketErrors += n
		}
	}
	if m := churnRPS.FindSubmatch(out); m != nil {
		r.rps, _ = strconv.ParseFloat(string(m[1]), 64)
	}
	t.Logf("wrk: %s", out)
	return r
}

// settledWorkers waits until nginx has exactly n workers and they stayed the
// same for a second (the workers of an earlier config have exited), and
// returns them.
func (a *agent) settledWorkers(n int) []int {
	a.t.Helper()
	deadline := time.Now().Add(waitBound)
	last, since := a.nginx.WorkerPIDs(), time.Now()
	for {
		time.Sleep(50 * time.Millisecond)
		now := a.nginx.WorkerPIDs()
		if !slices.Equal(now, last) {
			last, since = now, time.Now()
		}
		if len(last) == n && time.Since(since) >= time.Second {
			return last
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("nginx workers did not settle to %d: %v", n, last)
		}
	}
}
