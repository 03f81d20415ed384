package render

import (
	"fmt"
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// Issue 25: model accepts ⇒ render accepts ⇒ nginx -t accepts, for values
// holding characters no value may hold. Every value of annotationValues
// (each supported annotation, the eleven inputs of the issue among them)
// gets each of unrenderableChars inside it, one Ingress each, all in one
// snapshot: Build names every one in a Problem, Render takes the model
// whole (one bad value once stopped the render of every tenant), and
// nginx -t takes the config.
func TestUnrenderableValuesNeverReachRender(t *testing.T) {
	world := newRandomWorld()
	snap := model.Snapshot{IngressClasses: model.ListOf(world.classes...), IngressClass: "restysync", Services: model.ListOf(model.ServicesOf(world.services...)...),
		EndpointSlices: model.ListOf(world.slices...), Secrets: model.ListOf(world.secrets...), ConfigMaps: model.ListOf(world.configMaps...)}
	class := "restysync"
	pathType := networkingv1.PathTypePrefix
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range annotationValues {
			if !yield(k) {
				return
			}
		}
	})
	n := 0
	for _, key := range keys {
		for _, value := range annotationValues[key] {
			for ci, bad := range unrenderableChars {
				mid := len(value) / 2
				ing := &networkingv1.Ingress{
					ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("v%d", n),
						Annotations: map[string]string{annotationPrefixes[ci%2] + key: value[:mid] + bad + value[mid:]}},
					Spec: networkingv1.IngressSpec{IngressClassName: &class, Rules: []networkingv1.IngressRule{{
						Host: fmt.Sprintf("v%d.example.com", n), IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
							Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &pathType, Backend: networkingv1.IngressBackend{
								Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}}}},
				}
				snap.Ingresses = model.ListOf(append(snap.Ingresses.Slice(), ing)...)
				n++
			}
		}
	}
	m, problems := model.Build(snap)
	if err := checkUnrenderableRefused(snap, problems); err != nil {
		t.Fatal(err)
	}
	prefix := nginxproc.TempPrefix(t)
	s := goldenSettings
	s.SharedDir = prefix
	s.HTTPPort, s.HTTPSPort = 18080, 18443
	s.LoadModules = nginxproc.DebianLoadModules()
	cfg, err := Render(m, s)
	if err != nil {
		t.Fatalf("Render refused a model Build made: %v", err)
	}
	if _, err := Routes(m, s); err != nil {
		t.Fatalf("Routes refused a model Build made: %v", err)
	}
	writePrefix(t, prefix, m, s)
	if _, err := nginxproc.Test(t, prefix); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d Ingresses, %d problems, nginx.conf of %d bytes taken by nginx -t", n, len(problems), len(cfg.Bytes))
}
