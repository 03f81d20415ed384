package file

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/source"
)

// A save that changes only an EndpointSlice reports that slice alone, by
// name, and its Service to TakeChangedServices; ServiceEndpoints then
// serves the new slice: the syncer's fast path (path=fast).
func TestEndpointSliceChangeTakesTheFastPath(t *testing.T) {
	dir := t.TempDir()
	sliceFile := filepath.Join(dir, "slices.yaml")
	writeFile(t, filepath.Join(dir, "app.yaml"), serviceYAML("web", 80)+"---\n"+ingressYAML("web", "web"))
	writeFile(t, sliceFile, endpointSliceYAML("web-1", "web"))
	s, rec := startSource(t, dir)
	if got := s.TakeChangedServices(); len(got) != 0 {
		t.Errorf("after the first listing: changed Services %v, want none", got)
	}

	writeAtomic(t, sliceFile, strings.Replace(endpointSliceYAML("web-1", "web"), "10.0.0.1", "10.0.0.2", 1))
	waitChange(t, s, rec, source.KindEndpointSlice, "the new address", func(snap model.Snapshot, _ []model.Problem) bool {
		return len(snap.EndpointSlices) == 1 && snap.EndpointSlices[0].Endpoints[0].Addresses[0] == "10.0.0.2"
	})
	if got := s.TakeChangedServices(); !slices.Equal(got, []source.ServiceKey{{Namespace: "default", Name: "web"}}) {
		t.Errorf("changed Services %v, want default/web", got)
	}
	svc, found := s.ServiceEndpoints("default", "web")
	if svc == nil || len(found) != 1 || found[0].Endpoints[0].Addresses[0] != "10.0.0.2" {
		t.Errorf("ServiceEndpoints(default, web) = %v, %v; want the Service and the new slice", svc, found)
	}
	if svc, found := s.ServiceEndpoints("default", "none"); svc != nil || found != nil {
		t.Errorf("ServiceEndpoints of no Service = %v, %v; want nothing", svc, found)
	}
}

// publish names each object that changed, in kind order.
func TestPublishNamesChangedObjects(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), serviceYAML("web", 80))
	s := New(dir)
	s.readAll()
	s.publish()
	writeFile(t, filepath.Join(dir, "a.yaml"), serviceYAML("web", 81)+"---\n"+ingressYAML("web", "web")+"---\n"+endpointSliceYAML("web-1", "web"))
	s.readAll()
	changed, _ := s.publish()
	var got []string
	for _, c := range changed {
		got = append(got, c.String())
	}
	want := []string{"Ingress default/web", "Service default/web", "EndpointSlice default/web-1"}
	if !slices.Equal(got, want) {
		t.Errorf("changed %q, want %q", got, want)
	}
}
