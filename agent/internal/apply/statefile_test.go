package apply

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
	for i := range backends {
		name := fmt.Sprintf("ns-%d/svc-%d:80", i%50, i)
		l.holdBackend(model.Backend{Name: name, Endpoints: []model.Endpoint{
			{Address: fmt.Sprintf("10.1.%d.%d", i/250, i%250), Port: 8080},
			{Address: fmt.Sprintf("10.2.%d.%d", i/250, i%250), Port: 8080},
			{Address: fmt.Sprintf("10.3.%d.%d", i/250, i%250), Port: 8080}}})
	}
	for i := range routes {
		host := fmt.Sprintf("host-%d.apps.example.com", i)
		backend := fmt.Sprintf("ns-%d/svc-%d:80", (i%backends)%50, i%backends)
		l.holdRoute(model.Route{Host: host, Locations: []model.RouteLocation{
			{Path: "/", Backend: backend},
			{Path: "/api", Backend: backend, Profile: "@restysync_p_0123456789abcdef0123456789abcdef", MaxBody: 1 << 20}}})
	}
	return l
}

// The file holds every kind as the POST that would push it, and the
// certificates whose content the agent knows.
func TestSaveWritesWhatLuaHolds(t *testing.T) {
	dir := t.TempDir()
	l := bigState(3, 2)
	l.certs["default/tls"] = plan.HeldCertificate{Hosts: []string{"a.test"}, Hash: "h1"}
	l.holdPEM("default/tls", heldPEM{hash: "h1"})
	l.certs["default/unknown"] = plan.HeldCertificate{Hosts: []string{"b.test"}, Hash: "h2"}
	l.unsaved = true
	profiles := []render.Profile{{Name: "@restysync_p_0123456789abcdef0123456789abcdef"}}
	wrote, err := l.Save(dir, "c1", profiles)
	if err != nil || !wrote {
		t.Fatalf("Save: wrote %v, %v", wrote, err)
	}
	path := filepath.Join(dir, StateName)
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600: it holds private keys", info.Mode().Perm())
	}
	var s struct {
		ConfigHash   string                   `json:"config_hash"`
		Profiles     []string                 `json:"profiles"`
		Certificates luaapi.CertificateUpdate `json:"certificates"`
		Backends     luaapi.BackendUpdate     `json:"backends"`
		Routes       luaapi.RouteUpdate       `json:"routes"`
	}
	data, _ := os.ReadFile(path)
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	if s.ConfigHash != "c1" || len(s.Profiles) != 1 || len(s.Backends.Upserts) != 2 || len(s.Routes.Upserts) != 3 || len(s.Certificates.Upserts) != 1 {
		t.Errorf("saved %s", data)
	}
	if wrote, _ := l.Save(dir, "c1", profiles); wrote {
		t.Error("Save wrote again though nothing changed")
	}
	if wrote, _ := l.Save(dir, "c2", nil); !wrote {
		t.Error("Save did not write for another config")
	}
}

// BenchmarkSaveState is the cost of one save at 10,000 routes and 5,000
// backends after one backend changed (an endpoint change, B1's path):
// encoding that backend, putting the file together from the cached JSON of
// the rest, and the atomic write (temp file, fsync, rename).
func BenchmarkSaveState(b *testing.B) {
	benchmarkSave(b, func(l *LuaState, i int) {
		l.savedBackends.changed(fmt.Sprintf("ns-%d/svc-%d:80", i%50, i%5000))
	})
}

// BenchmarkSaveStateWhole is the same with nothing cached: the first save
// after a start, or after nginx's new boot was read back.
func BenchmarkSaveStateWhole(b *testing.B) {
	benchmarkSave(b, func(l *LuaState, _ int) {
		for name := range l.backends {
			l.savedBackends.changed(name)
		}
		for host := range l.routes {
			l.savedRoutes.changed(host)
		}
	})
}

// BenchmarkSaveStateSnapshot is what the sync itself pays for a save
// after one backend changed: the snapshot (the file is put together and
// written by the stateWriter, off the sync path).
func BenchmarkSaveStateSnapshot(b *testing.B) {
	l := bigState(10000, 5000)
	if _, err := l.snapshot("c1", nil); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		l.savedBackends.changed(fmt.Sprintf("ns-%d/svc-%d:80", i%50, i%5000))
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
	info, _ := os.Stat(filepath.Join(dir, StateName))
	b.ReportMetric(float64(info.Size()), "file-bytes")
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
	var s struct {
		Routes luaapi.RouteUpdate `json:"routes"`
	}
	data, err := os.ReadFile(filepath.Join(dir, StateName))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	return len(s.Routes.Upserts)
}

// The saved state's items follow the record through random upserts and
// removes of backends and routes, and a snapshot a writer holds stays as
// it was taken while the record changes on (savedItems copies a chunk of
// its list before it changes one a save holds).
func TestSavedItemsFollowTheRecord(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 37))
	l := NewLuaState(nil, nil)
	type taken struct {
		state *savedState
		want  []string // its backends and routes as taken, sorted
	}
	var held []taken
	contents := func(s *savedState) []string {
		var out []string
		for _, item := range append(s.backends.all(), s.routes.all()...) {
			out = append(out, string(item))
		}
		slices.Sort(out)
		return out
	}
	for step := range 3000 {
		n := rng.IntN(600) // a few of savedItems' chunks
		switch rng.IntN(5) {
		case 0:
			l.holdBackend(model.Backend{Name: fmt.Sprintf("b%d", n), Endpoints: []model.Endpoint{{Address: "10.0.0.1", Port: int32(80 + step)}}})
		case 1:
			l.dropBackend(fmt.Sprintf("b%d", n))
		case 2:
			l.holdRoute(model.Route{Host: fmt.Sprintf("h%d.test", n), Locations: []model.RouteLocation{{Path: fmt.Sprintf("/%d", step), Backend: "b1"}}})
		case 3:
			l.dropRoute(fmt.Sprintf("h%d.test", n))
		case 4:
			l.unsaved = true
			s, err := l.snapshot("c", nil)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, b := range l.backends {
				data, _ := json.Marshal(luaapi.NewBackendPayload(b))
				want = append(want, string(data))
			}
			for _, r := range l.routes {
				data, _ := json.Marshal(luaapi.RoutePayloads([]model.Route{r})[0])
				want = append(want, string(data))
			}
			slices.Sort(want)
			if got := contents(s); !slices.Equal(got, want) {
				t.Fatalf("step %d: the snapshot holds %d items, the record %d:\n%v\n%v", step, len(got), len(want), got, want)
			}
			held = append(held, taken{s, want})
		}
	}
	for i, h := range held {
		if got := contents(h.state); !slices.Equal(got, h.want) {
			t.Fatalf("snapshot %d changed after it was taken", i)
		}
	}
	if len(held) < 100 {
		t.Fatalf("only %d snapshots taken", len(held))
	}
}

// A save after an endpoint change encodes that backend, not every
// certificate: the certificates' JSON is kept like the backends' and the
// routes' (savedItems). At 10,000 TLS hosts a save (once a second, on
// the sync loop) encoded every certificate's PEM again.
func TestSaveEncodesOnlyChangedCertificates(t *testing.T) {
	l := bigState(10, 10)
	pemText := strings.Repeat("MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n", 40)
	for i := range 2000 {
		name := fmt.Sprintf("ns/tls-%d", i)
		l.certs[name] = plan.HeldCertificate{Hosts: []string{fmt.Sprintf("h%d.test", i)}, Hash: "h"}
		l.holdPEM(name, heldPEM{hash: "h", payload: luaapi.CertificatePayload{Name: name, Hosts: []string{fmt.Sprintf("h%d.test", i)},
			Cert: pemText, Key: pemText}})
	}
	l.unsaved = true
	first, err := l.snapshot("c1", nil)
	if err != nil || first.certs.len() != 2000 {
		t.Fatalf("first snapshot: %d certificates, %v", first.certs.len(), err)
	}
	round := 0
	allocs := testing.AllocsPerRun(10, func() {
		round++
		l.holdBackend(model.Backend{Name: "ns-0/svc-0:80", Endpoints: []model.Endpoint{{Address: fmt.Sprintf("10.9.0.%d", round%200), Port: 80}}})
		l.unsaved = true
		s, err := l.snapshot("c1", nil)
		if err != nil || s.certs.len() != 2000 {
			t.Fatalf("snapshot: %d certificates, %v", s.certs.len(), err)
		}
	})
	if allocs > 100 {
		t.Errorf("a save after one backend changed: %.0f allocations beside 2,000 certificates, want what that backend costs", allocs)
	}
}

// A change after a save copies the chunk it falls in, not the list the
// save holds: at 50,000 backends an endpoint change after each save
// (once a second) copied 1.2 MB.
func TestSavedItemsChangeAfterATakeCopiesAChunk(t *testing.T) {
	var s savedItems
	for i := range 50000 {
		s.changed(fmt.Sprintf("ns/svc-%d:80", i))
	}
	payload := func(name string) any { return name }
	if _, err := s.take(payload); err != nil {
		t.Fatal(err)
	}
	round := 0
	allocated := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			round++
			s.changed(fmt.Sprintf("ns/svc-%d:80", round*7919%50000))
			if _, err := s.take(payload); err != nil {
				b.Fatal(err)
			}
		}
	}).AllocedBytesPerOp()
	if allocated > 32<<10 {
		t.Errorf("a change and a take at 50,000 items: %d bytes, want a chunk's copy (about 10 KB)", allocated)
	}
}

// A save lets go of its list of changed items: after the first save of
// many items the next changes (a few) do not keep room for all of them.
func TestSavedItemsTakeLetsGoOfTheStaleList(t *testing.T) {
	var s savedItems
	for i := range 10000 {
		s.changed(fmt.Sprintf("b%d", i))
	}
	if _, err := s.take(func(name string) any { return name }); err != nil {
		t.Fatal(err)
	}
	s.changed("b1")
	if c := cap(s.stale); c > 16 {
		t.Fatalf("after a save of 10,000 items and one change, the stale list holds room for %d", c)
	}
}
