package render

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restysync/restysync/agent/internal/model"
)

// Object names reach nginx.conf (the custom-http-errors headers) and Lua
// (backend names). The API server checks them; the file source does not,
// so the model does: a namespace, Ingress, Service or port name with a
// character no value may hold is a Problem, never a failed render.
func TestHostileObjectNamesNeverReachRender(t *testing.T) {
	world := newRandomWorld()
	class := "restysync"
	pathType := networkingv1.PathTypePrefix
	for _, bad := range []struct{ ns, name, svc string }{{"x\u0085", "web", "web"}, {"default", "w\u0085", "web"}, {"default", "web", "w\u0085"}, {"default", "web", "web\u2028"}, {"default", "web\u202e", "web"}} {
		ing := &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Namespace: bad.ns, Name: bad.name, Annotations: map[string]string{
				"nginx.ingress.kubernetes.io/custom-http-errors": "404", "nginx.ingress.kubernetes.io/default-backend": bad.svc}},
			Spec: networkingv1.IngressSpec{IngressClassName: &class, DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: bad.svc, Port: networkingv1.ServiceBackendPort{Number: 80}}}, Rules: []networkingv1.IngressRule{{
				Host: "n.example.com", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &pathType, Backend: networkingv1.IngressBackend{
						Service: &networkingv1.IngressServiceBackend{Name: bad.svc, Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}}}},
		}
		snap := model.Snapshot{IngressClasses: model.ListOf(world.classes...), IngressClass: "restysync", Services: model.ListOf(model.ServicesOf(world.services...)...),
			EndpointSlices: model.ListOf(world.slices...), Ingresses: model.ListOf(ing)}
		m, problems := model.Build(snap)
		if len(problems) == 0 {
			t.Errorf("%q: no problem", bad)
		}
		if _, err := Render(m, goldenSettings); err != nil {
			t.Errorf("%q: Render: %v (problems %v)", bad, err, problems)
		}
		if _, err := Routes(m, goldenSettings); err != nil {
			t.Errorf("%q: Routes: %v", bad, err)
		}
	}
}
