package kube

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/restysync/restysync/agent/internal/kubeclient/kubeclienttest"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/source"
)

var (
	heapN       = flag.Int("kube.heap.n", 1000, "TestSourceHeap: Ingresses (each with a Service and an EndpointSlice); 50000 for the scale")
	heapProfile = flag.String("kube.heap.profile", "", "TestSourceHeap: write a heap profile there once the source has started")
)

// TestSourceHeap reports the heap the kube source holds for n served
// Ingresses, each with a Service and an EndpointSlice, once it has started
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
		objs = append(objs, benchApp(fmt.Sprintf("app-%06d", i))...)
	}
	client := fake.NewClientset(objs...)
	objs = nil
	before := heapAlloc()
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
	after := heapAlloc()
	if snap.Ingresses.Len() != n {
		t.Fatalf("the snapshot holds %d Ingresses, want %d", snap.Ingresses.Len(), n)
	}
	t.Logf("kube source at %d Ingresses: heap %.1f MB (%d Ingresses in the snapshot)", n, float64(after-before)/1e6, snap.Ingresses.Len())
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

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
