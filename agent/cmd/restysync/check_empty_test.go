package main

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restysync/restysync/agent/internal/model"
)

// An empty value of a supported annotation is ignored, by Build and by
// ingress-nginx: restysync check says so, and the Ingress moves as it is.
func TestCheckEmptyAnnotationValue(t *testing.T) {
	pathType := networkingv1.PathTypePrefix
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: "prow", Name: "prow", Annotations: map[string]string{
			"nginx.ingress.kubernetes.io/app-root":        "",
			"nginx.ingress.kubernetes.io/proxy-body-size": "8m",
			"nginx.ingress.kubernetes.io/not-a-key":       "",
		}},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "prow.example.com", IngressRuleValue: networkingv1.IngressRuleValue{
			HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &pathType,
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "deck", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}},
		}}}},
	}
	report, _ := checkSnapshot(model.Snapshot{Ingresses: model.ListOf(ing)}, "")
	got := map[string]CheckedAnnotation{}
	for _, a := range report.Ingresses[0].Annotations {
		got[a.Key] = a
	}
	if a := got["nginx.ingress.kubernetes.io/app-root"]; a.Status != model.AnnotationIgnoredByIngressNginx || a.Reason != "an empty value, which ingress-nginx ignores too" {
		t.Errorf("app-root \"\": %+v", a)
	}
	if a := got["nginx.ingress.kubernetes.io/proxy-body-size"]; a.Status != model.AnnotationSupported {
		t.Errorf("proxy-body-size: %+v", a)
	}
	if a := got["nginx.ingress.kubernetes.io/not-a-key"]; a.Status == model.AnnotationSupported {
		t.Errorf("an unknown key with an empty value: %+v", a)
	}
	if !report.Ingresses[0].Moves {
		t.Errorf("the Ingress does not move: %+v", report.Ingresses[0])
	}
}
