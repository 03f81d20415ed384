package apply

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/luaapi"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/plan"
	"github.com/restysync/restysync/agent/internal/render"
)

// bigState is a record of routes hosts (two locations each, one on a
// profile) and backends backends (three endpoints each).
func bigState(routes, backends int) *LuaState {
	l := NewLuaState(nil, nil)
	var bs []model.Backend
	for i := range backends {
		name := fmt.Sprintf("ns-%d/svc-%d:80", i%50, i)
		bs = append(bs, model.Backend{Name: name, Endpoints: []model.Endpoint{
			{Address: fmt.Sprintf("10.1.%d.%d", i/250, i%250), Port: 8080},
			{Address: fmt.Sprintf("10.2.%d.%d", i/250, i%250), Port: 8080},
			{Address: fmt.Sprintf("10.3.%d.%d", i/250, i%250), Port: 8080}}})
	}
	l.holdBackends(bs)
	var rs []model.Route
	for i := range routes {
		host := fmt.Sprintf("host-%d.apps.example.com", i)
		backend := fmt.Sprintf("ns-%d/svc-%d:80", (i%backends)%50, i%backends)
		rs = append(rs, model.Route{Host: host, Locations: []model.RouteLocation{
			{Path: "/", Backend: backend},
			{Path: "/api", Backend: backend, Profile: "@restysync_p_0123456789abcdef0123456789abcdef", RouteOptions: &model.RouteOptions{MaxBody: 1 << 20}}}})
	}
	l.holdRoutes(rs)
	return l
}

// readState reads the saved state in dir as nginx would: the manifest,
// and each kind's upserts from the chunks it names. It fails the test when
// a chunk it names is missing or does not decode.
func readState(t testing.TB, dir string) savedContent {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, StateName))
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	out := savedContent{manifest: m}
	out.Certificates = readChunks[luaapi.CertificatePayload](t, dir, m.Certificates.Chunks, &out.items)
	out.Backends = readChunks[luaapi.BackendPayload](t, dir, m.Backends.Chunks, &out.items)
	out.Routes = readChunks[luaapi.RoutePayload](t, dir, m.Routes.Chunks, &out.items)
	return out
}

// readChunks reads the chunks names in dir's StateChunks: their items,
// and the JSON of each after *items.
func readChunks[T any](t testing.TB, dir string, names []string, items *[]string) []T {
	t.Helper()
	var out []T
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(dir, StateChunks, name))
		if err != nil {
			t.Fatalf("a chunk the manifest names: %v", err)
		}
		var raw []json.RawMessage
		var decoded []T
		if err := json.Unmarshal(data, &raw); err != nil {
			t.Fatalf("chunk %s: %v", name, err)
		}
		if err := json.Unmarshal(data, &decoded); err != nil {
			t.Fatalf("chunk %s: %v", name, err)
		}
		for _, item := range raw {
			*items = append(*items, string(item))
		}
		out = append(out, decoded...)
	}
	return out
}

// savedContent is a saved state as read back (readState).
type savedContent struct {
	manifest
	Certificates []luaapi.CertificatePayload
	Backends     []luaapi.BackendPayload
	Routes       []luaapi.RoutePayload
	items        []string // the JSON of every item
}

// The state holds every kind as the POST that would push it, and the
// certificates whose content the agent knows, in chunk files named by a
// manifest; the manifest and the chunks are 0600, their folder 0700.
func TestSaveWritesWhatLuaHolds(t *testing.T) {
	dir := t.TempDir()
	l := bigState(3, 2)
	l.certs["default/tls"] = plan.HeldCertificate{Hosts: []string{"a.test"}, Hash: "h1"}
	l.holdPEM("default/tls", heldPEM{})
	l.certs["default/unknown"] = plan.HeldCertificate{Hosts: []string{"b.test"}, Hash: "h2"}
	l.unsaved = true
	profiles := []render.Profile{{Name: "@restysync_p_0123456789abcdef0123456789abcdef"}}
	wrote, err := l.Save(dir, "c1", profiles)
	if err != nil || !wrote {
		t.Fatalf("Save: wrote %v, %v", wrote, err)
	}
	s := readState(t, dir)
	if s.ConfigHash != "c1" || len(s.Profiles) != 1 || len(s.Backends) != 2 || len(s.Routes) != 3 || len(s.Certificates) != 1 {
		t.Errorf("saved %+v", s)
	}
	wantMode := func(path string, mode os.FileMode) {
		t.Helper()
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, want %v: it holds private keys", path, info.Mode().Perm(), mode)
		}
	}
	wantMode(filepath.Join(dir, StateName), 0o600)
	wantMode(filepath.Join(dir, StateChunks), 0o700)
	for _, name := range s.files() {
		wantMode(filepath.Join(dir, StateChunks, name), 0o600)
	}
	if wrote, _ := l.Save(dir, "c1", profiles); wrote {
		t.Error("Save wrote again though nothing changed")
	}
	if wrote, _ := l.Save(dir, "c2", nil); !wrote {
		t.Error("Save did not write for another config")
	}
	if s := readState(t, dir); s.ConfigHash != "c2" || len(s.Routes) != 3 {
		t.Errorf("saved for c2: %+v", s)
	}
}

// A save after one change writes that item's chunk and the manifest, not
// every item: at 50,000 hosts the single file was 10 MB written once a
// second under endpoint churn. The chunk it replaced is kept for one more
// save (a cold start may have read the manifest before), then removed.
func TestSaveWritesOnlyChangedChunks(t *testing.T) {
	dir := t.TempDir()
	l := bigState(20000, 20000)
	l.unsaved = true
	if _, err := l.Save(dir, "c1", nil); err != nil {
		t.Fatal(err)
	}
	first := readState(t, dir)
	size := func(names ...string) (n int64) {
		for _, name := range names {
			info, err := os.Stat(filepath.Join(dir, StateChunks, name))
			if err != nil {
				t.Fatal(err)
			}
			n += info.Size()
		}
		return n
	}
	whole := size(first.files()...)
	changes := []string{"ns-7/svc-7:80", "ns-8/svc-8:80"}
	var saved []savedContent
	for round, name := range changes {
		l.holdBackend(model.Backend{Name: name, Endpoints: []model.Endpoint{{Address: "10.9.9.9", Port: int32(90 + round)}}})
		l.unsaved = true
		before := chunkFiles(t, dir)
		if _, err := l.Save(dir, "c1", nil); err != nil {
			t.Fatal(err)
		}
		s := readState(t, dir)
		if !reflect.DeepEqual(s.Routes, first.Routes) || len(s.Backends) != 20000 {
			t.Fatalf("round %d: %d routes, %d backends", round, len(s.Routes), len(s.Backends))
		}
		var fresh []string
		for _, f := range s.files() {
			if !slices.Contains(first.files(), f) {
				fresh = append(fresh, f)
			}
		}
		if len(fresh) != round+1 {
			t.Errorf("round %d: %d new chunk files, want %d (one per changed backend)", round, len(fresh), round+1)
		}
		// A chunk file written by this save is one the folder did not
		// hold before under that name and file (writes go to a temporary
		// file renamed in): counted here, not by the process's write
		// counter, which the package's parallel tests move too.
		var written []string
		var n int64
		for name, ino := range chunkFiles(t, dir) {
			if old, ok := before[name]; !ok || old != ino {
				written = append(written, name)
				n += size(name)
			}
		}
		if len(written) != 1 || !slices.Contains(fresh, written[0]) {
			t.Errorf("round %d: a save after one change wrote %d chunk files (%d bytes), want one new chunk alone, of a state of %d bytes",
				round, len(written), n, whole)
		}
		saved = append(saved, s)
	}
	// The folder holds the chunks of the last manifest and of the one
	// before it, nothing else.
	entries, _ := os.ReadDir(filepath.Join(dir, StateChunks))
	var have []string
	for _, e := range entries {
		have = append(have, e.Name())
	}
	want := slices.Concat(saved[0].files(), saved[1].files())
	slices.Sort(have)
	slices.Sort(want)
	if want = slices.Compact(want); !slices.Equal(have, want) {
		t.Errorf("the folder holds %d files, want the %d of the last two manifests", len(have), len(want))
	}
}

// chunkFiles returns the inode of each file in dir's StateChunks.
func chunkFiles(t *testing.T, dir string) map[string]uint64 {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, StateChunks))
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]uint64, len(entries))
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = info.Sys().(*syscall.Stat_t).Ino
	}
	return out
}

// writtenBytes is what this process passed to write calls (wchar).
func writtenBytes(tb testing.TB) int64 {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		skipOutsideCI(tb, "no /proc/self/io")
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	skipOutsideCI(tb, "no wchar in /proc/self/io")
	return 0
}

// skipOutsideCI skips the test for want of a part of the machine; under
// CI=true the part is required and its lack fails the test.
func skipOutsideCI(tb testing.TB, reason string) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatalf("%s (CI=true)", reason)
	}
	tb.Skip(reason)
}

// The record keeps no JSON for the saved state: a save encodes the chunks
// that changed and lets go of them once written. At 50,000 hosts each
// item's JSON (12–16 MB) and an index of them (11 MB) were kept between
// saves.
func TestSaveKeepsNoJSON(t *testing.T) {
	live := func() int64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc)
	}
	dir := t.TempDir()
	l := bigState(20000, 20000)
	before := live()
	l.unsaved = true
	if _, err := l.Save(dir, "c1", nil); err != nil {
		t.Fatal(err)
	}
	if kept := live() - before; kept > 256<<10 {
		t.Errorf("after the first save of 20,000 routes and backends the record holds %d bytes more, want a few per chunk", kept)
	}
	runtime.KeepAlive(l)
}

// BenchmarkSaveState is the cost of one save at 10,000 routes and 5,000
// backends after one backend changed (an endpoint change, B1's path):
// encoding that backend's chunk, writing it and the manifest (temp file,
// rename).
func BenchmarkSaveState(b *testing.B) {
	benchmarkSave(b, func(l *LuaState, i int) {
		l.savedBackends.changed(fmt.Sprintf("ns-%d/svc-%d:80", i%50, i%5000), false)
	})
}

// BenchmarkSaveStateWhole is the same with every chunk changed: the first
// save after a start, or after nginx's new boot was read back.
func BenchmarkSaveStateWhole(b *testing.B) {
	benchmarkSave(b, func(l *LuaState, _ int) {
		for _, b := range l.backends {
			l.savedBackends.changed(b.Name, false)
		}
		for r := range l.heldRoutes().All() {
			l.savedRoutes.changed(r.Host, false)
		}
	})
}

// BenchmarkSaveStateSnapshot is what the sync itself pays for a save
// after one backend changed: the snapshot (the chunk is encoded and
// written by the stateWriter, off the sync path).
func BenchmarkSaveStateSnapshot(b *testing.B) {
	l := bigState(10000, 5000)
	l.unsaved = true
	if _, err := l.Save(b.TempDir(), "c1", nil); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		l.savedBackends.changed(fmt.Sprintf("ns-%d/svc-%d:80", i%50, i%5000), false)
		l.unsaved = true
		if s, err := l.snapshot("c1", nil); s == nil || err != nil {
			b.Fatal(s, err)
		}
	}
}

func benchmarkSave(b *testing.B, change func(l *LuaState, i int)) {
	dir := b.TempDir()
	l := bigState(10000, 5000)
	profiles := []render.Profile{{Name: "@restysync_p_0123456789abcdef0123456789abcdef"}}
	if _, err := l.Save(dir, "c1", profiles); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		change(l, i)
		l.unsaved = true
		if _, err := l.Save(dir, "c1", profiles); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	var size int64
	for _, name := range append(readState(b, dir).files(), "../"+StateName) {
		info, _ := os.Stat(filepath.Join(dir, StateChunks, name))
		size += info.Size()
	}
	b.ReportMetric(float64(size), "state-bytes")
}

// The writer writes in the background what the snapshot held when it was
// taken (a later change does not tear it), takes no new write within
// saveInterval of the last, and reports a failed write once.
func TestStateWriterWritesSnapshotsApart(t *testing.T) {
	dir := t.TempDir()
	l := bigState(3, 2)
	l.unsaved = true
	var w stateWriter
	now := time.Now()
	if ready, err := w.ready(now); !ready || err != nil {
		t.Fatalf("a new writer: ready %v, %v", ready, err)
	}
	first, err := l.snapshot("c1", nil)
	if err != nil || first == nil {
		t.Fatalf("snapshot: %v, %v", first, err)
	}
	w.start(dir, first, now)
	l.dropRoute("host-0.apps.example.com") // the sync goes on
	l.unsaved = true
	if err := w.wait(); err != nil {
		t.Fatal(err)
	}
	if got := savedRoutes(t, dir); got != 3 {
		t.Errorf("the file holds %d routes, want the snapshot's 3", got)
	}
	if ready, _ := w.ready(now.Add(saveInterval / 2)); ready {
		t.Error("ready again within saveInterval")
	}
	if ready, _ := w.ready(now.Add(saveInterval)); !ready {
		t.Error("not ready saveInterval after the last write")
	}
	second, _ := l.snapshot("c1", nil)
	if again, _ := l.snapshot("c1", nil); second == nil || again != nil {
		t.Errorf("snapshots %v then %v: want one, then none (nothing changed)", second, again)
	}
	w.start(dir, second, now.Add(saveInterval))
	if err := w.wait(); err != nil || savedRoutes(t, dir) != 2 {
		t.Errorf("second write: %v, %d routes; want 2", err, savedRoutes(t, dir))
	}

	w.start(filepath.Join(dir, "missing"), second, now.Add(2*saveInterval))
	if err := w.wait(); err == nil {
		t.Error("a write into a missing folder did not fail")
	}
	if _, err := w.ready(now.Add(3 * saveInterval)); err != nil {
		t.Errorf("the failure was reported twice: %v", err)
	}
}

func savedRoutes(t *testing.T, dir string) int {
	t.Helper()
	return len(readState(t, dir).Routes)
}

// The saved state follows the record through random upserts and removes
// of backends, routes and certificates, each snapshot written a few
// changes after it was taken (as the writer does, while the sync goes
// on), holding what the record held when it was taken. A chunk that did
// not change is not written again; the folder holds the chunks of the
// last two manifests.
func TestSavedItemsFollowTheRecord(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 37))
	dir := t.TempDir()
	l := NewLuaState(nil, nil)
	var pending *savedState
	var want []string // what pending held when it was taken, sorted
	record := func() []string {
		var out []string
		for _, b := range l.backends {
			data, _ := json.Marshal(luaapi.NewBackendPayload(b))
			out = append(out, string(data))
		}
		for r := range l.heldRoutes().All() {
			data, _ := json.Marshal(luaapi.RoutePayloads([]model.Route{r})[0])
			out = append(out, string(data))
		}
		for name, p := range l.pems {
			data, _ := json.Marshal(luaapi.CertificatePayload{Name: name, Hosts: l.certs[name].Hosts, Cert: p.cert, Key: p.key})
			out = append(out, string(data))
		}
		slices.Sort(out)
		return out
	}
	writes, previous := 0, []string(nil)
	for step := range 4000 {
		n := rng.IntN(2000) // a few chunks
		switch rng.IntN(8) {
		case 0:
			l.holdBackend(model.Backend{Name: fmt.Sprintf("b%d", n), Endpoints: []model.Endpoint{{Address: "10.0.0.1", Port: int32(80 + step)}}})
		case 1:
			l.dropBackend(fmt.Sprintf("b%d", n))
		case 2, 3:
			l.holdRoute(model.Route{Host: fmt.Sprintf("h%d.test", n), Locations: []model.RouteLocation{{Path: fmt.Sprintf("/%d", step), Backend: "b1"}}})
		case 4:
			l.dropRoute(fmt.Sprintf("h%d.test", n))
		case 5:
			name := fmt.Sprintf("ns/c%d", n%50)
			l.holdPEM(name, heldPEM{cert: fmt.Sprint(step)})
		case 6:
			name := fmt.Sprintf("ns/c%d", n%50)
			delete(l.pems, name)
			l.savedCerts.remove(name)
		case 7:
			if pending != nil {
				if err := pending.write(dir); err != nil {
					t.Fatal(err)
				}
				writes++
				got := readState(t, dir)
				slices.Sort(got.items)
				if !slices.Equal(got.items, want) {
					t.Fatalf("step %d: the state holds %d items, the record held %d when the snapshot was taken", step, len(got.items), len(want))
				}
				entries, _ := os.ReadDir(filepath.Join(dir, StateChunks))
				kept := slices.Concat(got.files(), previous)
				for _, e := range entries {
					if !slices.Contains(kept, e.Name()) {
						t.Fatalf("step %d: %s is in the folder, named by neither of the last two manifests", step, e.Name())
					}
				}
				previous = got.files()
			}
			l.unsaved = true
			s, err := l.snapshot("c", nil)
			if err != nil {
				t.Fatal(err)
			}
			pending, want = s, record()
		}
	}
	if writes < 100 {
		t.Fatalf("only %d states written", writes)
	}
}

// A save after an endpoint change copies that backend's chunk, not every
// certificate: the certificates' chunks are written and named already. At
// 10,000 TLS hosts a save (once a second, on the sync loop) encoded every
// certificate's PEM again.
func TestSaveEncodesOnlyChangedCertificates(t *testing.T) {
	l := bigState(10, 10)
	pemText := strings.Repeat("MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n", 40)
	for i := range 2000 {
		name := fmt.Sprintf("ns/tls-%d", i)
		l.certs[name] = plan.HeldCertificate{Hosts: []string{fmt.Sprintf("h%d.test", i)}, Hash: "h"}
		l.holdPEM(name, heldPEM{cert: pemText, key: pemText})
	}
	l.unsaved = true
	dir := t.TempDir()
	if _, err := l.Save(dir, "c1", nil); err != nil {
		t.Fatal(err)
	}
	if s := readState(t, dir); len(s.Certificates) != 2000 {
		t.Fatalf("first save: %d certificates", len(s.Certificates))
	}
	round := 0
	allocs := testing.AllocsPerRun(10, func() {
		round++
		l.holdBackend(model.Backend{Name: "ns-0/svc-0:80", Endpoints: []model.Endpoint{{Address: fmt.Sprintf("10.9.0.%d", round%200), Port: 80}}})
		l.unsaved = true
		s, err := l.snapshot("c1", nil)
		if err != nil || len(s.certs) != 8 || s.certs[0].file == "" {
			t.Fatalf("snapshot: %d certificate chunks, %v", len(s.certs), err)
		}
	})
	if allocs > 30 {
		t.Errorf("a save after one backend changed: %.0f allocations beside 2,000 certificates, want what that backend's chunk costs", allocs)
	}
}

// A change and a take at 50,000 items cost a look at each chunk and a copy
// of the changed one's names, not the items.
func TestSavedItemsChangeAndTakeCostAChunk(t *testing.T) {
	var s savedItems
	for i := range 50000 {
		s.changed(fmt.Sprintf("ns/svc-%d:80", i), true)
	}
	written := func(chunks []*chunkContent) {
		for _, c := range chunks {
			if c.file == "" {
				c.file, c.encode = "written", nil
			}
		}
	}
	encode := func(names []string) func(*bytes.Buffer) ([]byte, error) {
		held := slices.Clone(names)
		return func(buf *bytes.Buffer) ([]byte, error) { return encodeJSON(buf, held) }
	}
	written(s.take(encode))
	round := 0
	allocated := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			round++
			s.changed(fmt.Sprintf("ns/svc-%d:80", round*7919%50000), false)
			chunks := s.take(encode)
			if len(chunks) != 256 {
				b.Fatalf("%d chunks of 50,000 items", len(chunks))
			}
			written(chunks)
		}
	}).AllocedBytesPerOp()
	if allocated > 32<<10 {
		t.Errorf("a change and a take at 50,000 items: %d bytes, want the chunk list and a chunk's names (about 12 KB)", allocated)
	}
}

// The chunks hold each name once, however they come and go.
func TestSavedItemsHoldEachNameOnce(t *testing.T) {
	var s savedItems
	held := map[string]bool{}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		name := fmt.Sprint(rng.IntN(3000))
		if rng.IntN(3) == 0 {
			s.remove(name)
			delete(held, name)
		} else {
			s.changed(name, !held[name])
			held[name] = true
		}
	}
	var names []string
	for _, c := range s.chunks {
		names = append(names, c.names...)
	}
	slices.Sort(names)
	if len(names) != len(held) || len(slices.Compact(names)) != len(held) || s.count != len(held) {
		t.Fatalf("the chunks hold %d names (count %d), the record %d", len(names), s.count, len(held))
	}
	if len(s.chunks)*chunkItems < len(held) || len(s.chunks) > 1 && len(s.chunks)*chunkItems/2 >= len(held) && len(held) > 2*chunkItems {
		t.Errorf("%d chunks for %d names", len(s.chunks), len(held))
	}
}

// A save whose write failed leaves its chunks to the next, which writes
// them then, without copying their items again: the copy of every item at
// 50,000 hosts is 6 MB and 25–50 ms on the sync loop, once a second while
// the writes fail (a full disk).
func TestSnapshotAfterAFailedWriteCopiesOnlyChanges(t *testing.T) {
	dir := t.TempDir()
	l := bigState(20000, 20000)
	l.unsaved = true
	first, err := l.snapshot("c1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.write(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a write into a missing folder did not fail")
	}
	round := 0
	allocated := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			round++
			l.holdBackend(model.Backend{Name: "ns-0/svc-0:80", Endpoints: []model.Endpoint{{Address: "10.9.0.1", Port: int32(round)}}})
			l.unsaved = true
			if _, err := l.snapshot("c1", nil); err != nil {
				b.Fatal(err)
			}
		}
	}).AllocedBytesPerOp()
	if allocated > 64<<10 {
		t.Errorf("a snapshot after one change, its last write failed: %d bytes, want the changed chunk's copy", allocated)
	}
	l.unsaved = true
	if _, err := l.Save(dir, "c1", nil); err != nil {
		t.Fatal(err)
	}
	if s := readState(t, dir); len(s.Routes) != 20000 || len(s.Backends) != 20000 || s.Backends[slices.IndexFunc(s.Backends,
		func(b luaapi.BackendPayload) bool { return b.Name == "ns-0/svc-0:80" })].Endpoints[0].Port != int32(round) {
		t.Errorf("after the failed write: %d routes, %d backends; want all, with the last change", len(s.Routes), len(s.Backends))
	}
}

// A save after one change removes the chunk files the manifest before
// last named and the last two do not, without listing the folder or
// reading the old manifest back: a file it did not write (here a stray
// one) stays. A write that failed midway (a chunk written, not the
// manifest) leaves the last good state loadable, and the next save, or
// the first of another agent (a restart), lists the folder: it removes
// the leftovers and the stray file, and keeps the chunks of the manifest
// it replaced. The manifest is json.Marshal's bytes of what it names.
func TestSaveListsTheFolderOnlyAfterAFailedWrite(t *testing.T) {
	dir := t.TempDir()
	folder := filepath.Join(dir, StateChunks)
	l := bigState(2000, 2000)
	l.unsaved = true
	if _, err := l.Save(dir, "c1", nil); err != nil {
		t.Fatal(err)
	}
	// Two backends of two chunks (the chunks' hash is seeded anew each run).
	changed := []string{"ns-7/svc-7:80"}
	for i := 8; len(changed) < 2; i++ {
		name := fmt.Sprintf("ns-%d/svc-%d:80", i%50, i)
		if l.savedBackends.chunkOf(name) != l.savedBackends.chunkOf(changed[0]) {
			changed = append(changed, name)
		}
	}
	change := func(port int32) {
		t.Helper()
		for _, name := range changed {
			l.holdBackend(model.Backend{Name: name, Endpoints: []model.Endpoint{{Address: "10.9.9.9", Port: port}}})
		}
	}
	// wantFolder checks the folder holds the chunks of the manifest on
	// disk and of prev (the one before it), and nothing else, and that the
	// manifest is what json.Marshal makes of it; it returns the state.
	wantFolder := func(when string, prev []string, extra ...string) savedContent {
		t.Helper()
		s := readState(t, dir)
		data, _ := os.ReadFile(filepath.Join(dir, StateName))
		if again, _ := json.Marshal(s.manifest); string(again) != string(data) {
			t.Errorf("%s: the manifest is\n%s\nwant json.Marshal's\n%s", when, data, again)
		}
		for _, name := range s.files() {
			data, _ := os.ReadFile(filepath.Join(folder, name))
			var items []json.RawMessage
			json.Unmarshal(data, &items)
			sum := sha256.Sum256(data)
			if again, _ := json.Marshal(items); string(again) != string(data) || name != hex.EncodeToString(sum[:16]) {
				t.Errorf("%s: chunk %s is not json.Marshal's bytes of its items, or not named by them", when, name)
			}
		}
		want := slices.Concat(s.files(), prev, extra)
		slices.Sort(want)
		want = slices.Compact(want)
		have := slices.Sorted(maps.Keys(chunkFiles(t, dir)))
		if !slices.Equal(have, want) {
			t.Errorf("%s: the folder holds %d files %v,\nwant %d %v", when, len(have), have, len(want), want)
		}
		return s
	}
	first := wantFolder("first save", nil)
	stray := filepath.Join(folder, "stray")
	if err := os.WriteFile(stray, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	change(1)
	l.unsaved = true
	if _, err := l.Save(dir, "c1", nil); err != nil {
		t.Fatal(err)
	}
	second := wantFolder("a save after a change", first.files(), "stray")
	change(2)
	l.unsaved = true
	if _, err := l.Save(dir, "c1", nil); err != nil {
		t.Fatal(err)
	}
	third := wantFolder("a save after another change: the first manifest's chunks go, the stray file stays (not listed)", second.files(), "stray")

	// The write of two changed chunks fails after the first is written.
	change(3)
	l.unsaved = true
	s, err := l.snapshot("c1", nil)
	if err != nil {
		t.Fatal(err)
	}
	var fresh []*chunkContent
	for _, c := range s.backends {
		if c.file == "" {
			fresh = append(fresh, c)
		}
	}
	if len(fresh) != 2 {
		t.Fatalf("%d chunks to write after two backends changed, want 2 (two chunks)", len(fresh))
	}
	encode := fresh[1].encode
	fresh[1].encode = func(*bytes.Buffer) ([]byte, error) { return nil, fmt.Errorf("disk full") }
	if err := s.write(dir); err == nil {
		t.Fatal("the write did not fail")
	}
	leftover := fresh[0].file
	if leftover == "" {
		t.Fatal("the first chunk was not written before the failure")
	}
	if got := wantFolder("after a failed write", second.files(), "stray", leftover); !reflect.DeepEqual(got.manifest, third.manifest) {
		t.Errorf("after a failed write the manifest is %+v, want the last good one", got.manifest)
	}
	fresh[1].encode = encode
	change(4) // the leftover chunk is no longer current
	l.unsaved = true
	if _, err := l.Save(dir, "c1", nil); err != nil {
		t.Fatal(err)
	}
	fourth := wantFolder("a save after a failed write: listed, the leftover and the stray file go", third.files())
	if slices.Contains(fourth.files(), leftover) {
		t.Errorf("the leftover chunk %s is named by the manifest", leftover)
	}
	if got := savedRoutes(t, dir); got != 2000 {
		t.Errorf("%d routes saved, want 2000", got)
	}

	// Another agent's first save into the folder lists it too.
	if err := os.WriteFile(stray, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	other := bigState(10, 10)
	other.unsaved = true
	if _, err := other.Save(dir, "c1", nil); err != nil {
		t.Fatal(err)
	}
	wantFolder("another agent's first save", fourth.files())
}

// WaitStateWritten (idle) waits for the running write and leaves its
// error for the sync loop to take: the agent's release of memory after its
// first sync waits for the first save, which encodes every item.
func TestStateWriterIdleWaitsAndKeepsTheError(t *testing.T) {
	gate := make(chan struct{})
	s := &savedState{configHash: "c", routes: []*chunkContent{{encode: func(*bytes.Buffer) ([]byte, error) {
		<-gate
		return nil, fmt.Errorf("refused")
	}}}}
	var w stateWriter
	w.start(t.TempDir(), s, time.Now())
	idle := make(chan struct{})
	go func() {
		w.idle()
		close(idle)
	}()
	select {
	case <-idle:
		t.Fatal("idle returned while the write runs")
	case <-time.After(50 * time.Millisecond):
	}
	close(gate)
	<-idle
	if err := w.wait(); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("the write's error after idle: %v, want it kept", err)
	}
}
