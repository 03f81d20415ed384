package file

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/restysync/restysync/agent/internal/model"
)

// TestExamplesLocal reads the manifests of the local demo, which must
// decode cleanly and route demo.localhost to the three demo backends.
func TestExamplesLocal(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "..", "examples", "local")
	s := New(dir)
	s.readAll()
	s.publish()

	snap, problems := s.Snapshot()
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	want := []string{"IngressClass restysync", "Ingress default/demo", "Service default/demo", "EndpointSlice default/demo-1"}
	if got := objectNames(s); !slices.Equal(got, want) {
		t.Fatalf("objects:\n got %q\nwant %q", got, want)
	}

	snap.IngressClass = "restysync"
	// The agent on the file source lets nginx connect to loopback, where
	// the demo's backends listen (run.go parseTargets).
	snap.Targets = model.Targets{Local: true}
	m, buildProblems := model.Build(snap)
	if len(buildProblems) != 0 {
		t.Fatalf("model.Build problems: %v", buildProblems)
	}
	if m.Servers.Len() != 1 || m.Servers.At(0).Host != "demo.localhost" {
		t.Fatalf("servers: %+v", m.Servers)
	}
	wantLocations := []model.Location{
		{Path: "/", PathType: model.PathPrefix, Backend: "default/demo:80", Ingress: "default/demo"},
		{Path: "/healthz", PathType: model.PathExact, Backend: "default/demo:80", Ingress: "default/demo"},
	}
	if got := m.Servers.At(0).Locations; !slices.Equal(got, wantLocations) {
		t.Errorf("locations:\n got %+v\nwant %+v", got, wantLocations)
	}
	wantEndpoints := []model.Endpoint{{Address: "127.0.0.11", Port: 9000}, {Address: "127.0.0.12", Port: 9000}, {Address: "127.0.0.13", Port: 9000}}
	if m.Backends.Len() != 1 || !slices.Equal(m.Backends.At(0).Endpoints, wantEndpoints) {
		t.Errorf("backends: %+v, want default/demo:80 with %v", m.Backends, wantEndpoints)
	}
}
