package model

import (
	"reflect"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// unlabelled hands out EndpointSlices as a source that drops a slice's
// one label does (source.DropServiceLabel): a copy without labels, its
// Service kept beside it. Each snapshot's SliceServices answers for the
// slices of that snapshot alone, as a source's view does, so a model
// that asked the next snapshot about a slice of the last one would find
// no Service.
type unlabelled struct {
	copies   map[*discoveryv1.EndpointSlice]*discoveryv1.EndpointSlice
	services map[*discoveryv1.EndpointSlice]string
}

func newUnlabelled() *unlabelled {
	return &unlabelled{copies: map[*discoveryv1.EndpointSlice]*discoveryv1.EndpointSlice{}, services: map[*discoveryv1.EndpointSlice]string{}}
}

// snapshot is s with each slice that has one label replaced by its copy
// without (the same copy each time the same slice comes).
func (u *unlabelled) snapshot(s Snapshot) Snapshot {
	held := map[*discoveryv1.EndpointSlice]string{}
	out := make([]*discoveryv1.EndpointSlice, s.EndpointSlices.Len())
	for i, slice := range s.EndpointSlices.Slice() {
		c, ok := u.copies[slice]
		if !ok {
			c = slice.DeepCopy()
			if service := c.Labels[discoveryv1.LabelServiceName]; service != "" && len(c.Labels) == 1 {
				c.Labels = nil
				u.services[c] = service
			}
			u.copies[slice] = c
		}
		out[i] = c
		if service, ok := u.services[c]; ok {
			held[c] = service
		}
	}
	s.EndpointSlices = ListOf(out...)
	s.SliceServices = func(slice *discoveryv1.EndpointSlice) string { return held[slice] }
	return s
}

// A slice whose source dropped its label belongs to the Service the
// snapshot's SliceServices names: Build serves its endpoints, and
// Incremental gives Build's model as the slice changes, moves to another
// Service and is deleted (the Service of a slice that is gone is the one
// the snapshot it came from named).
func TestSliceServicesWithoutLabels(t *testing.T) {
	api := service("default", "api", servicePort("http", 80))
	base := snapshotOf(
		newIngress("default", "web", rule("web.example.com", prefix("/", "web", 80))),
		newIngress("default", "api", rule("api.example.com", prefix("/", "api", 80))))
	base.Services = ListOf(api, webService)
	u := newUnlabelled()
	inc := NewIncremental()
	endpointsOf := func(m Model, name string) []Endpoint {
		for _, b := range m.Backends.Slice() {
			if b.Name == name {
				return b.Endpoints
			}
		}
		return nil
	}
	step := func(what string, list []*discoveryv1.EndpointSlice, wantWeb, wantAPI []Endpoint) {
		t.Helper()
		s := base
		s.EndpointSlices = ListOf(list...)
		s = u.snapshot(s)
		for slice := range s.EndpointSlices.All() {
			if slice.Labels != nil {
				t.Fatalf("%s: slice %s keeps labels %v", what, slice.Name, slice.Labels)
			}
		}
		if path := checkIncremental(t, inc, s, what); what != "first" && !path.Incremental {
			t.Errorf("%s: built whole (%s), want incremental", what, path.Reason)
		}
		m, _ := Build(s)
		if got := endpointsOf(m, "default/web:80"); !sameEndpoints(got, wantWeb) {
			t.Errorf("%s: web's endpoints %v, want %v", what, got, wantWeb)
		}
		if got := endpointsOf(m, "default/api:80"); !sameEndpoints(got, wantAPI) {
			t.Errorf("%s: api's endpoints %v, want %v", what, got, wantAPI)
		}
	}
	step("first", []*discoveryv1.EndpointSlice{webSlice}, webEndpoints, nil)
	changed := webSlice.DeepCopy()
	changed.Endpoints = changed.Endpoints[:1]
	step("the slice changed", []*discoveryv1.EndpointSlice{changed}, []Endpoint{{"10.0.0.2", 8080}}, nil)
	moved := webSlice.DeepCopy()
	moved.Labels = map[string]string{discoveryv1.LabelServiceName: "api"}
	step("the slice moved to api", []*discoveryv1.EndpointSlice{moved}, nil, webEndpoints)
	back := webSlice.DeepCopy()
	step("the slice moved back to web", []*discoveryv1.EndpointSlice{back}, webEndpoints, nil)
	step("the slice deleted", nil, nil, nil)
	step("a slice again", []*discoveryv1.EndpointSlice{webSlice}, webEndpoints, nil)
}

func sameEndpoints(a, b []Endpoint) bool {
	return len(a) == 0 && len(b) == 0 || reflect.DeepEqual(a, b)
}

// A slice is filed under a Service of its own namespace only, whatever
// SliceServices names: a tenant's slice that says "web" gives no
// endpoints to default/web.
func TestSliceServicesStayInTheSlicesNamespace(t *testing.T) {
	s := snapshotOf(newIngress("default", "web", rule("web.example.com", prefix("/", "web", 80))))
	tenant := endpointSlice("tenant", "web-1", "", discoveryv1.AddressTypeIPv4, ports(slicePort("http", 8080)), ready("10.9.9.9"))
	s.Services = ListOf(append(s.Services.Slice(), service("tenant", "web", servicePort("http", 80)))...)
	s.EndpointSlices = ListOf(tenant)
	s.SliceServices = func(*discoveryv1.EndpointSlice) string { return "web" }
	inc := NewIncremental()
	checkIncremental(t, inc, s, "a tenant's slice")
	m, _ := Build(s)
	for _, b := range m.Backends.Slice() {
		if b.Name == "default/web:80" && len(b.Endpoints) != 0 {
			t.Errorf("default/web has the tenant's endpoints %v", b.Endpoints)
		}
	}
	if key, ok := sliceService(s, tenant); !ok || key != (namespacedName{"tenant", "web"}) {
		t.Errorf("the tenant's slice is filed under %v, want tenant/web", key)
	}
	// A slice with labels is read by them, whatever SliceServices says.
	labelled := endpointSlice("default", "web-2", "web", discoveryv1.AddressTypeIPv4, nil)
	s.SliceServices = func(*discoveryv1.EndpointSlice) string { return "other" }
	if got := s.ServiceOfSlice(labelled); got != "web" {
		t.Errorf("a labelled slice's Service %q, want its label's web", got)
	}
}
