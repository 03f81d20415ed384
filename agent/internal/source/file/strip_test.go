package file

import (
	"cmp"
	"encoding/json"
	"os"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/source"
	"github.com/restysync/restysync/agent/internal/testenv/corpus"
)

// The objects read are stripped of what restysync never reads
// (source.Strip), and what it drops is never read: over the migration
// corpus, with managedFields, kubectl's last-applied-configuration and an
// endpoint's pod, node and zone added to every object, the model built
// over the objects stripped equals the one built over them as they are.
// Stripping a field the model reads (an annotation, a spec field the
// corpus sets) makes the two differ.
func TestStripKeepsWhatTheModelReads(t *testing.T) {
	dir := corpus.Dir()
	if dir == "" {
		const msg = "no shared/migration-corpus beside the repository (set RESTYSYNC_MIGRATION_CORPUS)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + " (CI=true)")
		}
		t.Skip(msg)
	}
	strip = func(any) {}
	defer func() { strip = source.Strip }()
	s := New(dir)
	s.readAll()
	s.publish()
	asRead, _ := s.Snapshot()
	if asRead.Ingresses.Len() == 0 {
		t.Fatal("the corpus gave no Ingress")
	}
	// Every Ingress is served (the corpus names ingress-nginx's classes).
	for ing := range asRead.Ingresses.All() {
		ing.Spec.IngressClassName = nil
		delete(ing.Annotations, "kubernetes.io/ingress.class")
	}
	asRead.WatchWithoutClass = true
	addBackends(&asRead)

	full := mapObjects(asRead, func(obj runtime.Object) runtime.Object {
		obj = obj.DeepCopyObject()
		addUnread(t, obj)
		return obj
	})
	stripped := mapObjects(full, func(obj runtime.Object) runtime.Object {
		obj = obj.DeepCopyObject()
		source.Strip(obj)
		return obj
	})
	if stripped.Ingresses.At(0).ManagedFields != nil || stripped.Ingresses.At(0).Annotations[source.LastAppliedAnnotation] != "" {
		t.Fatalf("Strip kept managedFields or last-applied: %+v", stripped.Ingresses.At(0).ObjectMeta)
	}
	wantModel, wantProblems := model.Build(full)
	endpoints := 0
	for _, b := range wantModel.Backends.Slice() {
		endpoints += len(b.Endpoints)
	}
	if wantModel.Servers.Len() < 50 || endpoints == 0 {
		t.Fatalf("the corpus built %d servers and %d endpoints, want the Ingresses served with their backends", wantModel.Servers.Len(), endpoints)
	}
	t.Logf("the corpus: %d Ingresses, %d servers, %d backends, %d endpoints, %d problems",
		full.Ingresses.Len(), wantModel.Servers.Len(), wantModel.Backends.Len(), endpoints, len(wantProblems))
	gotModel, gotProblems := model.Build(stripped)
	if !reflect.DeepEqual(gotModel, wantModel) {
		t.Errorf("the model built over stripped objects differs from the one over the objects as read")
	}
	if !reflect.DeepEqual(gotProblems, wantProblems) {
		t.Errorf("problems over stripped objects:\n%v\nwant\n%v", gotProblems, wantProblems)
	}

	// The file source strips what it decodes.
	one := t.TempDir()
	writeFile(t, one+"/ingress.yaml", `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: "{}"
    nginx.ingress.kubernetes.io/ssl-redirect: "false"
  managedFields:
  - manager: kubectl
    operation: Apply
spec:
  defaultBackend:
    service: {name: web, port: {number: 80}}
`)
	strip = source.Strip
	s = New(one)
	s.readAll()
	s.publish()
	snap, problems := s.Snapshot()
	if snap.Ingresses.Len() != 1 || len(problems) != 0 {
		t.Fatalf("read %d Ingresses, problems %v", snap.Ingresses.Len(), problems)
	}
	if ing := snap.Ingresses.At(0); ing.ManagedFields != nil || len(ing.Annotations) != 1 {
		t.Errorf("the file source kept %+v, want no managedFields and only the ssl-redirect annotation", ing.ObjectMeta)
	}
}

// addBackends adds to snap a Service and an EndpointSlice (one endpoint
// ready, one not) for each Service its Ingresses name, which the corpus
// does not hold.
func addBackends(snap *model.Snapshot) {
	seen := map[string]bool{}
	add := func(namespace, name, portName string, portNumber int32) {
		if name == "" || seen[namespace+"/"+name] {
			return
		}
		seen[namespace+"/"+name] = true
		port := corev1.ServicePort{Name: cmp.Or(portName, "http"), Port: cmp.Or(portNumber, 80),
			TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}
		snap.Services = model.ListOf(append(snap.Services.Slice(), model.ServiceOf(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10", Ports: []corev1.ServicePort{port}}}))...)
		ready, notReady := true, false
		snap.EndpointSlices = model.ListOf(append(snap.EndpointSlices.Slice(), &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: namespace, Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: &port.Name, Port: ptr.To[int32](8080), Protocol: &port.Protocol}},
			Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{"10.1.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}},
				{Addresses: []string{"10.1.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: &notReady}},
			}})...)
	}
	for ing := range snap.Ingresses.All() {
		if b := ing.Spec.DefaultBackend; b != nil && b.Service != nil {
			add(ing.Namespace, b.Service.Name, b.Service.Port.Name, b.Service.Port.Number)
		}
		for _, rule := range ing.Spec.Rules {
			if rule.HTTP == nil {
				continue
			}
			for _, p := range rule.HTTP.Paths {
				if b := p.Backend.Service; b != nil {
					add(ing.Namespace, b.Name, b.Port.Name, b.Port.Number)
				}
			}
		}
	}
	source.SortNamed(snap.Services.Slice())
	source.SortNamed(snap.EndpointSlices.Slice())
}

// addUnread gives obj what restysync never reads: managedFields, kubectl's
// last-applied-configuration (the object as JSON), and for an
// EndpointSlice each endpoint's pod, node and zone.
func addUnread(t *testing.T, obj runtime.Object) {
	t.Helper()
	meta := obj.(metav1.Object)
	applied, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	meta.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply,
		FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}}})
	annotations := map[string]string{source.LastAppliedAnnotation: string(applied)}
	for k, v := range meta.GetAnnotations() {
		annotations[k] = v
	}
	meta.SetAnnotations(annotations)
	if slice, ok := obj.(*discoveryv1.EndpointSlice); ok {
		node, zone := "node-1", "zone-a"
		for i := range slice.Endpoints {
			slice.Endpoints[i].NodeName, slice.Endpoints[i].Zone = &node, &zone
		}
	}
}

// mapObjects returns snap with f applied to each of its objects (not its
// Services: a model.Service holds nothing restysync does not read).
func mapObjects(snap model.Snapshot, f func(runtime.Object) runtime.Object) model.Snapshot {
	mapList(&snap.Ingresses, f)
	mapList(&snap.IngressClasses, f)
	mapList(&snap.EndpointSlices, f)
	mapList(&snap.Secrets, f)
	mapList(&snap.ConfigMaps, f)
	mapList(&snap.GatewayClasses, f)
	mapList(&snap.Gateways, f)
	mapList(&snap.HTTPRoutes, f)
	mapList(&snap.GRPCRoutes, f)
	mapList(&snap.TLSRoutes, f)
	mapList(&snap.ReferenceGrants, f)
	mapList(&snap.ListenerSets, f)
	mapList(&snap.BackendTLSPolicies, f)
	mapList(&snap.Namespaces, f)
	return snap
}

// mapList sets *list to a new list of f of each of its objects.
func mapList[T runtime.Object](list *model.List[T], f func(runtime.Object) runtime.Object) {
	items := list.Slice()
	for i, o := range items {
		items[i] = f(o).(T)
	}
	*list = model.ListOf(items...)
}
