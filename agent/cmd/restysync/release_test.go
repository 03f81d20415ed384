package main

import (
	"log/slog"
	"runtime/debug"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/syncer"
)

// The first applied sync asks for a release; later ones only when they
// built the model whole with a large heap, and a sync that did not apply
// never does. next sees every report.
func TestReleaseMemory(t *testing.T) {
	var seen int
	release := releaseMemory(func(syncer.Report) { seen++ }, slog.New(slog.DiscardHandler), nil)
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
	deadline := time.Now().Add(5 * time.Second)
	for {
		m.mu.Lock()
		done := !m.pending && !m.last.IsZero()
		m.mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first release did not run")
		}
		time.Sleep(10 * time.Millisecond)
	}
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
	deadline = time.Now().Add(5 * time.Second)
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
	deadline := time.Now().Add(5 * time.Second)
	for {
		m.mu.Lock()
		released := !m.last.IsZero()
		m.mu.Unlock()
		if released {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no release once the state was written")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// leanStart and leanFullSync lower the GC percent until restore, unless
// GOGC is set.
func TestLeanGCPercent(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	for _, c := range []struct {
		name    string
		lean    func() func()
		percent int
	}{
		{"the start", func() func() { return leanStart(logger) }, startGCPercent},
		{"a full sync", leanFullSync(logger), fullSyncGCPercent},
	} {
		t.Setenv("GOGC", "")
		restore := c.lean()
		if got := debug.SetGCPercent(c.percent); got != c.percent {
			t.Errorf("GC percent during %s %d, want %d", c.name, got, c.percent)
		}
		restore()
		if got := debug.SetGCPercent(100); got != 100 {
			t.Errorf("GC percent after %s's restore %d, want 100", c.name, got)
		}
		t.Setenv("GOGC", "200")
		debug.SetGCPercent(200)
		c.lean()()
		if got := debug.SetGCPercent(100); got != 200 {
			t.Errorf("GOGC=200 set: GC percent %d during %s, want 200 left alone", got, c.name)
		}
	}
}
