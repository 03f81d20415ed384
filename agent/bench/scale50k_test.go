//go:build bench

package bench

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// profileDir, when set, makes B6@50k save the agent's CPU profile of its
// start and of its B1 samples, a heap profile once it serves (the text
// one, heap.txt, ends with the agent's runtime.MemStats), its log and
// when each B1 sample began, and B11 each size's samples (when each
// began, how long it took) and, while it measures the largest size, the
// agent's CPU profile, a runtime trace (go tool trace; what ran when,
// GC cycles included) and its allocations before and after
// (go tool pprof -diff_base), with the agent's log. Run the bench with
// GODEBUG=gctrace=1 and the log holds the agent's GC cycles too.
var profileDir = flag.String("profile-dir", "", "B6@50k, B11: write the agent's profiles (and B11 a runtime trace, its log and samples) here")

// scaleIngresses is B6@50k's size (issue 31's table has 10,000 too).
var scaleIngresses = flag.Int("scale-ingresses", 50000, "B6@50k: how many Ingresses (5,000 with -quick)")

// b6FileFiles is how many Ingresses (each with its Service and slice) one
// manifest file of B6@50k holds: 3,000 documents, under the file source's
// 10,000 per file.
const b6FileGroup = 1000

// TestB6File50k is B6 at 50,000 Ingresses with the file source (issue
// 31's table): a folder of manifests, each Ingress with its Service and a
// 2-endpoint slice, and one probe Ingress whose slice points at a real
// backend. It measures the cold start (agent start → the probe answers),
// the agent's own phases from its log (listing, first config applied, the
// first sync's build, render and push), its RSS once settled and at the
// peak of a full sync (one new Ingress), and B1 at that size (the probe's
// slice rewritten → the other backend answers).
func TestB6File50k(t *testing.T) {
	if !wanted("B6@50k") {
		t.Skip("not selected")
	}
	n := *scaleIngresses
	if *quick {
		n = 5000
	}
	backends := startNamedBackends(t, "pod-a", "pod-b")
	dir := t.TempDir()
	writeScaleFolder(t, dir, n, backends[0].addr)

	admin := "127.0.0.1:" + strconv.Itoa(nginxproc.FreePort(t))
	extra := []string{"--metrics-address", admin}
	if *profileDir != "" {
		extra = append(extra, "--profiling")
	}
	a := startAgentOn(t, []string{"--source", "file:" + dir}, extra...)
	profiled := make(chan []byte, 1)
	if *profileDir != "" {
		go func() { profiled <- fetchProfile("http://" + admin + "/debug/pprof/profile?seconds=20") }()
	}
	cold := time.Since(a.start) + a.waitFor("probe.scale.test", "/", backends[0].name, 120*time.Second)
	a.waitIdle(time.Second, 30*time.Second)
	time.Sleep(3 * time.Second)
	rss := a.rssKiB()
	startPeak := a.peakKiB()
	log := a.log.String()
	listed := logDuration(log, `msg="source synced" duration=(\S+)`)
	applied := logDuration(log, `msg="first config applied" after_start=(\S+)`)
	first := firstSync(log)
	t.Logf("first sync: %s", first.line)
	if *profileDir != "" {
		saveProfile(t, "heap.pprof", fetchProfile("http://"+admin+"/debug/pprof/heap"))
		saveProfile(t, "heap.txt", fetchProfile("http://"+admin+"/debug/pprof/heap?debug=1"))
		saveProfile(t, "start-cpu.pprof", <-profiled)
	}

	// B1 at this size: the probe's slice moves between the two backends
	// (profiled with -profile-dir: the agent's CPU, and when each sample
	// began).
	var latencies []time.Duration
	current := 0
	changes := 50
	if *quick {
		changes = 20
	}
	syncsBefore := len(fastSyncs(a.log.String()))
	if *profileDir != "" {
		go func() { profiled <- fetchProfile("http://" + admin + "/debug/pprof/profile?seconds=20") }()
	}
	var samples strings.Builder
	for i := range changes {
		current = 1 - current
		began := time.Now()
		writeAtomic(t, filepath.Join(dir, "probe.yaml"), probeManifest(backends[current].addr))
		latencies = append(latencies, a.waitFor("probe.scale.test", "/", backends[current].name, waitBound))
		fmt.Fprintf(&samples, "%s B1-%d %s\n", began.UTC().Format("15:04:05.000"), i, latencies[i].Round(100*time.Microsecond))
	}
	b1 := summarize(latencies)
	if *profileDir != "" {
		saveProfile(t, "B1-cpu.pprof", <-profiled)
		saveProfile(t, "B1-samples.txt", []byte(samples.String()))
	}
	agentShare := summarize(fastSyncs(a.log.String())[syncsBefore:])

	// Steady: Prometheus scrapes the agent.
	steady := scrapeAndWatch(t, a, "http://"+admin+"/metrics")
	t.Logf("scraped: %s", steady)

	// One new Ingress (and its Service): an incremental sync at this
	// size; the peak RSS it reaches.
	a.resetPeak()
	before := a.log.Len()
	writeAtomic(t, filepath.Join(dir, "late.yaml"), appManifest("late", "late.scale.test", backends[current].addr))
	late := a.waitFor("late.scale.test", "/", backends[current].name, 60*time.Second)
	a.waitIdle(time.Second, 30*time.Second)
	latePeak := a.peakKiB()
	lateSync := firstSync(a.log.String()[before:])
	t.Logf("new Ingress: %s", lateSync.line)

	// A full sync: the IngressClass changes (a label), which may change
	// every Ingress, so the agent builds, renders and diffs them all
	// (path=full); the peak RSS it reaches.
	a.resetPeak()
	before = a.log.Len()
	writeAtomic(t, filepath.Join(dir, "classes.yaml"), strings.Replace(b9IngressClass, "  annotations:", "  labels:\n    bench: full-sync\n  annotations:", 1))
	full := a.waitSync(before, "path=full", 60*time.Second)
	a.waitIdle(time.Second, 30*time.Second)
	fullPeak := a.peakKiB()
	t.Logf("full sync: %s", full.line)
	if !strings.Contains(full.line, `path_reason="an IngressClass changed"`) {
		t.Errorf("the class change's sync is not the full sync it should be: %s", full.line)
	}
	if *profileDir != "" {
		saveProfile(t, "B6@50k-agent.log", []byte(a.log.String()))
	}

	size := fmt.Sprintf("%d Ingresses, file source", n)
	report(t, Row{ID: "B6@50k-start", What: "cold start → fully serving, " + size, Target: "first config ≤ 10 s after the listing",
		Measured: fmt.Sprintf("%s (listing %s, first config applied %s after start)", cold.Round(10*time.Millisecond), listed, applied),
		Pass:     applied > 0 && applied-listed <= 10*time.Second,
		Note: fmt.Sprintf("first sync: build %s, render %s, push %s (%s), reload and wait (status) %s",
			first.build, first.render, first.push, mb(first.bytes), first.status)})
	report(t, Row{ID: "B6@50k-rss", What: "agent RSS settled and during a full sync, " + size, Target: "≤ 250 MB settled; full-sync peak < 2× settled",
		Measured: fmt.Sprintf("settled %.0f MB; full-sync peak %.0f MB", float64(rss)/1024, float64(fullPeak)/1024),
		Pass:     rss > 0 && rss <= 250*1024 && fullPeak < 2*rss,
		Note: fmt.Sprintf("settled: VmRSS after the start's syncs and 3 s quiet; start peak (VmHWM) %.0f MB; full sync = the IngressClass relabelled (path=full: build %s, render %s, push %s); one new Ingress (path=incremental, %s → served; build %s, render %s, push %s) peak %.0f MB; each peak = VmHWM reset before it",
			float64(startPeak)/1024, full.build, full.render, full.push,
			late.Round(time.Millisecond), lateSync.build, lateSync.render, lateSync.push, float64(latePeak)/1024)})
	report(t, Row{ID: "B6@50k-B1", What: "endpoint propagation, " + size, Target: "p50 ≤ 20 ms, p99 ≤ 50 ms",
		Measured: b1.String(), Pass: b1.p50 <= 20*time.Millisecond && b1.p99 <= 50*time.Millisecond,
		Note: "the probe's manifest rewritten (rename over it); the agent's fast-path syncs: " + agentShare.String()})
	report(t, scrapedRow("B6@50k-scraped", size, steady))
}

// namedBackend is an HTTP server on loopback that answers its name.
type namedBackend struct{ name, addr string }

func startNamedBackends(t *testing.T, names ...string) []namedBackend {
	t.Helper()
	var out []namedBackend
	for i, name := range names {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.%d:0", i+2))
		if err != nil {
			t.Fatal(err)
		}
		body := name
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, body) }),
			ReadHeaderTimeout: 5 * time.Second}
		go srv.Serve(l)
		t.Cleanup(func() { srv.Close() })
		out = append(out, namedBackend{name: name, addr: l.Addr().String()})
	}
	return out
}

// writeScaleFolder writes n-1 Ingresses, each with its Service and a
// 2-endpoint slice on addresses nothing answers, b6FileGroup to a file,
// the IngressClass, and the probe (probeManifest) on addr.
func writeScaleFolder(t *testing.T, dir string, n int, addr string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "classes.yaml"), []byte(b9IngressClass), 0o644); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	file := 0
	flush := func() {
		if b.Len() == 0 {
			return
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("group%03d.yaml", file)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		b.Reset()
		file++
	}
	for i := range n - 1 {
		name := "s" + strconv.Itoa(i)
		addrs := fakeAddrs(2*i, 2)
		b.WriteString(appManifest(name, name+".scale.test", addrs[0]+":8080", addrs[1]+":8080"))
		if (i+1)%b6FileGroup == 0 {
			flush()
		}
	}
	flush()
	writeAtomic(t, filepath.Join(dir, "probe.yaml"), probeManifest(addr))
}

// probeManifest is the probe's Service, its slice on addr, and Ingress.
func probeManifest(addr string) string { return appManifest("probe", "probe.scale.test", addr) }

// appManifest is Service name with its slice on addrs ("IP:port") and an
// Ingress name routing host "/" to it.
func appManifest(name, host string, addrs ...string) string {
	return b9Service(name, addrs...) + "---\n" + b9Ingress(name, host, false, []string{"/"}) + "---\n"
}

// writeAtomic writes path through a hidden temp file renamed over it, as
// an editor or kubelet does; the file source reads it once.
func writeAtomic(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// fetchProfile returns the body of GET url (a profile), or nil.
func fetchProfile(url string) []byte {
	client := &http.Client{Timeout: 5 * time.Minute}
	resp, err := client.Get(url)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return body
}

// saveProfile writes data to name in -profile-dir.
func saveProfile(t *testing.T, name string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(*profileDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(*profileDir, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// logDuration is the first duration the pattern's group matches in log.
func logDuration(log, pattern string) time.Duration {
	m := regexp.MustCompile(pattern).FindStringSubmatch(log)
	if m == nil {
		return 0
	}
	d, _ := time.ParseDuration(m[1])
	return d
}

// syncFigures are the figures of one sync log line.
type syncFigures struct {
	line                        string
	build, render, status, push time.Duration
	bytes                       int
}

var syncField = regexp.MustCompile(`\b(build|render|status|push|bytes)=(\S+)`)

// firstSync returns the figures of the first sync in log that rendered.
func firstSync(log string) syncFigures {
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "msg=sync ") || strings.Contains(line, "render=0s") {
			continue
		}
		return parseSync(line)
	}
	return syncFigures{}
}

// parseSync reads the figures of a sync's log line.
func parseSync(line string) syncFigures {
	f := syncFigures{line: line}
	durations := map[string]*time.Duration{"build": &f.build, "render": &f.render, "status": &f.status, "push": &f.push}
	for _, m := range syncField.FindAllStringSubmatch(line, -1) {
		if d, ok := durations[m[1]]; ok {
			*d, _ = time.ParseDuration(m[2])
		} else {
			f.bytes, _ = strconv.Atoi(m[2])
		}
	}
	return f
}

func mb(bytes int) string { return fmt.Sprintf("%.1f MB", float64(bytes)/(1<<20)) }

// waitSync waits for a sync logged after offset whose line holds want,
// and returns its figures; it fails after bound.
func (a *agent) waitSync(offset int, want string, bound time.Duration) syncFigures {
	a.t.Helper()
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		for _, line := range strings.Split(a.log.String()[offset:], "\n") {
			if strings.Contains(line, "msg=sync ") && strings.Contains(line, want) {
				return parseSync(line)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	a.t.Fatalf("no sync with %q within %s; the log's end:\n%s", want, bound, tail(a.log.String(), 3000))
	return syncFigures{}
}

// peakKiB is the agent's peak resident memory (VmHWM) since it started or
// since resetPeak.
func (a *agent) peakKiB() int { return procStatusKiB(a.cmd.Process.Pid, "VmHWM:") }

// resetPeak starts VmHWM again from the current RSS (clear_refs 5).
func (a *agent) resetPeak() {
	a.t.Helper()
	if err := os.WriteFile("/proc/"+strconv.Itoa(a.cmd.Process.Pid)+"/clear_refs", []byte("5"), 0); err != nil {
		a.t.Fatalf("resetting the agent's peak RSS: %v", err)
	}
}

// procStatusKiB is a KiB field of /proc/PID/status (0 when it cannot be read).
func procStatusKiB(pid int, field string) int {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return n
		}
	}
	return 0
}

// scrapedFor is how long B6@50k and B6@50k-kube scrape the agent's
// /metrics as a Prometheus would (every scrapeEvery) and watch its RSS.
var scrapedFor = flag.Duration("scraped-for", 2*time.Minute, "B6@50k, B6@50k-kube: how long to scrape /metrics every 15 s and watch the agent's RSS")

// scrapeEvery is the scrape interval of Prometheus's example
// configuration (its global default is 1m; 15s is the harder case).
const scrapeEvery = 15 * time.Second

// prometheusAccept is the Accept header Prometheus 2 (Debian's 2.42)
// sends with each scrape.
const prometheusAccept = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"

// scraped is the agent's RSS while Prometheus scrapes it.
type scraped struct {
	scrapes                int
	median, max, end, from int // RSS in KiB: median and max of the samples, the last, the first
	took                   stats
	bytes                  int
	cpu, over              time.Duration // the agent's CPU time over the window
}

func (s scraped) String() string {
	return fmt.Sprintf("RSS median %.0f MB, max %.0f MB, at the end %.0f MB (%.0f MB before the first scrape); agent CPU %s (%.1f%% of a core)",
		float64(s.median)/1024, float64(s.max)/1024, float64(s.end)/1024, float64(s.from)/1024,
		s.cpu.Round(10*time.Millisecond), 100*s.cpu.Seconds()/s.over.Seconds())
}

// scrapeAndWatch scrapes url every scrapeEvery for -scraped-for, as
// Prometheus does (its Accept header, gzip), and samples the agent's RSS
// from /proc every 500 ms (reading /proc perturbs nothing; the scrapes
// are the load measured).
func scrapeAndWatch(t *testing.T, a *agent, url string) scraped {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	var rss []int
	var took []time.Duration
	s := scraped{from: a.rssKiB()}
	cpu0, began := a.cpuTime(), time.Now()
	end := time.Now().Add(*scrapedFor)
	next := time.Now()
	for now := time.Now(); now.Before(end); now = time.Now() {
		if !now.Before(next) {
			next = next.Add(scrapeEvery)
			req, _ := http.NewRequest(http.MethodGet, url, nil)
			req.Header.Set("Accept", prometheusAccept)
			began := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("scraping %s: %v", url, err)
			}
			n, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("scraping %s: %s", url, resp.Status)
			}
			took = append(took, time.Since(began))
			s.scrapes++
			s.bytes = int(n)
		}
		rss = append(rss, a.rssKiB())
		time.Sleep(500 * time.Millisecond)
	}
	s.cpu, s.over = a.cpuTime()-cpu0, time.Since(began)
	s.end = rss[len(rss)-1]
	sorted := slices.Clone(rss)
	slices.Sort(sorted)
	s.median, s.max = sorted[len(sorted)/2], sorted[len(sorted)-1]
	s.took = summarize(took)
	return s
}

// scrapedRow is B6@50k's steady row: the RSS while Prometheus scrapes.
func scrapedRow(id, size string, s scraped) Row {
	return Row{ID: id, What: "agent RSS while Prometheus scrapes /metrics every 15 s, " + size, Target: "≤ 250 MB (max of the samples)",
		Measured: s.String(), Pass: s.max > 0 && s.max <= 250*1024,
		Note: fmt.Sprintf("%d scrapes over %s with Prometheus 2's Accept header, each %s uncompressed, took %s; RSS from /proc every 500 ms; after B1, before the new Ingress and the full sync",
			s.scrapes, *scrapedFor, mb(s.bytes), s.took)}
}
