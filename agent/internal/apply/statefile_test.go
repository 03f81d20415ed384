package apply

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

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
		l.backends[name] = model.Backend{Name: name, Endpoints: []model.Endpoint{
			{Address: fmt.Sprintf("10.1.%d.%d", i/250, i%250), Port: 8080},
			{Address: fmt.Sprintf("10.2.%d.%d", i/250, i%250), Port: 8080},
			{Address: fmt.Sprintf("10.3.%d.%d", i/250, i%250), Port: 8080}}}
	}
	for i := range routes {
		host := fmt.Sprintf("host-%d.apps.example.com", i)
		backend := fmt.Sprintf("ns-%d/svc-%d:80", (i%backends)%50, i%backends)
		l.routes[host] = model.Route{Host: host, Locations: []model.RouteLocation{
			{Path: "/", Backend: backend},
			{Path: "/api", Backend: backend, Profile: "@restysync_p_0123456789abcdef0123456789abcdef", MaxBody: 1 << 20}}}
	}
	return l
}

// The file holds every kind as the POST that would push it, and the
// certificates whose content the agent knows.
func TestSaveWritesWhatLuaHolds(t *testing.T) {
	dir := t.TempDir()
	l := bigState(3, 2)
	l.certs["default/tls"] = plan.HeldCertificate{Hosts: []string{"a.test"}, Hash: "h1"}
	l.pems["default/tls"] = heldPEM{hash: "h1"}
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
		delete(l.encodedBackends, fmt.Sprintf("ns-%d/svc-%d:80", i%50, i%5000))
	})
}

// BenchmarkSaveStateWhole is the same with nothing cached: the first save
// after a start, or after nginx's new boot was read back.
func BenchmarkSaveStateWhole(b *testing.B) {
	benchmarkSave(b, func(l *LuaState, _ int) {
		clear(l.encodedBackends)
		clear(l.encodedRoutes)
	})
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
