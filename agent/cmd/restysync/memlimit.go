package main

import (
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/restysync/restysync/agent/internal/syncer"
)

// The agent's soft memory limit. Go's GC lets the heap grow to twice what
// is live before it collects (GOGC=100), and a full sync makes about as
// much garbage as the model it replaces: at 10,000 Ingresses the agent
// peaks near 230 MB during one, close to the chart's 256Mi limit, where
// the kernel would kill it rather than the GC collect sooner. So when
// GOMEMLIMIT is not set, the agent sets Go's soft memory limit to
// memoryLimitShare of its cgroup's memory limit (as automemlimit does):
// the GC then works harder only as the heap nears the limit. Without a
// cgroup limit nothing changes; GOMEMLIMIT, Go's own variable, overrides
// it ("off" included).

// memoryLimitShare is the share of the cgroup's limit Go may use: the rest
// is for what Go does not count (thread stacks outside the heap, the
// kernel's page cache of the files the agent writes is the cgroup's too).
const memoryLimitShare = 0.9

// cgroupMemoryFiles hold the memory limit of the agent's cgroup: cgroup
// v2 ("max" when none), then v1 (a number near 2^63 when none).
var cgroupMemoryFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// cgroupMemoryLimit returns the memory limit of the agent's cgroup in
// bytes, read with read from the first of files that exists, and false
// when there is none.
func cgroupMemoryLimit(read func(string) ([]byte, error), files []string) (int64, bool) {
	for _, name := range files {
		data, err := read(name)
		if err != nil {
			continue
		}
		limit, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		// "max", or v1's "no limit" (the largest multiple of a page).
		if err != nil || limit <= 0 || limit >= 1<<62 {
			return 0, false
		}
		return limit, true
	}
	return 0, false
}

// setMemoryLimit sets Go's soft memory limit from the cgroup's when
// GOMEMLIMIT is not set, and logs what holds.
func setMemoryLimit(logger *slog.Logger) {
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		logger.Info("memory limit from GOMEMLIMIT", "gomemlimit", v)
		return
	}
	limit, ok := cgroupMemoryLimit(os.ReadFile, cgroupMemoryFiles)
	if !ok {
		return
	}
	soft := int64(float64(limit) * memoryLimitShare)
	debug.SetMemoryLimit(soft)
	logger.Info("memory limit from the cgroup", "cgroup_bytes", limit, "go_soft_limit_bytes", soft)
}

// startGCPercent is Go's GC percent while the source lists its objects,
// unless GOGC is set. The listing decodes every object once and leaves
// about as much garbage as it keeps; at GOGC=100 the heap peaks near twice
// what is live there, and the spans of that peak stay mapped, partly used,
// for good. Collecting sooner while it lists costs more collections of a
// heap that is still growing, once; the first sync's build and render run
// at Go's percent again (at 50, they took half as long again).
const startGCPercent = 50

// fullSyncGCPercent is Go's GC percent while a sync that builds the whole
// model builds and renders it (syncer.Options.LeanFullSync), unless GOGC
// is set; its push runs at the steady percent (the collector's idle workers
// would take the CPU nginx needs to read it). The new model,
// its views and routes live beside the last ones until the sync ends
// (at 50,000 Ingresses the live heap goes from 172 to about 290 MB), and
// the sync makes about a gigabyte of garbage there: at GOGC=100 the heap
// peaked near 500 MB, over twice the settled RSS (issue 31 wants a full
// sync not to double it); at 25, near 340 MB, for about four times the
// collections during that one sync (full syncs come with a new ConfigMap
// or IngressClass, not with a tenant's change). After the sync the
// memory releaser (releaseMemory) hands the garbage back.
const fullSyncGCPercent = 25

// Once the first config is applied, each collection sets the next one's
// GC percent so that the heap grows by at most steadyHeapGrowth past what
// was live (never under minSteadyGCPercent, never over Go's 100). A large
// agent otherwise settles near twice its live heap whatever it does, and
// any garbage that keeps coming (a Prometheus scrape, Ingress status
// writes, endpoint churn) holds its RSS at the heap's goal, not at what
// is live. At 50,000 Ingresses (190 MB live), scraped every 15 s, the RSS
// sat 48 MB over the settled figure at a growth of 64 MiB, 28 at 32 and 20
// at 16, where a collection came with each scrape (a mark of about 100
// ms of CPU: 1.1% of a core over the scrapes; B6@50k-kube-scraped). Below
// steadyHeapGrowth of live heap (about 4,000 Ingresses) nothing changes.
const (
	steadyHeapGrowth   = 16 << 20
	minSteadyGCPercent = 5
	defaultGCPercent   = 100
	liveHeapMetric     = "/gc/heap/live:bytes"
)

// steadyGCPercent is the GC percent that lets a heap with live bytes live
// grow by at most steadyHeapGrowth.
func steadyGCPercent(live uint64) int {
	if live <= steadyHeapGrowth {
		return defaultGCPercent
	}
	return max(minSteadyGCPercent, int(defaultGCPercent*steadyHeapGrowth/live))
}

// gcPercents owns Go's GC percent for the agent's life, unless GOGC is
// set (then it never changes it): a phase (the start's listing, a full
// sync's build) sets its own while it runs, and once steady is called
// every collection sets it from the live heap (steadyGCPercent). A
// phase's percent holds while it runs, though the steady one may be lower:
// a full sync at 50,000 Ingresses makes about a gigabyte of garbage while
// its live heap grows by half, and at the steady 8% it collected 59 times
// (17 at 25%) and took about twice as long.
type gcPercents struct {
	logger  *slog.Logger
	set     func(int) int    // debug.SetGCPercent
	live    func() uint64    // the live heap of the last collection
	heap    func() heapState // readHeap
	collect func()           // runtime.GC
	mu      sync.Mutex
	fixed   bool        // GOGC is set
	phase   int         // the running phase's percent, 0: none
	steady  int         // steadyGCPercent of the last collection, 0: not steady yet
	held    int         // the percent set last
	quiet   *time.Timer // runs collectIfDue once no sync has ended for idleCollectAfter
}

func newGCPercents(logger *slog.Logger) *gcPercents {
	return &gcPercents{logger: logger, set: debug.SetGCPercent, live: liveHeap, heap: readHeap, collect: runtime.GC,
		fixed: os.Getenv("GOGC") != "", held: defaultGCPercent}
}

// during sets percent until the returned restore is called (after names
// the phase for the log).
func (g *gcPercents) during(percent int, after string) (restore func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.fixed {
		return func() {}
	}
	previous := g.phase
	g.phase = percent
	g.apply()
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.phase = previous
		g.apply()
		g.logger.Debug("GC percent restored "+after, "gogc", g.held)
	}
}

// startSteady makes every collection from now on set the GC percent from
// the live heap, the first from the heap live now.
func (g *gcPercents) startSteady() {
	if g.fixed {
		return
	}
	g.afterGC()
	onEveryGC(func() bool { g.afterGC(); return true })
}

func (g *gcPercents) afterGC() {
	percent := steadyGCPercent(g.live())
	g.mu.Lock()
	defer g.mu.Unlock()
	g.steady = percent
	g.apply()
}

// apply sets the running phase's percent, else the steady one, else Go's
// default, if it changed. g.mu is held.
func (g *gcPercents) apply() {
	percent := defaultGCPercent
	switch {
	case g.phase > 0:
		percent = g.phase
	case g.steady > 0:
		percent = g.steady
	}
	if percent != g.held {
		g.set(percent)
		g.held = percent
	}
}

// Collecting between changes. A steady collection starts when an
// allocation takes the heap past its goal, and the agent allocates mostly
// while it syncs, so a collection usually began in the middle of a sync:
// at 50,000 HTTPRoutes (207 MB live, about 100 ms of marking on the two
// CPUs nginx shares) the slowest new routes were the ones that met one
// (B11-route). So once a sync has applied and no other has ended for
// idleCollectAfter, the agent collects if its heap has come more than half
// way from what was live to the goal: the collection falls between
// changes, at most twice as often, and a change that meets it waits no
// longer than for the collection it replaces.
const idleCollectAfter = 100 * time.Millisecond

// heapState is what collectIfDue reads of the heap: the live bytes of the
// last collection, the next one's goal, and the bytes of objects now
// (live or not yet collected).
type heapState struct{ live, goal, objects uint64 }

// halfWay says whether the heap has come at least half way from live to
// the goal.
func (h heapState) halfWay() bool {
	return h.goal > h.live && h.objects >= h.live+(h.goal-h.live)/2
}

func readHeap() heapState {
	samples := []metrics.Sample{{Name: liveHeapMetric}, {Name: "/gc/heap/goal:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(samples)
	var values [3]uint64
	for i, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			values[i] = s.Value.Uint64()
		}
	}
	return heapState{live: values[0], goal: values[1], objects: values[2]}
}

// betweenSyncs calls next for each sync, and once the steady GC percent
// holds (not under GOGC, not during a phase) arms the quiet timer after
// each applied sync: each one that ends pushes the collection back.
func (g *gcPercents) betweenSyncs(next func(syncer.Report)) func(syncer.Report) {
	return func(rep syncer.Report) {
		if next != nil {
			next(rep)
		}
		if !rep.Applied {
			return
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.fixed || g.steady == 0 {
			return
		}
		if g.quiet == nil {
			g.quiet = time.AfterFunc(idleCollectAfter, g.collectIfDue)
			return
		}
		g.quiet.Reset(idleCollectAfter)
	}
}

// collectIfDue collects when the heap is half way to its goal and no
// phase (a full sync's build) runs.
func (g *gcPercents) collectIfDue() {
	g.mu.Lock()
	phase := g.phase
	g.mu.Unlock()
	if phase > 0 {
		return
	}
	heap := g.heap()
	if !heap.halfWay() {
		return
	}
	start := time.Now()
	g.collect()
	g.logger.Debug("collected between syncs", "duration", time.Since(start).Round(time.Millisecond),
		"live_bytes", heap.live, "goal_bytes", heap.goal, "objects_bytes", heap.objects)
}

// liveHeap is the heap marked live by the last collection.
func liveHeap() uint64 {
	sample := []metrics.Sample{{Name: liveHeapMetric}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return sample[0].Value.Uint64()
}

// onEveryGC calls f after each collection from now on, on the runtime's
// cleanup goroutine, for as long as f returns true: a sentinel nothing
// refers to is collected by the next collection, and its cleanup arms the
// next sentinel. Go has no hook of its own for the end of a cycle; this one
// costs an allocation a cycle.
func onEveryGC(f func() bool) {
	sentinel := new(gcSentinel)
	runtime.AddCleanup(sentinel, func(struct{}) {
		if f() {
			onEveryGC(f)
		}
	}, struct{}{})
}

// gcSentinel holds a pointer so that it is never one of the tiny
// allocator's blocks (freed only with its neighbours).
type gcSentinel struct{ _ *byte }
