package main

import (
	"log/slog"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/syncer"
)

// The first applied sync asks for a release; later ones only when they
// built the model whole with a large heap, and a sync that did not apply
// never does. next sees every report.
func TestReleaseMemory(t *testing.T) {
	var seen int
	release := releaseMemory(func(syncer.Report) { seen++ }, slog.New(slog.DiscardHandler), nil, nil)
	release(syncer.Report{Applied: false, Path: "full"})
	release(syncer.Report{Applied: true, Path: "full"})
	release(syncer.Report{Applied: true, Path: "full"})
	release(syncer.Report{Applied: true, Path: "fast"})
	if seen != 4 {
		t.Errorf("next saw %d reports, want 4", seen)
	}
	large := func() uint64 { return releaseHeapFloor }
	for _, c := range []struct {
		what  string
		rep   syncer.Report
		first bool
		want  bool
	}{
		{"the first applied sync", syncer.Report{Applied: true, Path: "fast"}, true, true},
		{"a sync not applied", syncer.Report{Path: "full", Whole: true}, true, false},
		{"a whole build of a large heap", syncer.Report{Applied: true, Path: "full", Whole: true}, false, true},
		// An incremental build (path full, not whole): its garbage is
		// small, and a forced collection of the heap would delay the next change.
		{"an incremental build", syncer.Report{Applied: true, Path: "full"}, false, false},
		{"the fast path", syncer.Report{Applied: true, Path: "fast"}, false, false},
	} {
		if got := releaseDue(c.rep, c.first, large); got != c.want {
			t.Errorf("%s: release %v, want %v", c.what, got, c.want)
		}
	}
	if releaseDue(syncer.Report{Applied: true, Path: "full", Whole: true}, false, func() uint64 { return releaseHeapFloor - 1 }) {
		t.Error("a whole build of a small heap releases")
	}
}

// Asks closer than releaseInterval are one release, made once the
// interval since the last one has passed.
func TestMemoryReleaserCoalesces(t *testing.T) {
	m := &memoryReleaser{logger: slog.New(slog.DiscardHandler)}
	m.ask()
	waitReleased(t, m)
	m.mu.Lock()
	first := m.last
	m.mu.Unlock()
	m.ask()
	m.ask() // coalesced with the one before
	m.mu.Lock()
	pending := m.pending
	m.mu.Unlock()
	if !pending {
		t.Fatal("a second ask within the interval is not pending")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		m.mu.Lock()
		last, pending := m.last, m.pending
		m.mu.Unlock()
		if !pending {
			if gap := last.Sub(first); gap < releaseInterval {
				t.Errorf("releases %s apart, want at least %s", gap, releaseInterval)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the second release did not run")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A release waits for settle (the saved state's running write) before it
// collects: the garbage of the first save after a start, made after the
// release, stayed in the agent's RSS (B6@50k settled 305 → 327 MB when the
// saved state was first encoded off the sync path).
func TestMemoryReleaserWaitsToSettle(t *testing.T) {
	settled := make(chan struct{})
	m := &memoryReleaser{logger: slog.New(slog.DiscardHandler), settle: func() { <-settled }}
	m.ask()
	time.Sleep(100 * time.Millisecond)
	m.mu.Lock()
	released := !m.last.IsZero()
	m.mu.Unlock()
	if released {
		t.Fatal("released before the state was written")
	}
	close(settled)
	waitReleased(t, m)
}

// A phase sets the GC percent until restore; once steady, each collection
// sets it from the live heap; a running phase's percent holds over the
// steady one; GOGC set leaves it alone.
func TestGCPercents(t *testing.T) {
	var live uint64 = 8 << 20
	var set []int
	g := &gcPercents{logger: slog.New(slog.DiscardHandler), held: defaultGCPercent,
		set: func(p int) int { set = append(set, p); return 0 }, live: func() uint64 { return live }}
	restore := g.during(startGCPercent, "after the listing")
	restore()
	g.afterGC() // steady, small heap: Go's percent, as held
	live = 256 << 20
	g.afterGC()
	// A full sync's percent holds while it runs, though the steady one is lower.
	restore = g.during(fullSyncGCPercent, "after a full sync")
	restore()
	live = 128 << 20
	g.afterGC()
	live = 64 << 20
	g.afterGC()
	// Set only when it changes: a full sync at 64 MiB live asks for what holds.
	restore = g.during(fullSyncGCPercent, "after a full sync")
	restore()
	want := []int{startGCPercent, defaultGCPercent, 6, fullSyncGCPercent, 6, 12, 25}
	if !slices.Equal(set, want) {
		t.Errorf("GC percents set %v, want %v", set, want)
	}

	set = nil
	fixed := &gcPercents{logger: slog.New(slog.DiscardHandler), fixed: true, held: defaultGCPercent,
		set: func(p int) int { set = append(set, p); return 0 }, live: func() uint64 { return 1 << 30 }}
	fixed.during(startGCPercent, "after the listing")()
	fixed.startSteady()
	if len(set) > 0 {
		t.Errorf("GOGC set: GC percents set %v, want none", set)
	}
}

func TestSteadyGCPercent(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, defaultGCPercent},
		{steadyHeapGrowth, defaultGCPercent},
		{2 * steadyHeapGrowth, 50},
		{3 * steadyHeapGrowth, 33},
		{190 << 20, 8}, // 50,000 Ingresses
		{1 << 40, minSteadyGCPercent},
	} {
		if got := steadyGCPercent(c.live); got != c.want {
			t.Errorf("steadyGCPercent(%d MiB) = %d, want %d", c.live>>20, got, c.want)
		}
	}
}

// onEveryGC's function runs after each collection until it says stop.
func TestOnEveryGC(t *testing.T) {
	calls := make(chan struct{}, 10)
	var n atomic.Int32
	onEveryGC(func() bool {
		calls <- struct{}{}
		return n.Add(1) < 3
	})
	for i := range 3 {
		deadline := time.After(10 * time.Second)
		for got := false; !got; {
			runtime.GC()
			select {
			case <-calls:
				got = true
			case <-time.After(10 * time.Millisecond):
			case <-deadline:
				t.Fatalf("call %d: none after 10 s of collections", i+1)
			}
		}
	}
	for range 5 {
		runtime.GC()
	}
	time.Sleep(50 * time.Millisecond)
	if got := n.Load(); got != 3 {
		t.Errorf("called %d times, want 3 (it said stop)", got)
	}
}

// The releaser runs afterFirst once, after its first release.
func TestMemoryReleaserAfterFirst(t *testing.T) {
	var after atomic.Int32
	m := &memoryReleaser{logger: slog.New(slog.DiscardHandler), afterFirst: func() { after.Add(1) }}
	for range 2 {
		m.ask()
		waitReleased(t, m)
	}
	if got := after.Load(); got != 1 {
		t.Errorf("afterFirst ran %d times, want 1", got)
	}
}

// waitReleased waits up to 5 s for m's asked-for release to have run.
func waitReleased(t *testing.T, m *memoryReleaser) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		m.mu.Lock()
		done := !m.pending && !m.last.IsZero()
		m.mu.Unlock()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the release did not run")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestHeapHalfWay(t *testing.T) {
	for _, c := range []struct {
		heap heapState
		want bool
	}{
		{heapState{live: 200, goal: 216, objects: 207}, false},
		{heapState{live: 200, goal: 216, objects: 208}, true},
		{heapState{live: 200, goal: 216, objects: 230}, true},
		{heapState{}, false}, // no collection yet
	} {
		if got := c.heap.halfWay(); got != c.want {
			t.Errorf("%+v: half way %v, want %v", c.heap, got, c.want)
		}
	}
}

// Once steady, an applied sync with no other after it for idleCollectAfter
// collects, if the heap is half way to its goal; syncs that keep ending
// push it back, and neither GOGC, a phase nor an unapplied sync collects.
func TestCollectBetweenSyncs(t *testing.T) {
	newGC := func(heap heapState) (*gcPercents, *atomic.Int32) {
		var collected atomic.Int32
		g := &gcPercents{logger: slog.New(slog.DiscardHandler), held: defaultGCPercent,
			set: func(int) int { return 0 }, live: func() uint64 { return heap.live },
			heap: func() heapState { return heap }, collect: func() { collected.Add(1) }}
		return g, &collected
	}
	due := heapState{live: 200 << 20, goal: 216 << 20, objects: 210 << 20}
	settle := func() { time.Sleep(3 * idleCollectAfter) }

	g, collected := newGC(due)
	synced := g.betweenSyncs(nil)
	synced(syncer.Report{Applied: true})
	settle()
	if got := collected.Load(); got != 0 {
		t.Errorf("before steady: %d collections, want 0", got)
	}
	g.startSteady()
	synced(syncer.Report{Applied: false})
	settle()
	if got := collected.Load(); got != 0 {
		t.Errorf("after a sync that did not apply: %d collections, want 0", got)
	}
	// Syncs ending closer than idleCollectAfter: one collection, after the last.
	for range 5 {
		synced(syncer.Report{Applied: true})
		time.Sleep(idleCollectAfter / 4)
	}
	if got := collected.Load(); got != 0 {
		t.Errorf("while syncs keep ending: %d collections, want 0", got)
	}
	settle()
	if got := collected.Load(); got != 1 {
		t.Errorf("after the syncs: %d collections, want 1", got)
	}
	restore := g.during(fullSyncGCPercent, "after a full sync")
	synced(syncer.Report{Applied: true})
	settle()
	restore()
	if got := collected.Load(); got != 1 {
		t.Errorf("during a phase: %d collections, want still 1", got)
	}

	early, collected := newGC(heapState{live: 200 << 20, goal: 216 << 20, objects: 205 << 20})
	early.startSteady()
	early.betweenSyncs(nil)(syncer.Report{Applied: true})
	settle()
	if got := collected.Load(); got != 0 {
		t.Errorf("heap under half way: %d collections, want 0", got)
	}

	fixed, collected := newGC(due)
	fixed.fixed = true
	fixed.startSteady()
	fixed.betweenSyncs(nil)(syncer.Report{Applied: true})
	settle()
	if got := collected.Load(); got != 0 {
		t.Errorf("GOGC set: %d collections, want 0", got)
	}
}
