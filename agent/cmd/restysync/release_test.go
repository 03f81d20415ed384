package main

import (
	"log/slog"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/syncer"
)

// The first applied sync asks for a release; later ones only when they
// are full syncs of a large heap (this test's heap is small), and a sync
// that did not apply never does. next sees every report.
func TestReleaseMemory(t *testing.T) {
	var seen int
	release := releaseMemory(func(syncer.Report) { seen++ }, slog.New(slog.DiscardHandler))
	release(syncer.Report{Applied: false, Path: "full"})
	release(syncer.Report{Applied: true, Path: "full"})
	release(syncer.Report{Applied: true, Path: "full"})
	release(syncer.Report{Applied: true, Path: "fast"})
	if seen != 4 {
		t.Errorf("next saw %d reports, want 4", seen)
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
