package kube

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/restysync/restysync/agent/internal/kubeclient/kubeclienttest"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/snapshot"
	"github.com/restysync/restysync/agent/internal/source"
)

// BenchmarkNewIngressSnapshot is the kube source's side of one new
// Ingress beside 1,000 or 50,000 others (each served, with a Service and
// an EndpointSlice), on a fake clientset: the snapshot a sync reads once the
// informer told of it (Snapshot, then snapshot.Build as the syncer calls
// it). The Create, the fake's watch and the informer's handler are
// outside the timer (the fake's REST mapping costs more than the rest);
// each new Ingress is deleted again outside it too, so every iteration
// finds the same number.
func BenchmarkNewIngressSnapshot(b *testing.B) {
	for _, n := range []int{1000, 50000} {
		b.Run(fmt.Sprintf("ingresses=%d", n), func(b *testing.B) {
			objs := make([]runtime.Object, 0, 3*n+1)
			objs = append(objs, &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "restysync"},
				Spec: networkingv1.IngressClassSpec{Controller: model.ControllerName}})
			for i := range n {
				objs = append(objs, benchApp(fmt.Sprintf("app-%05d", i))...)
			}
			client := fake.NewClientset(objs...)
			src := New(kubeclienttest.Wrap(client), Options{IngressClass: "restysync"})
			events := make(chan source.Change, 16)
			var listed atomic.Bool // the listing's events are not waited for
			ctx, cancel := context.WithCancel(context.Background())
			defer func() { cancel(); <-src.Done() }()
			if err := src.Start(ctx, func(c source.Change) {
				if c.Kind == source.KindIngress && listed.Load() {
					events <- c
				}
			}); err != nil {
				b.Fatal(err)
			}
			listed.Store(true)
			// A running agent took its first Snapshot at start, after
			// the first listing: so does the benchmark, before the timer.
			src.Snapshot()
			ingresses := client.NetworkingV1().Ingresses("default")
			cm := snapshot.NewConfigMap(snapshot.Options{}, nil)
			wait := func(name string) {
				select {
				case c := <-events:
					if c.Name != name {
						b.Fatalf("event for %s, want %s", c.Name, name)
					}
				case <-time.After(10 * time.Second):
					b.Fatalf("no event for %s", name)
				}
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				b.StopTimer()
				name := fmt.Sprintf("new-%06d", i)
				i++
				if _, err := ingresses.Create(ctx, benchApp(name)[0].(*networkingv1.Ingress), metav1.CreateOptions{}); err != nil {
					b.Fatal(err)
				}
				wait(name)
				b.StartTimer()
				held, _ := src.Snapshot()
				built := snapshot.Build(held, snapshot.Options{IngressClass: "restysync"}, cm, nil)
				b.StopTimer()
				if built.Snapshot.Ingresses.Len() != n+1 {
					b.Fatalf("%d Ingresses, want %d", built.Snapshot.Ingresses.Len(), n+1)
				}
				if err := ingresses.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
					b.Fatal(err)
				}
				wait(name)
				b.StartTimer()
			}
		})
	}
}

// benchApp is an Ingress of class restysync, its Service and its
// EndpointSlice, all named name.
func benchApp(name string) []runtime.Object {
	class := "restysync"
	prefix := networkingv1.PathTypePrefix
	return []runtime.Object{
		&networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, ResourceVersion: "1"},
			Spec: networkingv1.IngressSpec{IngressClassName: &class, Rules: []networkingv1.IngressRule{{Host: name + ".example.com",
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
					Path: "/", PathType: &prefix, Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
						Name: name, Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}}}}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}}},
		&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name + "-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: name}}, AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}}},
	}
}
