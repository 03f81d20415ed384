package syncer

import (
	"fmt"
	"log/slog"
	"reflect"
	"runtime"
	"slices"
	"testing"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/source"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// The first endpoint change after a model build costs what it changes: the
// fast path finds the changed Service's backends by a binary search of the
// model's sorted backends (model.ServiceBackends), not by an index of
// every backend made anew after each build, which at 50,000 Ingresses made
// that sync 7 MB and 10–50 ms (TestEndpointTailAtScale), B6@50k-B1's p99.
// The allocations of that sync do not grow with the backends, and its
// model is the one a full build of the new snapshot gives.
func TestFastPathAfterBuildCostsTheChange(t *testing.T) {
	mallocs := map[int]uint64{}
	for _, n := range []int{500, 5000} {
		src := &indexSource{fakeSource: fakeSource{snap: manyIngressSnapshot(n)}}
		s := New(src, nil, Options{IngressClass: "restysync"}, slog.New(slog.DiscardHandler))
		if _, _, path := s.model(map[source.Kind]bool{source.KindIngress: true}); path != "full" {
			t.Fatalf("first build: path %s", path)
		}
		// Service s7's slice moves to another address.
		slices := slices.Clone(src.snap.EndpointSlices)
		moved := slices[7].DeepCopy()
		moved.Endpoints[0].Addresses = []string{"10.200.0.1"}
		slices[7] = moved
		src.snap.EndpointSlices = slices
		src.changed = []source.ServiceKey{{Namespace: "default", Name: "s7"}}

		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		next, _, path := s.model(map[source.Kind]bool{source.KindEndpointSlice: true})
		runtime.ReadMemStats(&after)
		if path != "fast" {
			t.Fatalf("endpoint change: path %s", path)
		}
		mallocs[n] = after.Mallocs - before.Mallocs
		fresh := New(&indexSource{fakeSource: fakeSource{snap: src.snap}}, nil, Options{IngressClass: "restysync"}, slog.New(slog.DiscardHandler))
		full, _, _ := fresh.model(map[source.Kind]bool{source.KindIngress: true})
		if !reflect.DeepEqual(next.Backends, full.Backends) {
			t.Errorf("%d Ingresses: the fast path's backends differ from a full build's", n)
		}
	}
	t.Logf("allocations of the first fast sync after a build: %v", mallocs)
	if mallocs[5000] > mallocs[500]+50 {
		t.Errorf("the first fast sync after a build allocates %d times at 5,000 Ingresses, %d at 500: it grows with the backends",
			mallocs[5000], mallocs[500])
	}
}

// manyIngressSnapshot is n Ingresses s0…, each with its Service and a
// one-endpoint slice, as oneIngressSnapshot's.
func manyIngressSnapshot(n int) model.Snapshot {
	one := oneIngressSnapshot("10.0.0.1")
	snap := model.Snapshot{IngressClasses: one.IngressClasses}
	for i := range n {
		name := fmt.Sprintf("s%d", i)
		ing := one.Ingresses[0].DeepCopy()
		ing.Name, ing.Spec.Rules[0].Host = name, name+".test"
		ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name = name
		svc := one.Services[0].DeepCopy()
		svc.Name = name
		slice := one.EndpointSlices[0].DeepCopy()
		slice.Name, slice.Labels = name+"-1", map[string]string{discoveryv1.LabelServiceName: name}
		slice.Endpoints[0].Addresses = []string{fmt.Sprintf("10.%d.%d.1", i/256%256, i%256)}
		snap.Ingresses = append(snap.Ingresses, ing)
		snap.Services = append(snap.Services, svc)
		snap.EndpointSlices = append(snap.EndpointSlices, slice)
	}
	return snap
}
