package file

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/restysync/restysync/agent/internal/snapshot"
)

// BenchmarkReadFolder reads a folder of 1,000 files, each holding an
// Ingress, its Service and its EndpointSlice.
func BenchmarkReadFolder(b *testing.B) {
	const apps = 1000
	dir := b.TempDir()
	for i := range apps {
		name := fmt.Sprintf("app-%04d", i)
		writeFile(b, filepath.Join(dir, name+".yaml"),
			ingressYAML(name, name)+"---\n"+serviceYAML(name, 80)+"---\n"+endpointSliceYAML(name+"-1", name))
	}
	b.ReportAllocs()
	for b.Loop() {
		s := New(dir)
		s.readAll()
		s.publish()
		snap, problems := s.Snapshot()
		if snap.Ingresses.Len() != apps || snap.Services.Len() != apps || snap.EndpointSlices.Len() != apps || len(problems) != 0 {
			b.Fatalf("read %d Ingresses, %d Services, %d EndpointSlices, problems %v",
				snap.Ingresses.Len(), snap.Services.Len(), snap.EndpointSlices.Len(), problems)
		}
	}
}

// BenchmarkPublishNewFile publishes one new file (an Ingress, its Service
// and its EndpointSlice) beside 1,000 or 50,000 such files, patched
// (patchView) or built whole (buildView, as every new file was before),
// and takes the snapshot a sync reads (Snapshot, then snapshot.Build as
// the syncer calls it). Each new file is removed again outside the timer,
// so every iteration finds the same number of files, and each has a name
// of its own (n), so a second run (-count) adds files, not edits.
func BenchmarkPublishNewFile(b *testing.B) {
	for _, apps := range []int{1000, 50000} {
		dir := b.TempDir()
		app := func(name string) string {
			return ingressYAML(name, name) + "---\n" + serviceYAML(name, 80) + "---\n" + endpointSliceYAML(name+"-1", name)
		}
		for i := range apps {
			name := fmt.Sprintf("app-%05d", i)
			writeFile(b, filepath.Join(dir, name+".yaml"), app(name))
		}
		s := New(dir)
		s.readAll()
		s.publish()
		cm := snapshot.NewConfigMap(snapshot.Options{}, nil)
		n := 0
		for _, whole := range []bool{false, true} {
			b.Run(fmt.Sprintf("apps=%d/whole=%v", apps, whole), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					b.StopTimer()
					name := fmt.Sprintf("new-%v-%06d", whole, n)
					n++
					path := filepath.Join(dir, name+".yaml")
					writeFile(b, path, app(name))
					s.readFile(path)
					s.pendingAll = whole
					b.StartTimer()
					changed, _ := s.publish()
					held, _ := s.Snapshot()
					built := snapshot.Build(held, snapshot.Options{}, cm, nil)
					b.StopTimer()
					if len(changed) != 3 || built.Snapshot.Ingresses.Len() != apps+1 {
						b.Fatalf("changed %v and %d Ingresses, want the new file's 3 objects and %d", changed, built.Snapshot.Ingresses.Len(), apps+1)
					}
					if err := os.Remove(path); err != nil {
						b.Fatal(err)
					}
					s.readFile(path)
					if changed, _ := s.publish(); len(changed) != 3 {
						b.Fatalf("removing %s changed %v", path, changed)
					}
					b.StartTimer()
				}
			})
		}
	}
}
