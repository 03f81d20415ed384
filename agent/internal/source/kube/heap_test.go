package kube

import (
	"context"
	"flag"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/restysync/restysync/agent/internal/kubeclient/kubeclienttest"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/source"
)

var (
	heapN       = flag.Int("kube.heap.n", 1000, "TestSourceHeap: Ingresses (each with a Service and an EndpointSlice); 50000 for the scale")
	heapProfile = flag.String("kube.heap.profile", "", "TestSourceHeap: write a heap profile there once the source has started")
	heapChart   = flag.Bool("kube.heap.chart", false, "TestSourceHeap: each Service has a chart's labels and annotations (3 and 2, values of its own app)")
	heapStatus  = flag.Bool("kube.heap.status", false, "TestSourceHeap: each Ingress has the status the status writer gives it (one IP)")
	heapModel   = flag.String("kube.heap.model", "", `TestSourceHeap: also build the model of the Snapshot and report its heap: "index" as the syncer does, "noindex" with the Snapshot's SlicesOf cleared (the model then makes its own index of slices)`)
)

// TestSourceHeap reports the heap the kube source holds for n served
// Ingresses, each with a Service and an EndpointSlice shaped as the API
// server serves them (apiServerApp), once it has started
// and served a Snapshot (informer caches, indexes and views; the objects
// included, the fake clientset's own copies not): go test -run
// TestSourceHeap -kube.heap.n 50000 ./agent/internal/source/kube -v
func TestSourceHeap(t *testing.T) {
	n := *heapN
	if n < 1 {
		t.Fatalf("-kube.heap.n %d: want at least one Ingress", n)
	}
	objs := make([]kruntime.Object, 0, 3*n+1)
	objs = append(objs, &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "restysync"},
		Spec: networkingv1.IngressClassSpec{Controller: model.ControllerName}})
	for i := range n {
		app := apiServerApp(fmt.Sprintf("app-%06d", i), i)
		if *heapChart {
			svc := app[1].(*corev1.Service)
			svc.Labels = map[string]string{"app.kubernetes.io/name": svc.Name, "app.kubernetes.io/instance": svc.Name + "-prod", "helm.sh/chart": "app-1.0.0"}
			svc.Annotations = map[string]string{"meta.helm.sh/release-name": svc.Name + "-prod", "meta.helm.sh/release-namespace": "default"}
		}
		if *heapStatus {
			ing := app[0].(*networkingv1.Ingress)
			ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.10"}}
		}
		objs = append(objs, app...)
	}
	client := fake.NewClientset(objs...)
	objs = nil
	// As from the API server: each listed object decoded from protobuf,
	// every string its own, none shared with the fake's copies.
	client.PrependReactor("list", "*", func(action k8stesting.Action) (bool, kruntime.Object, error) {
		list := action.(k8stesting.ListActionImpl)
		obj, err := client.Tracker().List(list.GetResource(), list.Kind, list.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		return true, protobufCopy(t, obj), nil
	})
	before, inuseBefore := heapAlloc(), heapInuse()
	src := New(kubeclienttest.Wrap(client), Options{IngressClass: "restysync"})
	// Not startSource: its 10 s bound is short for 150,000 objects on a
	// loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer func() { cancel(); <-src.Done() }()
	if err := src.Start(ctx, func(source.Change) {}); err != nil {
		t.Fatal(err)
	}
	snap, _ := src.Snapshot()
	src.TakeChangedServices() // as the syncer does after its first build
	after, inuseAfter := heapAlloc(), heapInuse()
	if snap.Ingresses.Len() != n {
		t.Fatalf("the snapshot holds %d Ingresses, want %d", snap.Ingresses.Len(), n)
	}
	t.Logf("kube source at %d Ingresses: heap %.1f MB, spans in use %.1f MB (%d Ingresses in the snapshot)",
		n, float64(after-before)/1e6, (float64(inuseAfter)-float64(inuseBefore))/1e6, snap.Ingresses.Len())
	if *heapModel != "" {
		if *heapModel == "noindex" {
			snap.SlicesOf = nil
		}
		snap.IngressClass = "restysync"
		inc := model.NewIncremental()
		m, _, _ := inc.Build(snap)
		built := heapAlloc()
		t.Logf("the model of it (%s): heap %.2f MB (%d servers)", *heapModel, (float64(built)-float64(after))/1e6, m.Servers.Len())
		runtime.KeepAlive(inc)
		runtime.KeepAlive(m)
	}
	if *heapProfile != "" {
		f, err := os.Create(*heapProfile)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := pprof.WriteHeapProfile(f); err != nil {
			t.Fatal(err)
		}
	}
	runtime.KeepAlive(src)
	runtime.KeepAlive(client)
}

// apiServerApp is benchApp's objects as a kube-apiserver serves them:
// with a uid, a resourceVersion, a creation time and managedFields; the
// Service headless with what the API server defaults (clusterIPs,
// ipFamilies, policies, the ports' protocol); the EndpointSlice as the
// EndpointSlice controller writes it (owner reference, managed-by label,
// trigger-time annotation, two endpoints with conditions, pod and node,
// a named port). i makes the uids and resourceVersions.
func apiServerApp(name string, i int) []kruntime.Object {
	objs := benchApp(name)
	created := metav1.NewTime(time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC))
	meta := func(m *metav1.ObjectMeta, kind int) {
		m.UID = types.UID(fmt.Sprintf("%08x-0000-4000-8000-%012x", kind, i))
		m.ResourceVersion = strconv.Itoa(1000 + 3*i + kind)
		m.CreationTimestamp, m.Generation = created, 1
		m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply,
			APIVersion: "v1", Time: &created, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}}}
	}
	ing := objs[0].(*networkingv1.Ingress)
	meta(&ing.ObjectMeta, 0)
	svc := objs[1].(*corev1.Service)
	meta(&svc.ObjectMeta, 1)
	single, cluster := corev1.IPFamilyPolicySingleStack, corev1.ServiceInternalTrafficPolicyCluster
	svc.Spec.Type, svc.Spec.ClusterIP, svc.Spec.ClusterIPs = corev1.ServiceTypeClusterIP, corev1.ClusterIPNone, []string{corev1.ClusterIPNone}
	svc.Spec.IPFamilies, svc.Spec.IPFamilyPolicy = []corev1.IPFamily{corev1.IPv4Protocol}, &single
	svc.Spec.SessionAffinity, svc.Spec.InternalTrafficPolicy = corev1.ServiceAffinityNone, &cluster
	svc.Spec.Selector = map[string]string{"app": name}
	svc.Spec.Ports[0].Protocol = corev1.ProtocolTCP
	slice := objs[2].(*discoveryv1.EndpointSlice)
	meta(&slice.ObjectMeta, 2)
	yes, no := true, false
	slice.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: name, UID: svc.UID, Controller: &yes, BlockOwnerDeletion: &yes}}
	slice.Labels[discoveryv1.LabelManagedBy] = "endpointslice-controller.k8s.io"
	slice.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: "2026-12-07T01:00:00Z"}
	node := "node-1"
	slice.Endpoints = nil
	for j := range 2 {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255+j)},
			Conditions: discoveryv1.EndpointConditions{Ready: &yes, Serving: &yes, Terminating: &no},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: fmt.Sprintf("%s-%d", name, j), UID: types.UID(fmt.Sprintf("pod-%d-%d", i, j))},
			NodeName:   &node,
		})
	}
	port, portName, tcp := int32(8080), "http", corev1.ProtocolTCP
	slice.Ports = []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &tcp}}
	return objs
}

// protobufCopy returns obj encoded and decoded again, as a client reads
// it from the API server.
func protobufCopy(t *testing.T, obj kruntime.Object) kruntime.Object {
	type protobuf interface {
		kruntime.Object
		Marshal() ([]byte, error)
		Unmarshal([]byte) error
	}
	in, ok := obj.(protobuf)
	if !ok {
		t.Fatalf("%T has no protobuf encoding", obj)
	}
	data, err := in.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	out := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(protobuf)
	if err := out.Unmarshal(data); err != nil {
		t.Fatal(err)
	}
	return out
}

// heapInuse is the heap's spans in use (what the process holds of the
// heap, fragmentation included), after heapAlloc's collections.
func heapInuse() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
