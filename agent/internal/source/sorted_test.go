package source

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restysync/restysync/agent/internal/model"
)

// Patched against a map of the same objects, over random batches of
// edits (adds, replacements, removals, removals of absent objects): the
// result is sorted, holds what the map holds, and the list before is
// unchanged.
func TestPatched(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	svc := func(ns, name string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	want := map[[2]string]*corev1.Service{}
	var list model.List[*corev1.Service]
	for step := range 300 {
		n := 1 + rng.IntN(40)
		if step%50 == 0 {
			n = 500
		}
		batch := map[[2]string]*corev1.Service{}
		for range n {
			key := [2]string{fmt.Sprintf("ns-%d", rng.IntN(5)), fmt.Sprintf("o-%03d", rng.IntN(300))}
			if rng.IntN(3) == 0 {
				batch[key] = nil
			} else {
				batch[key] = svc(key[0], key[1])
			}
		}
		edits := make([]Edit[*corev1.Service], 0, len(batch))
		for key, obj := range batch {
			edits = append(edits, Edit[*corev1.Service]{Namespace: key[0], Name: key[1], Obj: obj})
			if obj == nil {
				delete(want, key)
			} else {
				want[key] = obj
			}
		}
		before := list.Slice()
		next, ok := Patched(list, edits)
		if !ok {
			t.Fatalf("step %d: Patched refused edits of distinct objects", step)
		}
		if !slices.Equal(list.Slice(), before) {
			t.Fatalf("step %d: Patched changed the list it was given", step)
		}
		if next.Len() != len(want) {
			t.Fatalf("step %d: %d objects, want %d", step, next.Len(), len(want))
		}
		for i, o := range next.Slice() {
			if want[[2]string{o.Namespace, o.Name}] != o {
				t.Fatalf("step %d: %s/%s is not the object last put", step, o.Namespace, o.Name)
			}
			if i > 0 && CompareNamed(next.At(i-1), o.Namespace, o.Name) >= 0 {
				t.Fatalf("step %d: not sorted at %d", step, i)
			}
		}
		list = next
	}
}

func TestPatchedRefusesAnObjectTwice(t *testing.T) {
	a := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "a"}}
	if got, ok := Patched(model.List[*corev1.Service]{}, []Edit[*corev1.Service]{{Namespace: "web", Name: "a", Obj: a}, {Namespace: "web", Name: "a"}}); ok || got.Len() != 0 {
		t.Errorf("Patched with web/a twice = %v, %v; want nil, false", got, ok)
	}
	list := model.ListOf(a)
	if got, ok := Patched(list, nil); !ok || !got.Same(list) {
		t.Errorf("Patched with no edit made a new list")
	}
}
