package apply

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
)

// BenchmarkSaveAtScale is one save at 50,000 routes and 50,000 backends
// after one backend changed (an endpoint change), written whole as the
// stage's writer does it: its CPU (ns/op), its garbage (B/op), the bytes
// it writes (written-B/op, the process's write calls: /proc/self/io), and
// the heap the record holds (record-MB: LuaState after its pushes, with
// what it keeps for the saved state, before a save) and what the first
// save adds to it (saved-heap-MB), and the state's size on disk (state-B).
func BenchmarkSaveAtScale(b *testing.B) {
	const n = 50000
	profiles := []render.Profile{{Name: "@restysync_p_0123456789abcdef0123456789abcdef"}}
	live := func() float64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return float64(m.HeapAlloc) / 1e6
	}
	empty := live()
	l := bigState(n, n)
	before := live()
	record := before - empty
	dir := b.TempDir()
	l.unsaved = true
	if _, err := l.Save(dir, "c1", profiles); err != nil {
		b.Fatal(err)
	}
	heap := live() - before
	written := writtenBytes(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		name := fmt.Sprintf("ns-%d/svc-%d:80", i%50, i%n)
		l.holdBackend(model.Backend{Name: name, Endpoints: []model.Endpoint{{Address: fmt.Sprintf("10.9.%d.%d", i/250%250, i%250), Port: 8080}}})
		l.unsaved = true
		if _, err := l.Save(dir, "c1", profiles); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(writtenBytes(b)-written)/float64(b.N), "written-B/op")
	b.ReportMetric(heap, "saved-heap-MB")
	b.ReportMetric(record, "record-MB")
	var size int64
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				size += info.Size()
			}
		}
		return nil
	})
	b.ReportMetric(float64(size), "state-B")
}

// BenchmarkSaveSnapshotAtScale is what the sync loop pays for a save at
// 50,000 routes and backends after one backend changed: the snapshot.
func BenchmarkSaveSnapshotAtScale(b *testing.B) {
	const n = 50000
	l := bigState(n, n)
	l.unsaved = true
	if _, err := l.snapshot("c1", nil); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		name := fmt.Sprintf("ns-%d/svc-%d:80", i%50, i%n)
		l.holdBackend(model.Backend{Name: name, Endpoints: []model.Endpoint{{Address: "10.9.0.1", Port: int32(i % 60000)}}})
		l.unsaved = true
		if s, err := l.snapshot("c1", nil); s == nil || err != nil {
			b.Fatal(s, err)
		}
	}
}
