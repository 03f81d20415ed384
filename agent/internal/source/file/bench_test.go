package file

import (
	"fmt"
	"path/filepath"
	"testing"
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
		if len(snap.Ingresses) != apps || len(snap.Services) != apps || len(snap.EndpointSlices) != apps || len(problems) != 0 {
			b.Fatalf("read %d Ingresses, %d Services, %d EndpointSlices, problems %v",
				len(snap.Ingresses), len(snap.Services), len(snap.EndpointSlices), problems)
		}
	}
}

// BenchmarkPublishNewFile publishes one new file (an Ingress, its Service
// and its EndpointSlice) beside 1,000 or 50,000 such files: patched
// (patchView), and built whole (buildView, as every new file was before).
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
		for _, whole := range []bool{false, true} {
			b.Run(fmt.Sprintf("apps=%d/whole=%v", apps, whole), func(b *testing.B) {
				n := 0
				for b.Loop() {
					b.StopTimer()
					name := fmt.Sprintf("new-%v-%05d", whole, n)
					n++
					path := filepath.Join(dir, name+".yaml")
					writeFile(b, path, app(name))
					s.readFile(path)
					s.pendingAll = whole
					b.StartTimer()
					if changed, _ := s.publish(); len(changed) != 3 {
						b.Fatalf("changed %v, want the new file's 3 objects", changed)
					}
				}
			})
		}
	}
}
