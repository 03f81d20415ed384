//go:build bench

package bench

import (
	"context"
	"flag"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/restysync/restysync/agent/internal/testenv/kubeapi"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
	"github.com/restysync/restysync/agent/internal/testenv/podnet"
)

// kubeStatusBound is how long B6@50k-kube watches the status writer of
// its second start before it reports how far the writes got.
var kubeStatusBound = flag.Duration("kube-status-bound", 2*time.Minute, "B6@50k-kube: how long to watch the Ingress status writes of the second start")

// kubeFillChunk is how many objects B6@50k-kube creates between two
// progress lines of the fill.
const kubeFillChunk = 15000

// TestB6Kube50k is B6@50k with the kube source: -scale-ingresses
// Ingresses (50,000), each with its Service and a 2-endpoint
// EndpointSlice on addresses nothing answers, and a probe whose slice
// points at a pod, created through a real kube-apiserver. The fill is
// setup, made as fast as the API server allows: etcd keeps its data in
// memory, the client speaks protobuf, and the Services are headless
// (clusterIP None: the API server's cluster IP allocation cost about 3 ms
// of its CPU a Service, three quarters of the fill; the agent reads a
// cluster IP only for service-upstream, which no Ingress here sets, and
// TestB6File50k's Services have none either).
// The agent starts on the filled server with the kube source as
// TestB6File50k's does on its folder, and the rows are the same: the
// informers' listing and the first config after it, RSS settled and at
// the peak of a full sync (an IngressClass change; a new Ingress is
// incremental), B1 at that size (the probe's slice rewritten through the
// API). Then the agent starts again with the Ingress status writer on
// (--publish-address, --election-namespace): its first config once more,
// how fast the status of every Ingress is written, what those writes
// cost the agent (each comes back to it as an Ingress update), and B1
// while they run.
func TestB6Kube50k(t *testing.T) {
	if !wanted("B6@50k-kube") {
		t.Skip("not selected")
	}
	podnet.Require(t)
	n := *scaleIngresses
	if *quick {
		n = 5000
	}
	c := startClusterWith(t, kubeapi.Options{EtcdInMemory: true})
	c.useProtobuf()
	pods := []*podnet.Pod{podnet.New(t, "pod-a"), podnet.New(t, "pod-b")}
	var objs []any
	for i := range n - 1 {
		name := "s" + strconv.Itoa(i)
		objs = append(objs, headless(service(name)), slice(name, fakeAddrs(2*i, 2)...), ingress(name, name+".scale.test", name))
	}
	objs = append(objs, headless(service("probe")), slice("probe", pods[0].IP), ingress("probe", "probe.scale.test", "probe"))
	fill := time.Now()
	for from := 0; from < len(objs); from += kubeFillChunk {
		c.createAll(objs[from:min(from+kubeFillChunk, len(objs))])
		done := min(from+kubeFillChunk, len(objs))
		t.Logf("fill: %d of %d objects in %s (%.0f/s), load %s", done, len(objs), time.Since(fill).Round(time.Second),
			float64(done)/time.Since(fill).Seconds(), loadAverage())
	}
	filled := time.Since(fill)

	// The first start: no status writer, as TestB6File50k.
	admin := "127.0.0.1:" + strconv.Itoa(nginxproc.FreePort(t))
	extra := []string{"--metrics-address", admin}
	if *profileDir != "" {
		extra = append(extra, "--profiling")
	}
	load := loadAverage()
	a := startAgent(t, c, extra...)
	profiled := make(chan []byte, 1)
	if *profileDir != "" {
		go func() { profiled <- fetchProfile("http://" + admin + "/debug/pprof/profile?seconds=30") }()
	}
	cold := time.Since(a.start) + a.waitFor("probe.scale.test", "/", pods[0].Name, 180*time.Second)
	a.waitIdle(time.Second, 30*time.Second)
	time.Sleep(3 * time.Second)
	rss := a.rssKiB()
	startPeak := a.peakKiB()
	start := startFigures(a.log.String())
	t.Logf("kube source: %s", start.cachesLine)
	t.Logf("first sync: %s", start.first.line)
	if *profileDir != "" {
		saveProfile(t, "kube-heap.pprof", fetchProfile("http://"+admin+"/debug/pprof/heap"))
		saveProfile(t, "kube-heap.txt", fetchProfile("http://"+admin+"/debug/pprof/heap?debug=1"))
		saveProfile(t, "kube-start-cpu.pprof", <-profiled)
	}

	// B1 at this size.
	changes := 50
	if *quick {
		changes = 20
	}
	current := 0
	b1, agentShare := kubeB1(c, a, pods, &current, changes)

	// Steady: Prometheus scrapes the agent.
	steady := scrapeAndWatch(t, a, "http://"+admin+"/metrics")
	t.Logf("scraped: %s", steady)

	// A full sync: the IngressClass changes (an annotation); the peak
	// RSS it reaches.
	a.resetPeak()
	before := a.log.Len()
	touchClass(t, c, "1")
	full := waitSync(t, a, before, "path=full", 60*time.Second)
	a.waitIdle(time.Second, 30*time.Second)
	fullPeak := a.peakKiB()
	t.Logf("full sync: %s", full.line)
	if *profileDir != "" {
		saveProfile(t, "B6@50k-kube-agent.log", []byte(a.log.String()))
	}

	size := fmt.Sprintf("%d Ingresses, kube source (%d objects, Services headless, created through the API server in %s, %.0f/s)",
		n, len(objs), filled.Round(time.Second), float64(len(objs))/filled.Seconds())
	report(t, Row{ID: "B6@50k-kube-start", What: "cold start → fully serving, " + size, Target: "first config ≤ 10 s after the listing",
		Measured: fmt.Sprintf("%s (listing %s, first config applied %s after start: %s after the listing)", cold.Round(10*time.Millisecond),
			start.listed, start.applied, (start.applied - start.listed).Round(time.Millisecond)),
		Pass: start.applied > 0 && start.applied-start.listed <= 10*time.Second,
		Note: fmt.Sprintf("listing = the syncer's \"source synced\" (the informers' first LIST of each kind, the kube source's %q); first sync: build %s, render %s, push %s (%s), reload and wait (status) %s; no status writer; load average at start %s",
			"kube caches synced "+start.caches, start.first.build, start.first.render, start.first.push, mb(start.first.bytes), start.first.status, load)})
	report(t, Row{ID: "B6@50k-kube-rss", What: "agent RSS settled and during a full sync, " + size, Target: "≤ 250 MB settled; full-sync peak < 2× settled",
		Measured: fmt.Sprintf("settled %.0f MB; full-sync peak %.0f MB", float64(rss)/1024, float64(fullPeak)/1024),
		Pass:     rss > 0 && rss <= 250*1024 && fullPeak < 2*rss,
		Note: fmt.Sprintf("settled: VmRSS after the start's syncs and 3 s quiet; start peak (VmHWM) %.0f MB; full sync = the IngressClass's annotation changed (path=full, build %s, render %s, push %s), peak = VmHWM reset before it",
			float64(startPeak)/1024, full.build, full.render, full.push)})
	report(t, Row{ID: "B6@50k-kube-B1", What: "endpoint propagation, " + size, Target: "p50 ≤ 20 ms, p99 ≤ 50 ms",
		Measured: b1.String(), Pass: b1.p50 <= 20*time.Millisecond && b1.p99 <= 50*time.Millisecond,
		Note: "the probe's EndpointSlice updated through the API server → the other pod answers; the agent's fast-path syncs: " + agentShare.String()})
	report(t, scrapedRow("B6@50k-kube-scraped", size, steady))

	// The second start, with the status writer: its first config, and
	// the status of every Ingress written.
	a.stop()
	a.nginx.Stop(t)
	counter := watchStatus(t, c)
	load = loadAverage()
	b := startAgent(t, c, "--publish-address", "192.0.2.10", "--election-namespace", benchNS)
	cold2 := time.Since(b.start) + b.waitFor("probe.scale.test", "/", pods[current].Name, 180*time.Second)
	// nginx may serve the probe a moment before the syncer logs that
	// the config was applied.
	waitLogged(t, b, `msg="first config applied"`, waitBound)
	start2 := startFigures(b.log.String())
	cpu0, logAt := b.cpuTime(), b.log.Len()
	written, took := counter.waitFor(n, *kubeStatusBound)
	counter.mu.Lock()
	began := counter.first.Sub(b.start.Add(start2.applied))
	counter.mu.Unlock()
	cpu := b.cpuTime() - cpu0
	syncs := syncPaths(b.log.String()[logAt:])
	rssWriting := b.rssKiB()
	if *profileDir != "" {
		saveProfile(t, "B6@50k-kube-agent2.log", []byte(b.log.String()))
	}
	// B1 while the writer writes, if it still does.
	var b1w stats
	var b1wNote string
	if written < n {
		b1w, _ = kubeB1(c, b, pods, &current, 20)
		b1wNote = fmt.Sprintf("; B1 while it still wrote (20 changes): %s", b1w)
	}
	rate := float64(written) / took.Seconds()
	measured := fmt.Sprintf("%d of %d written in %s (%.0f/s)", written, n, took.Round(time.Second), rate)
	if written < n && rate > 0 {
		measured += fmt.Sprintf("; all %d would take %s", n, (time.Duration(float64(n)/rate) * time.Second).Round(time.Second))
	}
	report(t, Row{ID: "B6@50k-kube-status", What: "Ingress status of every Ingress written at start, " + size, Target: "reported",
		Measured: measured, Pass: true, NoTarget: true,
		Note: fmt.Sprintf("second start with --publish-address, --election-namespace (the agent's default --kube-api-qps 50, burst 100): first config %s after the listing (listing %s; cold start %s; without the writer %s); the first status %s after the first config, counted by a watch on the Ingresses from the first status to the last; meanwhile the agent used %s CPU (%.0f%% of a core) on %s, RSS %.0f MB at the end%s",
			(start2.applied - start2.listed).Round(time.Millisecond), start2.listed, cold2.Round(10*time.Millisecond), (start.applied - start.listed).Round(time.Millisecond),
			began.Round(time.Millisecond), cpu.Round(100*time.Millisecond), 100*cpu.Seconds()/took.Seconds(), syncs, float64(rssWriting)/1024, b1wNote)})
}

// headless makes svc headless (clusterIP None).
func headless(svc *corev1.Service) *corev1.Service {
	svc.Spec.ClusterIP = corev1.ClusterIPNone
	return svc
}

// kubeB1 moves the probe's slice between the pods changes times through
// the API server, and returns how long each took to be served and the
// agent's fast-path syncs meanwhile.
func kubeB1(c *cluster, a *agent, pods []*podnet.Pod, current *int, changes int) (b1, agentShare stats) {
	syncsBefore := len(fastSyncs(a.log.String()))
	var latencies []time.Duration
	for range changes {
		*current = 1 - *current
		c.setEndpoints("probe", pods[*current].IP)
		latencies = append(latencies, a.waitFor("probe.scale.test", "/", pods[*current].Name, waitBound))
	}
	return summarize(latencies), summarize(fastSyncs(a.log.String())[syncsBefore:])
}

// touchClass sets an annotation of the IngressClass "restysync" to value.
func touchClass(t *testing.T, c *cluster, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	classes := c.client.NetworkingV1().IngressClasses()
	class, err := classes.Get(ctx, "restysync", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if class.Annotations == nil {
		class.Annotations = map[string]string{}
	}
	class.Annotations["bench.restysync.io/touched"] = value
	if _, err := classes.Update(ctx, class, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitSync waits until the agent logs, after offset, a sync line that
// contains want, and returns its figures.
func waitSync(t *testing.T, a *agent, offset int, want string, bound time.Duration) syncFigures {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		for _, line := range strings.Split(a.log.String()[offset:], "\n") {
			if strings.Contains(line, "msg=sync ") && strings.Contains(line, want) {
				return firstSync(line)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no sync with %s in %s", want, bound)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitLogged waits until the agent's log holds want.
func waitLogged(t *testing.T, a *agent, want string, bound time.Duration) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !strings.Contains(a.log.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("the agent did not log %s in %s", want, bound)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kubeStart are the figures of an agent's start with the kube source,
// from its log.
type kubeStart struct {
	listed, applied time.Duration
	// caches are the counts of the kube source's "kube caches synced".
	caches, cachesLine string
	first              syncFigures
}

var cachesSynced = regexp.MustCompile(`msg="kube caches synced" (.*)`)

func startFigures(log string) kubeStart {
	s := kubeStart{
		listed:  logDuration(log, `msg="source synced" duration=(\S+)`),
		applied: logDuration(log, `msg="first config applied" after_start=(\S+)`),
		first:   firstSync(log),
	}
	if m := cachesSynced.FindStringSubmatch(log); m != nil {
		s.cachesLine, s.caches = m[0], m[1]
	}
	return s
}

// syncPaths counts the sync lines of log by path: "12 syncs (10
// incremental, 2 fast)".
func syncPaths(log string) string {
	counts := map[string]int{}
	total := 0
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "msg=sync ") {
			continue
		}
		total++
		if i := strings.Index(line, " path="); i >= 0 {
			counts[strings.Fields(line[i+len(" path="):])[0]]++
		}
	}
	var parts []string
	for _, p := range []string{"fast", "incremental", "full"} {
		if counts[p] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[p], p))
		}
	}
	return fmt.Sprintf("%d syncs (%s)", total, strings.Join(parts, ", "))
}

// statusCounter counts the Ingresses a watch saw given a load-balancer
// status.
type statusCounter struct {
	mu      sync.Mutex
	written map[string]bool
	first   time.Time // the first one seen
	last    time.Time
}

// watchStatus watches the bench's Ingresses from now on and counts those
// given a status.
func watchStatus(t *testing.T, c *cluster) *statusCounter {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ingresses := c.client.NetworkingV1().Ingresses(benchNS)
	list, err := ingresses.List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	w, err := ingresses.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	s := &statusCounter{written: map[string]bool{}}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			ing, ok := ev.Object.(*networkingv1.Ingress)
			if !ok || ev.Type != watch.Modified || len(ing.Status.LoadBalancer.Ingress) == 0 {
				continue
			}
			now := time.Now()
			s.mu.Lock()
			if s.first.IsZero() {
				s.first = now
			}
			if !s.written[ing.Name] {
				s.written[ing.Name] = true
				s.last = now
			}
			s.mu.Unlock()
		}
	}()
	return s
}

// waitFor waits until n Ingresses have a status or bound has passed
// since the first did (bound from now if none does), and returns how
// many have and the time from the first to the last.
func (s *statusCounter) waitFor(n int, bound time.Duration) (int, time.Duration) {
	began := time.Now()
	for {
		time.Sleep(100 * time.Millisecond)
		s.mu.Lock()
		count, first, last := len(s.written), s.first, s.last
		s.mu.Unlock()
		from := began
		if !first.IsZero() {
			from = first
		}
		if count >= n || time.Since(from) > bound {
			if first.IsZero() {
				return 0, time.Since(began)
			}
			if count < n {
				last = time.Now()
			}
			return count, last.Sub(first)
		}
	}
}
