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
