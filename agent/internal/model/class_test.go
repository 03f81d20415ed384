package model

import (
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
)

// TestDecideClass holds each class decision to what it says: whether the
// Ingress is served, why not, and the two-classes warning.
func TestDecideClass(t *testing.T) {
	const nginx = "k8s.io/ingress-nginx"
	ours := ingressClass(testClass, ControllerName, false)
	tests := []struct {
		name        string
		classes     []*networkingv1.IngressClass
		withoutCls  bool
		opts        []ingressOption
		wantServed  bool
		wantWhy     string // the whole NotServed reason
		wantWarning string // a fragment of TwoClasses; "" for none
	}{
		{name: "our class", classes: []*networkingv1.IngressClass{ours}, opts: []ingressOption{classField(testClass)}, wantServed: true},
		{
			name: "class nginx of ingress-nginx", classes: []*networkingv1.IngressClass{ours, ingressClass("nginx", nginx, false)},
			opts:    []ingressOption{classField("nginx")},
			wantWhy: "class nginx is not restysync's (controller k8s.io/ingress-nginx)",
		},
		{
			name: "a class with no IngressClass", classes: []*networkingv1.IngressClass{ours},
			opts:    []ingressOption{classField("traefik")},
			wantWhy: "class traefik is not restysync's (no IngressClass of that name)",
		},
		{
			name: "our class named, IngressClass missing", opts: []ingressOption{classField(testClass)},
			wantWhy: "class restysync has no IngressClass: create one with controller restysync.io/ingress-controller",
		},
		{
			name: "our class named, IngressClass of another controller", classes: []*networkingv1.IngressClass{ingressClass(testClass, nginx, false)},
			opts:    []ingressOption{classField(testClass)},
			wantWhy: "IngressClass restysync has controller k8s.io/ingress-nginx, not restysync's restysync.io/ingress-controller",
		},
		{
			name: "annotation names another class", classes: []*networkingv1.IngressClass{ours, ingressClass("nginx", nginx, false)},
			opts:    []ingressOption{noClassField(), annotation(legacyClassAnnotation, "nginx")},
			wantWhy: "annotation kubernetes.io/ingress.class names class nginx, not restysync (controller k8s.io/ingress-nginx)",
		},
		{
			name: "no class, not watching without class", classes: []*networkingv1.IngressClass{ours},
			opts:    []ingressOption{noClassField()},
			wantWhy: "names no class: restysync serves those only with --watch-ingress-without-class, or when IngressClass restysync is the default one",
		},
		{name: "no class, watching without class", classes: []*networkingv1.IngressClass{ours}, withoutCls: true, opts: []ingressOption{noClassField()}, wantServed: true},
		{
			name: "no class, another default", classes: []*networkingv1.IngressClass{ours, ingressClass("nginx", nginx, true)}, withoutCls: true,
			opts:    []ingressOption{noClassField()},
			wantWhy: "names no class, and the default IngressClass is nginx (controller k8s.io/ingress-nginx)",
		},
		{
			name: "field ours, annotation nginx: the field wins, with a warning", classes: []*networkingv1.IngressClass{ours},
			opts:       []ingressOption{classField(testClass), annotation(legacyClassAnnotation, "nginx")},
			wantServed: true,
			wantWarning: `spec.ingressClassName: "restysync" and the annotation kubernetes.io/ingress.class "nginx" name two classes; ` +
				"the field wins, as in ingress-nginx and the Kubernetes API: restysync serves it",
		},
		{
			name: "field nginx, annotation ours: the field wins, with a warning", classes: []*networkingv1.IngressClass{ours, ingressClass("nginx", nginx, false)},
			opts:        []ingressOption{classField("nginx"), annotation(legacyClassAnnotation, testClass)},
			wantWhy:     "class nginx is not restysync's (controller k8s.io/ingress-nginx)",
			wantWarning: "restysync does not serve it",
		},
		{
			name: "two classes, neither ours: not ours to warn about", classes: []*networkingv1.IngressClass{ours},
			opts:    []ingressOption{classField("a"), annotation(legacyClassAnnotation, "b")},
			wantWhy: "class a is not restysync's (no IngressClass of that name)",
		},
		{
			name: "the same class twice is no conflict", classes: []*networkingv1.IngressClass{ours},
			opts:       []ingressOption{classField(testClass), annotation(legacyClassAnnotation, testClass)},
			wantServed: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Snapshot{IngressClass: testClass, IngressClasses: ListOf(tt.classes...), WatchWithoutClass: tt.withoutCls}
			d := DecideClass(s)(newIngress("default", "ing", tt.opts...))
			if d.Served != tt.wantServed || d.NotServed != tt.wantWhy {
				t.Errorf("served %v, why %q; want %v, %q", d.Served, d.NotServed, tt.wantServed, tt.wantWhy)
			}
			if (tt.wantWarning == "") != (d.TwoClasses == "") || !strings.Contains(d.TwoClasses, tt.wantWarning) {
				t.Errorf("warning %q, want one with %q", d.TwoClasses, tt.wantWarning)
			}
		})
	}
}

// TestBuildNotServedAndClassProblems checks what Build makes of the
// decisions: the not-served list, sorted, and the class warnings.
func TestBuildNotServedAndClassProblems(t *testing.T) {
	s := snapshotOf(
		newIngress("default", "b", rule("b.test", prefix("/", "web", 80)), classField("nginx")),
		newIngress("default", "a", rule("a.test", prefix("/", "web", 80)), noClassField()),
		newIngress("default", "both", rule("both.test", prefix("/", "web", 80)), classField(testClass),
			annotation(legacyClassAnnotation, "nginx")),
	)
	s.IngressClasses = ListOf(ingressClass(testClass, "k8s.io/ingress-nginx", false))
	m, problems := Build(s)
	want := []NotServed{
		{Ingress: "default/a", Reason: "names no class: restysync serves those only with --watch-ingress-without-class, or when IngressClass restysync is the default one"},
		{Ingress: "default/b", Reason: "class nginx is not restysync's (no IngressClass of that name)"},
		{Ingress: "default/both", Reason: "IngressClass restysync has controller k8s.io/ingress-nginx, not restysync's restysync.io/ingress-controller"},
	}
	if len(m.NotServed) != len(want) {
		t.Fatalf("not served %v, want %v", m.NotServed, want)
	}
	for i := range want {
		if m.NotServed[i] != want[i] {
			t.Errorf("not served [%d] %v, want %v", i, m.NotServed[i], want[i])
		}
	}
	var classProblem, twoClasses bool
	for _, p := range problems {
		switch {
		case p.Kind == "IngressClass" && p.Name == testClass &&
			strings.HasPrefix(p.Reason, `spec.controller is "k8s.io/ingress-nginx", not restysync's "restysync.io/ingress-controller"`):
			classProblem = true
		case p.Kind == "Ingress" && p.Name == "both" && strings.Contains(p.Reason, "name two classes; the field wins"):
			twoClasses = true
		}
	}
	if !classProblem || !twoClasses {
		t.Errorf("problems %v: want the IngressClass's controller and the two classes of default/both", problems)
	}
}
