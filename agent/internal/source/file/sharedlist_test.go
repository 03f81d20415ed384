package file

import (
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/source"
)

// A new file's publish beside 20,000 Ingresses makes the next Ingress list
// from the last (source.Patched), sharing every chunk but the one the new
// Ingress falls in: it allocates far less than a copy of the list (8 bytes
// an Ingress), which at 50,000 Ingresses was the largest allocation of a
// change. The lists served are sorted, and a snapshot taken before stays as
// it was.
func TestPublishSharesTheList(t *testing.T) {
	const n = 20000
	dir := t.TempDir()
	for f := range 2 {
		var b strings.Builder
		for i := f * n / 2; i < (f+1)*n/2; i++ {
			fmt.Fprintf(&b, "---\n%s", ingressYAML(fmt.Sprintf("ing-%05d", i), "web"))
		}
		writeFile(t, filepath.Join(dir, fmt.Sprintf("fill-%d.yaml", f)), b.String())
	}
	s, rec := startSource(t, dir)
	add := func(i int) uint64 {
		t.Helper()
		name := fmt.Sprintf("new-%d", i)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		writeAtomic(t, filepath.Join(dir, name+".yaml"), ingressYAML(name, "web"))
		waitChange(t, s, rec, source.KindIngress, name, func(snap model.Snapshot, _ []model.Problem) bool {
			_, found := source.FindNamedIn(snap.Ingresses, "default", name)
			return found
		})
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	list := uint64(8 * n)
	for i := 1; i <= 4; i++ {
		held, _ := s.Snapshot()
		kept := held.Ingresses.Slice()
		// A copy alone would be list; reading the file and the rest of
		// the publish allocate some 40-80 KB.
		if got := add(i); got >= list {
			t.Errorf("new file %d: the publish allocated %d bytes, want less than %d: the list was copied", i, got, list)
		}
		if !slices.Equal(held.Ingresses.Slice(), kept) {
			t.Fatalf("new file %d: a snapshot taken before changed", i)
		}
		snap, _ := s.Snapshot()
		if snap.Ingresses.Len() != n+i || !slices.IsSortedFunc(snap.Ingresses.Slice(), func(a, b *networkingv1.Ingress) int {
			return strings.Compare(a.Name, b.Name)
		}) {
			t.Fatalf("new file %d: %d Ingresses, want %d, sorted", i, snap.Ingresses.Len(), n+i)
		}
	}
}
