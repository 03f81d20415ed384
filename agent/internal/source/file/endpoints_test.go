package file

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"

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
		return snap.EndpointSlices.Len() == 1 && snap.EndpointSlices.At(0).Endpoints[0].Addresses[0] == "10.0.0.2"
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

// An EndpointSlice whose one label names its Service is held without
// its labels, the name kept beside it: the snapshot's SliceServices and
// the fast path's index give its Service. A slice with other labels
// keeps them all. A slice moved to another Service (nothing else of it
// changed) is a new object of the new Service, and the snapshot before
// still says the old one; a slice deleted is forgotten.
func TestEndpointSliceHeldWithoutItsLabel(t *testing.T) {
	dir := t.TempDir()
	sliceFile := filepath.Join(dir, "slices.yaml")
	labelled := strings.Replace(endpointSliceYAML("api-1", "api"), "  labels:\n", "  labels:\n    team: a\n", 1)
	writeFile(t, filepath.Join(dir, "app.yaml"), serviceYAML("web", 80)+"---\n"+serviceYAML("api", 80))
	writeFile(t, sliceFile, endpointSliceYAML("web-1", "web")+"---\n"+labelled)
	s := New(dir)
	s.readAll()
	s.publish()
	s.TakeChangedServices()
	sliceOf := func(snap model.Snapshot, name string) *discoveryv1.EndpointSlice {
		for slice := range snap.EndpointSlices.All() {
			if slice.Name == name {
				return slice
			}
		}
		return nil
	}
	first, _ := s.Snapshot()
	web1, api1 := sliceOf(first, "web-1"), sliceOf(first, "api-1")
	if web1 == nil || web1.Labels != nil || first.ServiceOfSlice(web1) != "web" {
		t.Fatalf("web-1 held with labels %v, of Service %q; want none, web", web1.Labels, first.ServiceOfSlice(web1))
	}
	if want := map[string]string{discoveryv1.LabelServiceName: "api", "team": "a"}; !maps.Equal(api1.Labels, want) {
		t.Errorf("api-1 held with labels %v, want %v", api1.Labels, want)
	}
	if _, found := s.ServiceEndpoints("default", "web"); !slices.Equal(found, []*discoveryv1.EndpointSlice{web1}) {
		t.Errorf("ServiceEndpoints(web) = %v, want web-1", found)
	}
	if n := s.view.sliceServices.Len(); n != 1 {
		t.Errorf("the view names the Service of %d slices, want 1 (web-1)", n)
	}

	// web-1 moves to api: the same bytes but for the label.
	writeFile(t, sliceFile, endpointSliceYAML("web-1", "api")+"---\n"+labelled)
	s.readFile(sliceFile)
	s.publish()
	moved, _ := s.Snapshot()
	web1moved := sliceOf(moved, "web-1")
	if web1moved == web1 || moved.ServiceOfSlice(web1moved) != "api" {
		t.Errorf("moved: web-1 the same object %v, of Service %q; want a new one of api", web1moved == web1, moved.ServiceOfSlice(web1moved))
	}
	if first.ServiceOfSlice(web1) != "web" {
		t.Errorf("the snapshot before the move says web-1 is of %q, want web", first.ServiceOfSlice(web1))
	}
	if _, found := s.ServiceEndpoints("default", "web"); len(found) != 0 {
		t.Errorf("moved: ServiceEndpoints(web) = %v, want none", found)
	}
	if _, found := s.ServiceEndpoints("default", "api"); len(found) != 2 || !slices.Contains(found, web1moved) {
		t.Errorf("moved: ServiceEndpoints(api) = %v, want api-1 and web-1", found)
	}
	if got := s.TakeChangedServices(); !sameServices(got, "api", "web") {
		t.Errorf("moved: changed Services %v, want api and web", got)
	}

	// web-1 deleted (patched in place: one object removed).
	writeFile(t, sliceFile, labelled)
	s.readFile(sliceFile)
	s.publish()
	deleted, _ := s.Snapshot()
	if sliceOf(deleted, "web-1") != nil || deleted.ServiceOfSlice(web1moved) != "" {
		t.Errorf("deleted: web-1 still served, or still named (%q)", deleted.ServiceOfSlice(web1moved))
	}
	if n := s.view.sliceServices.Len(); n != 0 {
		t.Errorf("deleted: the view names the Service of %d slices, want none", n)
	}
	if _, found := s.ServiceEndpoints("default", "api"); !slices.Equal(found, []*discoveryv1.EndpointSlice{api1}) {
		t.Errorf("deleted: ServiceEndpoints(api) = %v, want api-1", found)
	}
	if got := s.TakeChangedServices(); !sameServices(got, "api") {
		t.Errorf("deleted: changed Services %v, want api", got)
	}

	// A new slice, the first of its Service (patched in place too).
	writeFile(t, sliceFile, labelled+"---\n"+endpointSliceYAML("web-2", "web"))
	s.readFile(sliceFile)
	s.publish()
	added, _ := s.Snapshot()
	if web2 := sliceOf(added, "web-2"); web2 == nil || web2.Labels != nil || added.ServiceOfSlice(web2) != "web" {
		t.Errorf("added: web-2 %v, of Service %q; want held without labels, of web", web2, added.ServiceOfSlice(web2))
	}
	if _, found := s.ServiceEndpoints("default", "web"); len(found) != 1 || found[0].Name != "web-2" {
		t.Errorf("added: ServiceEndpoints(web) = %v, want web-2", found)
	}
}

func sameServices(got []source.ServiceKey, names ...string) bool {
	var want []source.ServiceKey
	for _, name := range names {
		want = append(want, source.ServiceKey{Namespace: "default", Name: name})
	}
	slices.SortFunc(got, func(a, b source.ServiceKey) int { return strings.Compare(a.Name, b.Name) })
	return slices.Equal(got, want)
}
