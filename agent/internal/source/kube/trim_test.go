package kube

import (
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/source"
)

// trim drops nothing a stage reads: over API-server-shaped objects
// (apiServerApp) and the kinds of Service the model reads more of
// (service-upstream reads a clusterIP, ExternalName its name, a named
// target port), the model and problems built over the trimmed objects
// equal those over the objects as listed; an Ingress (what events and
// the status writer read) and the status writer's Gateway Services and
// slices come out equal; what the status publisher reads of a Service
// (clusterIP, status) is kept.
func TestTrimKeepsWhatIsRead(t *testing.T) {
	var objs []kruntime.Object
	for i := range 6 {
		app := apiServerApp(fmt.Sprintf("app-%d", i), i)
		ing, svc, slice := app[0].(*networkingv1.Ingress), app[1].(*corev1.Service), app[2].(*discoveryv1.EndpointSlice)
		switch i {
		case 1: // service-upstream: the clusterIP is the one endpoint
			ing.Annotations = map[string]string{"nginx.ingress.kubernetes.io/service-upstream": "true"}
			svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "10.96.0.10", []string{"10.96.0.10"}
			svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}}
		case 2:
			svc.Spec.Type, svc.Spec.ExternalName = corev1.ServiceTypeExternalName, "backend.example.org"
			svc.Spec.ClusterIP, svc.Spec.ClusterIPs, svc.Spec.IPFamilies, svc.Spec.IPFamilyPolicy = "", nil, nil, nil
		case 3: // a named target port, an endpoint not ready
			svc.Spec.Ports[0].TargetPort = intstr.FromString("http")
			no := false
			slice.Endpoints[1].Conditions.Ready = &no
		case 4:
			ing.Annotations = map[string]string{"nginx.ingress.kubernetes.io/proxy-body-size": "8m"}
			ing.Labels = map[string]string{"team": "a"}
		case 5: // a chart's Service
			svc.Labels = map[string]string{"app.kubernetes.io/name": "app", "app.kubernetes.io/instance": "app-5", "helm.sh/chart": "app-1.0.0"}
			svc.Annotations = map[string]string{"meta.helm.sh/release-name": "app-5", "meta.helm.sh/release-namespace": "default"}
		}
		objs = append(objs, app...)
	}
	full := snapshotOf(objs)
	services := source.NewSliceServicesEdit(source.SliceServices{})
	trimmed := snapshotOf(mapObjects(objs, func(obj kruntime.Object) kruntime.Object {
		obj = obj.DeepCopyObject()
		if _, err := trim(obj); err != nil {
			t.Fatal(err)
		}
		// As transformSlice does.
		if slice, ok := obj.(*discoveryv1.EndpointSlice); ok {
			if service, dropped := dropSliceLabels(slice); dropped {
				services.Set(slice, service)
			}
		}
		return obj
	}))
	trimmed.SliceServices = services.Done().Of
	for svc := range trimmed.Services.All() {
		if svc.Object != nil {
			t.Fatalf("the cache keeps Service %s whole: %+v", svc.Name, svc.Object)
		}
	}
	if slice := trimmed.EndpointSlices.At(0); slice.Annotations != nil || slice.OwnerReferences != nil || slice.Labels != nil {
		t.Fatalf("trim kept a slice's annotations, owners or labels: %+v", slice.ObjectMeta)
	}
	// Stripped alike (managedFields, pods): what trim alone drops differs.
	for _, snap := range []*model.Snapshot{&full} {
		*snap = snapshotOf(mapObjects(objs, func(obj kruntime.Object) kruntime.Object {
			obj = obj.DeepCopyObject()
			source.Strip(obj)
			return obj
		}))
	}
	wantModel, wantProblems := model.Build(full)
	if wantModel.Servers.Len() != 6 || wantModel.Backends.Len() < 5 {
		t.Fatalf("built %d servers, %d backends: want the 6 Ingresses served with their backends", wantModel.Servers.Len(), wantModel.Backends.Len())
	}
	gotModel, gotProblems := model.Build(trimmed)
	if !reflect.DeepEqual(gotModel, wantModel) {
		t.Errorf("the model built over trimmed objects differs from the one over the objects as listed:\n%+v\nwant\n%+v", gotModel.Backends, wantModel.Backends)
	}
	if !reflect.DeepEqual(gotProblems, wantProblems) {
		t.Errorf("problems over trimmed objects:\n%v\nwant\n%v", gotProblems, wantProblems)
	}
	for i := range full.Ingresses.Len() {
		if got, want := trimmed.Ingresses.At(i), full.Ingresses.At(i); !reflect.DeepEqual(got, want) {
			t.Errorf("trim changed an Ingress:\n%+v\nwant\n%+v", got, want)
		}
	}
	for i := range full.Services.Len() {
		if got, want := trimmed.Services.At(i), full.Services.At(i); !reflect.DeepEqual(got, want) {
			t.Errorf("trim changed what is read of Service %s: %+v, want %+v", got.Name, got, want)
		}
	}
}

// The status writer's Gateway Services and their slices are kept whole,
// labels included: it updates them from the cached object, and lists
// them by label.
func TestTrimKeepsGatewayObjects(t *testing.T) {
	app := apiServerApp("gw", 0)
	labelled := app[1].(*corev1.Service)
	labelled.Labels = map[string]string{model.GatewayServiceManagedByLabel: model.GatewayServiceManagedBy}
	owned := app[2].(*discoveryv1.EndpointSlice)
	yes := true
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "gateway.networking.k8s.io/v1", Kind: "Gateway", Name: "gw", UID: "g-1", Controller: &yes}}
	ownedSlice := owned.DeepCopy()
	labelledSlice := owned.DeepCopy()
	labelledSlice.OwnerReferences = nil
	labelledSlice.Labels[model.GatewayServiceManagedByLabel] = model.GatewayServiceManagedBy
	for _, obj := range []kruntime.Object{labelled, ownedSlice, labelledSlice} {
		want := obj.DeepCopyObject()
		source.Strip(want)
		if _, err := trim(obj); err != nil {
			t.Fatal(err)
		}
		if slice, ok := obj.(*discoveryv1.EndpointSlice); ok {
			if _, dropped := dropSliceLabels(slice); dropped {
				t.Errorf("dropSliceLabels dropped the labels of a Gateway Service's slice %+v", slice.ObjectMeta)
			}
		}
		if !reflect.DeepEqual(obj, want) {
			t.Errorf("trim changed a Gateway Service's object:\n%+v\nwant\n%+v", obj, want)
		}
	}
}

// Interning changes no map: the keys and values stay equal.
func TestInternMap(t *testing.T) {
	m := map[string]string{"a": "1", "kubernetes.io/service-name": "web"}
	internMap(m)
	if !reflect.DeepEqual(m, map[string]string{"a": "1", "kubernetes.io/service-name": "web"}) {
		t.Errorf("internMap = %v", m)
	}
	internMap(nil)
}

func mapObjects(objs []kruntime.Object, f func(kruntime.Object) kruntime.Object) []kruntime.Object {
	out := make([]kruntime.Object, len(objs))
	for i, obj := range objs {
		out[i] = f(obj)
	}
	return out
}

// snapshotOf is a Snapshot of objs, serving every Ingress of class
// restysync.
func snapshotOf(objs []kruntime.Object) model.Snapshot {
	var ingresses []*networkingv1.Ingress
	var services []*model.Service
	var slices []*discoveryv1.EndpointSlice
	for _, obj := range objs {
		switch o := obj.(type) {
		case *networkingv1.Ingress:
			ingresses = append(ingresses, o)
		case *corev1.Service:
			// What the cache holds of it (transformService).
			services = append(services, model.ServiceOf(o))
		case *discoveryv1.EndpointSlice:
			slices = append(slices, o)
		}
	}
	class := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "restysync"},
		Spec: networkingv1.IngressClassSpec{Controller: model.ControllerName}}
	return model.Snapshot{Ingresses: source.SortedList(ingresses), Services: source.SortedList(services),
		EndpointSlices: source.SortedList(slices), IngressClasses: model.ListOf(class), IngressClass: "restysync"}
}

// Two slices and two Ingresses trimmed apart point at the same values of
// their conditions, ports, class and path types, and keep what they said:
// a condition false stays false.
func TestTrimSharesPointers(t *testing.T) {
	var slices [2]*discoveryv1.EndpointSlice
	var ingresses [2]*networkingv1.Ingress
	for i := range 2 {
		app := apiServerApp(fmt.Sprintf("app-%d", i), i)
		for _, obj := range app {
			if _, err := trim(obj); err != nil {
				t.Fatal(err)
			}
		}
		ingresses[i], slices[i] = app[0].(*networkingv1.Ingress), app[2].(*discoveryv1.EndpointSlice)
	}
	a, b := slices[0], slices[1]
	ca, cb := a.Endpoints[0].Conditions, b.Endpoints[1].Conditions
	if ca.Ready != cb.Ready || ca.Serving != cb.Serving || ca.Terminating != cb.Terminating {
		t.Errorf("the slices' conditions are not shared")
	}
	if !*ca.Ready || !*ca.Serving || *ca.Terminating {
		t.Errorf("conditions ready %v, serving %v, terminating %v; want true, true, false", *ca.Ready, *ca.Serving, *ca.Terminating)
	}
	pa, pb := a.Ports[0], b.Ports[0]
	if pa.Name != pb.Name || pa.Protocol != pb.Protocol || pa.Port != pb.Port {
		t.Errorf("the slices' ports are not shared")
	}
	if *pa.Name != "http" || *pa.Protocol != "TCP" || *pa.Port != 8080 {
		t.Errorf("port %q %q %d, want http TCP 8080", *pa.Name, *pa.Protocol, *pa.Port)
	}
	ia, ib := ingresses[0], ingresses[1]
	if ia.Spec.IngressClassName != ib.Spec.IngressClassName || ia.Spec.Rules[0].HTTP.Paths[0].PathType != ib.Spec.Rules[0].HTTP.Paths[0].PathType {
		t.Errorf("the Ingresses' class and path type are not shared")
	}
	if *ia.Spec.IngressClassName != "restysync" || *ia.Spec.Rules[0].HTTP.Paths[0].PathType != networkingv1.PathTypePrefix {
		t.Errorf("class %q, path type %q", *ia.Spec.IngressClassName, *ia.Spec.Rules[0].HTTP.Paths[0].PathType)
	}
}
