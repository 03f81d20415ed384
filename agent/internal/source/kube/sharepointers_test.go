package kube

import (
	"fmt"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/restysync/restysync/agent/internal/kubeclient/kubeclienttest"
)

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

// Past maxSharedValues values, a new value keeps its own pointer; a value
// the table holds is still shared.
func TestSharedValuesBound(t *testing.T) {
	var table sharedValues
	for i := range maxSharedValues {
		s := fmt.Sprint(i)
		table.string(&s)
	}
	extra := "extra"
	if got := table.string(&extra); got != &extra || *got != "extra" || len(table.strings) != maxSharedValues {
		t.Errorf("past the bound: %q, own pointer %v, %d values held", *got, got == &extra, len(table.strings))
	}
	zero := "0"
	if got := table.string(&zero); got == &zero || *got != "0" {
		t.Errorf("a held value is not shared: %q", *got)
	}
}

// Ingresses with equal status addresses share one list; one with others
// keeps its own, which the next equal one shares.
func TestTransformIngressSharesStatus(t *testing.T) {
	src := New(kubeclienttest.Wrap(fake.NewClientset()), Options{})
	withStatus := func(name string, ips ...string) *networkingv1.Ingress {
		ing := apiServerApp(name, 0)[0].(*networkingv1.Ingress)
		for _, ip := range ips {
			ing.Status.LoadBalancer.Ingress = append(ing.Status.LoadBalancer.Ingress, networkingv1.IngressLoadBalancerIngress{IP: ip})
		}
		got, err := src.transformIngress(ing)
		if err != nil {
			t.Fatal(err)
		}
		return got.(*networkingv1.Ingress)
	}
	first, second := withStatus("a", "192.0.2.10"), withStatus("b", "192.0.2.10")
	other, third := withStatus("c", "192.0.2.11"), withStatus("d", "192.0.2.11")
	none := withStatus("e")
	if &first.Status.LoadBalancer.Ingress[0] != &second.Status.LoadBalancer.Ingress[0] {
		t.Errorf("equal statuses are not shared")
	}
	if &other.Status.LoadBalancer.Ingress[0] == &first.Status.LoadBalancer.Ingress[0] || other.Status.LoadBalancer.Ingress[0].IP != "192.0.2.11" {
		t.Errorf("another status: %+v, shared %v", other.Status.LoadBalancer.Ingress, &other.Status.LoadBalancer.Ingress[0] == &first.Status.LoadBalancer.Ingress[0])
	}
	if &third.Status.LoadBalancer.Ingress[0] != &other.Status.LoadBalancer.Ingress[0] {
		t.Errorf("the next equal status does not share the other's")
	}
	if none.Status.LoadBalancer.Ingress != nil {
		t.Errorf("an Ingress without status got %+v", none.Status.LoadBalancer.Ingress)
	}
}
