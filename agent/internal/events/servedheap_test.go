package events

import (
	"flag"
	"runtime"
	"strconv"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var servedHeapN = flag.Int("events.heap.n", 1000, "TestServedHeap: how many Ingresses are served (50000 for issue 31's scale)")

// TestServedHeap reports what the Recorder keeps live to remember the
// Ingresses it has served (issue 31: the agent's live heap at 50,000
// Ingresses): the live heap after Served of each, less the one before.
func TestServedHeap(t *testing.T) {
	n := *servedHeapN
	ings := make([]*networkingv1.Ingress, n)
	for i := range ings {
		ings[i] = &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "app-" + strconv.Itoa(i),
			UID: types.UID("00000000-0000-0000-0000-" + strconv.FormatInt(1e11+int64(i), 10))}}
	}
	r := New(nil, Options{})
	before := liveHeap()
	for _, ing := range ings {
		r.Served(ing)
		drain(r)
	}
	after := liveHeap()
	t.Logf("Served of %d Ingresses: the Recorder keeps %.2f MB live (%.1f B each)",
		n, float64(after-before)/1e6, float64(after-before)/float64(n))

	// Each Ingress replaced by a copy decoded anew (a status write, or a
	// relist after the informer restarts: new strings), served again: what
	// the Recorder still holds of the old objects counts too.
	for i, ing := range ings {
		c := ing.DeepCopy()
		c.Name, c.UID = strings.Clone(c.Name), types.UID(strings.Clone(string(c.UID)))
		ings[i] = c
		r.Served(c)
	}
	if got := r.queued(); got != 0 {
		t.Errorf("%d Events after the same Ingresses decoded anew, want 0", got)
	}
	again := liveHeap()
	runtime.KeepAlive(ings)
	runtime.KeepAlive(r)
	t.Logf("after each Ingress is decoded anew and served again: %.2f MB live (%.1f B each)",
		float64(again-before)/1e6, float64(again-before)/float64(n))
}

// liveHeap returns the bytes of live objects after two collections.
func liveHeap() int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
