package syncer

import (
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/model"
)

var (
	fullSyncIngresses = flag.Int("fullsync.n", 1000, "TestFullSyncHeapAtScale: how many Ingresses (50000 for issue 31's scale)")
	fullSyncGC        = flag.Int("fullsync.gc", 0, "TestFullSyncHeapAtScale: Go's GC percent during the full sync (Options.LeanFullSync; the agent's is 25), 0: left as it is")
	fullSyncAllocs    = flag.String("fullsync.allocs", "", "TestFullSyncHeapAtScale: write the allocs profile before and after the full sync here (.0 and .1)")
)

// TestFullSyncHeapAtScale measures what a full sync (the IngressClass
// changed: every Ingress built, rendered and diffed again) does to the
// heap with -fullsync.n Ingresses: the live heap before and after, the
// most the heap held at one moment during it (live and not yet
// collected: what RSS follows) and the most it had live after one of its
// GC cycles. It is a measuring tool, not a check; the suite runs it at
// 1,000 so that it keeps working:
//
//	go test -run TestFullSyncHeapAtScale -fullsync.n 50000 -v ./agent/internal/syncer
func TestFullSyncHeapAtScale(t *testing.T) {
	env := startNewIngressEnv(t, *fullSyncIngresses)
	defer env.stop()
	env.s.WaitStateWritten()
	if *fullSyncGC > 0 {
		env.s.opts.LeanFullSync = func() func() {
			previous := debug.SetGCPercent(*fullSyncGC)
			return func() { debug.SetGCPercent(previous) }
		}
	}
	live := func() float64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return float64(m.HeapAlloc) / 1e6
	}
	before := live()
	samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}}
	var peakHeap, peakLive uint64
	var cycles0, cycles1 uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			metrics.Read(samples)
			peakHeap = max(peakHeap, samples[0].Value.Uint64())
			peakLive = max(peakLive, samples[1].Value.Uint64())
			if cycles0 == 0 {
				cycles0 = samples[2].Value.Uint64()
			}
			cycles1 = samples[2].Value.Uint64()
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	writeAllocs := func(suffix string) { writeAllocsProfile(t, *fullSyncAllocs, suffix) }
	writeAllocs(".0")
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	env.put(t, "class.yaml", fmt.Sprintf("apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata:\n  name: restysync\n  labels:\n    changed: \"1\"\nspec:\n  controller: %s\n", model.ControllerName))
	began := time.Now()
	if err := env.s.sync(env.ctx); err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	runtime.ReadMemStats(&m1)
	close(stop)
	wg.Wait()
	writeAllocs(".1")
	env.s.WaitStateWritten()
	t.Logf("full sync of %d Ingresses in %s: live before %.1f MB, after %.1f MB; during it: heap at most %.1f MB, live after a GC at most %.1f MB, %d GC cycles, %.1f MB allocated",
		*fullSyncIngresses, took.Round(time.Millisecond), before, live(), float64(peakHeap)/1e6, float64(peakLive)/1e6, cycles1-cycles0, float64(m1.TotalAlloc-m0.TotalAlloc)/1e6)
}
