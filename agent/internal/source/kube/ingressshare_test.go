package kube

import (
	"reflect"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/restysync/restysync/agent/internal/kubeclient/kubeclienttest"
	"github.com/restysync/restysync/agent/internal/source"
)

// An Ingress update that leaves its spec, labels and annotations as they
// were (the status writer's) shares them with the cached Ingress; one
// that changes the spec does not share it; the same version listed again
// is the cached Ingress.
func TestTransformIngressShares(t *testing.T) {
	cachedIng := apiServerApp("web", 0)[0].(*networkingv1.Ingress)
	cachedIng.Annotations = map[string]string{"nginx.ingress.kubernetes.io/proxy-body-size": "8m"}
	cachedIng.Labels = map[string]string{"team": "a"}
	src := New(kubeclienttest.Wrap(fake.NewClientset(cachedIng.DeepCopy())), Options{})
	startSource(t, src, func(source.Change) {})
	cached := src.Ingress(cachedIng.Namespace, cachedIng.Name)
	if cached == nil {
		t.Fatal("no cached Ingress")
	}
	mapOf := func(m map[string]string) uintptr { return reflect.ValueOf(m).Pointer() }

	status := cached.DeepCopy()
	status.ResourceVersion = "2000"
	status.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.10"}}
	got, err := src.transformIngress(status)
	if err != nil {
		t.Fatal(err)
	}
	ing := got.(*networkingv1.Ingress)
	if ing == cached || &ing.Spec.Rules[0] != &cached.Spec.Rules[0] || mapOf(ing.Annotations) != mapOf(cached.Annotations) || mapOf(ing.Labels) != mapOf(cached.Labels) {
		t.Errorf("a status update shares nothing with the cached Ingress")
	}
	if ing.Status.LoadBalancer.Ingress[0].IP != "192.0.2.10" || ing.ResourceVersion != "2000" {
		t.Errorf("the status update lost its status or version: %+v", ing)
	}

	spec := cached.DeepCopy()
	spec.ResourceVersion, spec.Generation = "2001", 2
	spec.Spec.Rules[0].Host = "new.example.com"
	got, _ = src.transformIngress(spec)
	if ing := got.(*networkingv1.Ingress); ing.Spec.Rules[0].Host != "new.example.com" || &ing.Spec.Rules[0] == &cached.Spec.Rules[0] {
		t.Errorf("a spec change: host %q, shared with the cache %v", ing.Spec.Rules[0].Host, &ing.Spec.Rules[0] == &cached.Spec.Rules[0])
	}

	if got, _ := src.transformIngress(cached.DeepCopy()); got != cached {
		t.Errorf("the same version again is not the cached Ingress")
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
