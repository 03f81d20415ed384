package source

import (
	"strings"
	"testing"
	"unique"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestShareFewValued: each few-valued field of two objects decoded apart
// (no string in common) ends up one copy, its value unchanged.
func TestShareFewValued(t *testing.T) {
	share := func(s string) string { return unique.Make(s).Value() }
	own := func(s string) string { return strings.Clone(s) }
	service := func() *corev1.Service {
		return &corev1.Service{Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: own("http"),
			Protocol: corev1.Protocol(own("TCP")), TargetPort: intstr.FromString(own("web"))}}}}
	}
	slice := func() *discoveryv1.EndpointSlice {
		name, protocol := own("http"), corev1.Protocol(own("TCP"))
		return &discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressType(own("IPv4")),
			Ports: []discoveryv1.EndpointPort{{Name: &name, Protocol: &protocol}}}
	}
	ingress := func() *networkingv1.Ingress {
		class, pathType := own("restysync"), networkingv1.PathType(own("Prefix"))
		return &networkingv1.Ingress{Spec: networkingv1.IngressSpec{IngressClassName: &class,
			Rules: []networkingv1.IngressRule{{IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{PathType: &pathType, Backend: networkingv1.IngressBackend{
					Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Name: own("http")}}}}}}}}}}}
	}
	fields := func(s *corev1.Service, e *discoveryv1.EndpointSlice, i *networkingv1.Ingress) []string {
		p, path := s.Spec.Ports[0], i.Spec.Rules[0].HTTP.Paths[0]
		return []string{p.Name, string(p.Protocol), p.TargetPort.StrVal, string(e.AddressType), *e.Ports[0].Name,
			string(*e.Ports[0].Protocol), *i.Spec.IngressClassName, string(*path.PathType), path.Backend.Service.Port.Name}
	}
	s1, e1, i1 := service(), slice(), ingress()
	s2, e2, i2 := service(), slice(), ingress()
	for _, obj := range []any{s1, e1, i1, s2, e2, i2} {
		ShareFewValued(obj, share)
	}
	a, b := fields(s1, e1, i1), fields(s2, e2, i2)
	want := []string{"http", "TCP", "web", "IPv4", "http", "TCP", "restysync", "Prefix", "http"}
	for i := range want {
		if a[i] != want[i] || b[i] != want[i] {
			t.Errorf("field %d: %q and %q, want %q", i, a[i], b[i], want[i])
		}
		if unsafe.StringData(a[i]) != unsafe.StringData(b[i]) {
			t.Errorf("field %d (%q): two copies, want one", i, want[i])
		}
	}
}
