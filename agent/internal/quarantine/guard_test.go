package quarantine

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restysync/restysync/agent/internal/model"
)

func testIngress(name, path string) *networkingv1.Ingress {
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: name + ".test",
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{Path: path}}}}}}},
	}
}

// nginxTakes plays nginx: it refuses any set of Ingresses with a "bad" path.
func nginxTakes(ingresses []*networkingv1.Ingress) bool {
	for _, ing := range ingresses {
		if ing.Spec.Rules[0].HTTP.Paths[0].Path == "bad" {
			return false
		}
	}
	return true
}

// run steps the guard as the loop does until it stops bisecting, and
// returns the Ingresses served and the number of reloads it took.
func run(t *testing.T, g *Guard, current []*networkingv1.Ingress) (served []string, reloads int) {
	t.Helper()
	for range 1000 {
		used, _ := g.Filter(model.ListOf(current...))
		reloads++
		if nginxTakes(used.Slice()) {
			g.Confirmed()
		} else if _, blamed := g.Rejected("nginx said no"); !blamed {
			t.Fatal("rejected with nothing to blame")
		}
		if !g.Bisecting() {
			used, _ = g.Filter(model.ListOf(current...))
			if !nginxTakes(used.Slice()) {
				t.Fatal("after the bisection the config is still refused")
			}
			g.Confirmed()
			return slices.Sorted(maps.Keys(g.good.byKey())), reloads
		}
	}
	t.Fatal("the bisection does not end")
	return nil, 0
}

func TestGuardBisectsToTheBadIngresses(t *testing.T) {
	g := New()
	var current []*networkingv1.Ingress
	for i := range 16 {
		current = append(current, testIngress(fmt.Sprintf("ok-%02d", i), "/"))
	}
	served, _ := run(t, g, current)
	if len(served) != 16 || len(g.quarantine) != 0 {
		t.Fatalf("good start: served %d, quarantined %v", len(served), g.Keys())
	}

	// 32 new Ingresses, two of them bad, and one served Ingress turns bad.
	next := slices.Clone(current)
	for i := range 32 {
		path := "/"
		if i == 5 || i == 22 {
			path = "bad"
		}
		next = append(next, testIngress(fmt.Sprintf("new-%02d", i), path))
	}
	oldOK3 := next[3]
	next[3] = testIngress("ok-03", "bad")
	served, reloads := run(t, g, next)
	if want := []string{"default/new-05", "default/new-22", "default/ok-03"}; !slices.Equal(g.Keys(), want) {
		t.Errorf("quarantined %v, want %v", g.Keys(), want)
	}
	if len(served) != 48-2 {
		t.Errorf("served %d Ingresses, want 46 (every one but the two bad new ones)", len(served))
	}
	if g.good.get("default/ok-03") != oldOK3 {
		t.Error("the Ingress that turned bad does not keep its last good version")
	}
	// 3 bad among 33 changed: about 2·3·log2(33) reloads at most.
	if reloads > 2*3*6+2 {
		t.Errorf("%d reloads to find 3 bad Ingresses among 33", reloads)
	}
	t.Logf("3 bad among 33 changed Ingresses found in %d reloads", reloads)

	_, problems := g.Filter(model.ListOf(next...))
	if len(problems) != 3 {
		t.Errorf("%d problems for 3 quarantined Ingresses", len(problems))
	}

	// A quarantined Ingress that changes is tried again; one that is
	// deleted leaves the quarantine.
	fixed := slices.Clone(next)
	fixed[3] = testIngress("ok-03", "/fixed")
	fixed = slices.DeleteFunc(fixed, func(ing *networkingv1.Ingress) bool { return ing.Name == "new-22" })
	run(t, g, fixed)
	if want := []string{"default/new-05"}; !slices.Equal(g.Keys(), want) {
		t.Errorf("after the fix: quarantined %v, want %v", g.Keys(), want)
	}
	if g.good.get("default/ok-03") != fixed[3] {
		t.Error("the fixed Ingress is not served")
	}
}

// A rejection no changed Ingress explains (a setting, or nginx itself) is
// not bisected: nobody is quarantined for it.
func TestGuardBlamesNobodyWithoutChanges(t *testing.T) {
	g := New()
	current := []*networkingv1.Ingress{testIngress("a", "/")}
	g.Filter(model.ListOf(current...))
	g.Confirmed()
	g.Filter(model.ListOf(current...))
	if _, blamed := g.Rejected("nginx said no"); blamed || g.Bisecting() || len(g.quarantine) != 0 {
		t.Fatal("a rejection without changed Ingresses blamed one")
	}
}

// An Ingress decoded again with the same content is the same Ingress.
func TestSameIngress(t *testing.T) {
	a, b := testIngress("a", "/"), testIngress("a", "/")
	if !sameIngress(a, b) {
		t.Error("equal content differs")
	}
	b.Annotations = map[string]string{"restysync.io/use-regex": "true"}
	if sameIngress(a, b) {
		t.Error("an annotation change is not a change")
	}
	if sameIngress(nil, a) || !sameIngress(nil, nil) {
		t.Error("nil handling")
	}
}
