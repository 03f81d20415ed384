package file

import (
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/source"
)

// A new file's publish beside 20,000 Ingresses copies the Ingress list
// (the one handed out stays as it was) into the spare the watch loop made
// spareDelay after the publish before: it allocates less than the list's
// size, where the first new file, with no spare yet, allocates a new list
// (8 bytes an Ingress). At 50,000 Ingresses that copy wrote 400 KB of
// memory the OS had to fault in, before the sync could start. The lists
// served are the same either way, and a snapshot taken before stays as it
// was.
func TestPublishCopiesIntoTheSpare(t *testing.T) {
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
			_, found := source.FindNamed(snap.Ingresses, "default", name)
			return found
		})
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	list := uint64(8 * n)
	if got := add(1); got < list {
		t.Fatalf("the first new file's publish allocated %d bytes, less than the list (%d): the test measures nothing", got, list)
	}
	for i := 2; i <= 4; i++ {
		held, _ := s.Snapshot()
		kept := slices.Clone(held.Ingresses)
		time.Sleep(spareDelay + 200*time.Millisecond) // the watch loop makes the spare
		if got := add(i); got >= list/2 {
			t.Errorf("new file %d: the publish allocated %d bytes, want less than %d: the list was not copied into the spare", i, got, list/2)
		}
		if !slices.Equal(held.Ingresses, kept) {
			t.Fatalf("new file %d: a snapshot taken before changed", i)
		}
		snap, _ := s.Snapshot()
		if len(snap.Ingresses) != n+i || !slices.IsSortedFunc(snap.Ingresses, func(a, b *networkingv1.Ingress) int {
			return strings.Compare(a.Name, b.Name)
		}) {
			t.Fatalf("new file %d: %d Ingresses, want %d, sorted", i, len(snap.Ingresses), n+i)
		}
	}
}
