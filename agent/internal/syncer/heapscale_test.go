package syncer

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"testing"
)

var (
	heapIngresses = flag.Int("heap.n", 1000, "TestHeapAtScale: how many Ingresses (50000 for issue 31's scale)")
	heapStartGC   = flag.Int("heap.startgc", 50, "TestHeapAtScale: Go's GC percent while the source lists (the agent's startGCPercent)")
	heapProfile   = flag.String("heap.profile", "", "TestHeapAtScale: write the heap profile after the syncs here")
	heapDump      = flag.String("heap.dump", "", "TestHeapAtScale: write a heap dump (debug.WriteHeapDump) after the first sync here")
	heapChanges   = flag.Int("heap.changes", 20, "TestHeapAtScale: how many new Ingresses after the first sync")
	heapAllocs    = flag.String("heap.allocs", "", "TestHeapAtScale: write the allocs profile before and after the new Ingresses here (.0 and .1)")
)

// heapListed, when set, is called by startNewIngressEnv once the source
// has listed, before the first sync.
var heapListed func()

// TestHeapAtScale measures the syncer's live heap and the heap in use
// (the spans the live heap keeps, which is what RSS follows) with -heap.n
// Ingresses, as BenchmarkNewIngress holds them: once the file source has
// listed (at the agent's GC percent of the listing), after the first sync,
// and after -heap.changes new Ingresses; and what each of those changes
// allocated, the source's publish, the spares made between changes and
// the saved state's write included (each change's save is waited for, as
// a change that comes a second after the last is saved): the bytes a
// change allocates set how often the GC runs at that size. It is a
// measuring tool, not a check; the suite runs it at 1,000 so that it
// keeps working:
//
//	go test -run TestHeapAtScale -heap.n 50000 -v ./agent/internal/syncer
func TestHeapAtScale(t *testing.T) {
	measure := func(when string) {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		t.Logf("%s: HeapAlloc %.1f MB, HeapInuse %.1f MB, HeapObjects %d, Sys %.1f MB",
			when, float64(m.HeapAlloc)/1e6, float64(m.HeapInuse)/1e6, m.HeapObjects, float64(m.Sys)/1e6)
	}
	previous := debug.SetGCPercent(*heapStartGC)
	heapListed = func() {
		measure("listed")
		if *heapDump != "" {
			writeHeapDump(t, *heapDump+".listed")
		}
		debug.SetGCPercent(previous)
	}
	defer func() { heapListed = nil }()
	env := startNewIngressEnv(t, *heapIngresses)
	defer env.stop()
	// The saved state's write runs beside the syncs (apply's stateWriter),
	// and the first encodes every item: the agent waits for it before it
	// gives memory back (run.go), and so does the measure, or the figure
	// holds whatever part of that write was under way.
	env.s.WaitStateWritten()
	measure("first sync")
	if *heapDump != "" {
		writeHeapDump(t, *heapDump)
	}
	writeAllocs := func(suffix string) {
		if *heapAllocs == "" {
			return
		}
		runtime.GC() // the profile is as of the last GC
		f, err := os.Create(*heapAllocs + suffix)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			t.Fatal(err)
		}
	}
	writeAllocs(".0")
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range *heapChanges {
		env.s.prepare() // as the loop does between syncs
		env.add(t)
		if err := env.s.sync(env.ctx); err != nil {
			t.Fatal(err)
		}
		env.s.WaitStateWritten()
	}
	runtime.ReadMemStats(&after)
	writeAllocs(".1")
	if n := *heapChanges; n > 0 {
		t.Logf("each new Ingress allocated %.0f KB (%d objects), publish to saved state", float64(after.TotalAlloc-before.TotalAlloc)/1e3/float64(n), (after.Mallocs-before.Mallocs)/uint64(n))
	}
	measure(fmt.Sprintf("%d new Ingresses later", *heapChanges))
	if *heapProfile != "" {
		f, err := os.Create(*heapProfile)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			t.Fatal(err)
		}
	}
}

// writeHeapDump writes the runtime's heap dump (debug.WriteHeapDump) to
// path: every live object with its address and size, from which the free
// room in the spans in use can be found size class by size class.
func writeHeapDump(t *testing.T, path string) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	debug.WriteHeapDump(f.Fd())
}
