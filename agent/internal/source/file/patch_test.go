package file

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/source"
)

// TestPatchViewIsBuildView edits a folder one file at a time and checks,
// after each publish, that the view served is the one buildView makes of
// the same files, that the edits patchView may take (objects changed,
// added or removed without duplicates, problems or slices joining others)
// are patched and report just those objects, and that the others are not.
func TestPatchViewIsBuildView(t *testing.T) {
	dir := t.TempDir()
	app := func(name, address string) string {
		return serviceYAML(name, 80) + "---\n" + ingressYAML(name, name) + "---\n" +
			strings.Replace(endpointSliceYAML(name+"-1", name), "10.0.0.1", address, 1)
	}
	writeFile(t, filepath.Join(dir, "a.yaml"), app("a", "10.0.0.1"))
	writeFile(t, filepath.Join(dir, "b.yaml"), app("b", "10.0.0.2"))
	writeFile(t, filepath.Join(dir, "dup.yaml"), endpointSliceYAML("b-1", "b")) // loses to b.yaml's
	s := New(dir)
	s.readAll()
	s.publish()

	for _, step := range []struct {
		name, file, content string
		patched             []string // the changes reported when patched; nil: built whole
	}{
		{"an endpoint changes", "a.yaml", app("a", "10.0.0.9"),
			[]string{"EndpointSlice default/a-1"}},
		{"a host and an endpoint change", "b.yaml", strings.Replace(app("b", "10.0.0.8"), "b.example.com", "c.example.com", 1),
			[]string{"Ingress default/b", "EndpointSlice default/b-1"}},
		{"the same bytes", "a.yaml", app("a", "10.0.0.9"), []string{}},
		{"the losing duplicate changes", "dup.yaml", strings.Replace(endpointSliceYAML("b-1", "b"), "10.0.0.1", "10.0.0.7", 1), nil},
		{"a slice moves to another Service", "a.yaml", strings.Replace(app("a", "10.0.0.9"), "service-name: a", "service-name: b", 1), nil},
		{"the slice moves back", "a.yaml", app("a", "10.0.0.9"), nil},
		{"a document is added", "a.yaml", app("a", "10.0.0.9") + "---\n" + configMapYAML,
			[]string{"ConfigMap default/settings"}},
		{"a document is removed", "a.yaml", app("a", "10.0.0.9"),
			[]string{"ConfigMap default/settings"}},
		{"the documents swap places", "a.yaml", ingressYAML("a", "a") + "---\n" + serviceYAML("a", 80) + "---\n" +
			strings.Replace(endpointSliceYAML("a-1", "a"), "10.0.0.1", "10.0.0.9", 1), []string{}},
		{"a document breaks", "a.yaml", app("a", "10.0.0.9") + "---\nkind: [\n", nil},
		{"the document is mended", "a.yaml", app("a", "10.0.0.9"), nil},
		{"a file is new", "c.yaml", app("c", "10.0.0.3"),
			[]string{"Ingress default/c", "Service default/c", "EndpointSlice default/c-1"}},
		{"a new file's slice joins its Service's", "d.yaml", endpointSliceYAML("c-2", "c"), nil},
		{"a file with a slice among its Service's is deleted", "d.yaml", "",
			[]string{"EndpointSlice default/c-2"}},
		{"a file is deleted", "c.yaml", "",
			[]string{"Ingress default/c", "Service default/c", "EndpointSlice default/c-1"}},
		{"a new file defines a served object", "e.yaml", serviceYAML("a", 81), nil},
		{"the losing duplicate's file is deleted", "e.yaml", "", nil},
		{"a new file defines an object twice", "f.yaml", serviceYAML("f", 80) + "---\n" + serviceYAML("f", 80), nil},
		{"the file defining it twice is deleted", "f.yaml", "", nil},
		{"a new file has a problem", "g.yaml", "kind: [\n", nil},
		{"the file with a problem is deleted", "g.yaml", "", nil},
		{"a file whose objects have duplicates is deleted", "b.yaml", "", nil},
		{"a file is new again", "c.yaml", app("c", "10.0.0.3"),
			[]string{"Ingress default/c", "Service default/c", "EndpointSlice default/c-1"}},
		{"a new file's objects sort between others", "z.yaml", app("aa", "10.0.0.4"),
			[]string{"Ingress default/aa", "Service default/aa", "EndpointSlice default/aa-1"}},
	} {
		path := filepath.Join(dir, step.file)
		writeOrRemove(t, path, step.content)
		s.readFile(path)
		pending := s.pending
		s.pending = nil
		prev := s.view
		changed, ok := s.patchView(pending)
		if ok != (step.patched != nil) {
			t.Fatalf("%s: patched %v, want %v", step.name, ok, step.patched != nil)
		}
		if ok {
			var got []string
			for _, c := range changed {
				got = append(got, string(c.Kind)+" "+c.Namespace+"/"+c.Name)
			}
			if !slices.Equal(got, step.patched) && !(len(got) == 0 && len(step.patched) == 0) {
				t.Errorf("%s: changes %v, want %v", step.name, got, step.patched)
			}
		} else {
			s.pending = pending
			changed, _ = s.publish()
		}
		// The changes reported are those between the views (the lists
		// walked side by side, as a view built whole reports them).
		var want []source.Change
		for _, key := range changedBetween(prev, s.view) {
			want = append(want, source.Change{Kind: key.kind, Namespace: key.namespace, Name: key.name})
		}
		if !slices.Equal(changed, want) {
			t.Errorf("%s: changes %v, want those between the views: %v", step.name, changed, want)
		}
		if want := s.buildView(); !reflect.DeepEqual(s.view, want) {
			t.Errorf("%s: the view served differs from the one built whole:\n%+v\nwant\n%+v", step.name, s.view, want)
		}
	}
	if got := s.TakeChangedServices(); !slices.Contains(got, source.ServiceKey{Namespace: "default", Name: "a"}) {
		t.Errorf("changed services %v, want default/a among them", got)
	}
}

// writeOrRemove writes content to path, or removes path when content is "".
func writeOrRemove(t *testing.T, path, content string) {
	t.Helper()
	if content == "" {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		return
	}
	writeFile(t, path, content)
}

// Every kind reported has its list, whose type maps back to the kind
// (keyOf), and every type the decoder reads is one of them.
func TestKindListsCoverEveryKind(t *testing.T) {
	if len(kindLists) != len(kindOrder) || len(kindOfType) != len(kindOrder) {
		t.Fatalf("%d lists, %d types for %d kinds", len(kindLists), len(kindOfType), len(kindOrder))
	}
	for _, kind := range kindOrder {
		if list, ok := kindLists[kind]; !ok || kindOfType[list.objectType()] != kind {
			t.Errorf("kind %s has no list, or its type maps to %q", kind, kindOfType[list.objectType()])
		}
	}
	for kind, apiVersion := range readKinds {
		doc, reason, _ := decodeDocument([]byte("apiVersion: " + apiVersion + "\nkind: " + kind + "\nmetadata: {name: a, namespace: b}\n"))
		if reason != "" {
			t.Fatalf("%s: %s", kind, reason)
		}
		if kindOfType[reflect.TypeOf(doc.obj)] != source.Kind(kind) {
			t.Errorf("%T reads as kind %q, want %s", doc.obj, kindOfType[reflect.TypeOf(doc.obj)], kind)
		}
	}
}

// A patched publish copies the shard of the Services whose slices
// changed, not the index of every Service: the view before keeps serving
// its own slices, and shares every other shard with the view after.
func TestPatchViewSharesSliceShards(t *testing.T) {
	dir := t.TempDir()
	for i := range 600 {
		name := fmt.Sprintf("app-%03d", i)
		writeFile(t, filepath.Join(dir, name+".yaml"), serviceYAML(name, 80)+"---\n"+endpointSliceYAML(name+"-1", name))
	}
	s := New(dir)
	s.readAll()
	s.publish()
	prev := s.view
	path := filepath.Join(dir, "new.yaml")
	writeFile(t, path, serviceYAML("new", 80)+"---\n"+endpointSliceYAML("new-1", "new"))
	s.readFile(path)
	if changed, _ := s.publish(); len(changed) != 2 || s.view == prev {
		t.Fatalf("publish changed %v, want the new Service and its slice patched in", changed)
	}
	copied := 0
	for i := range source.SliceShards {
		if reflect.ValueOf(prev.slicesOf.Shard(i)).UnsafePointer() != reflect.ValueOf(s.view.slicesOf.Shard(i)).UnsafePointer() {
			copied++
		}
	}
	if copied != 1 {
		t.Errorf("%d of %d shards copied, want 1", copied, source.SliceShards)
	}
	key := source.ServiceKey{Namespace: "default", Name: "new"}
	if got := prev.slicesOf.Get(key); got != nil {
		t.Errorf("the view before the publish serves %v for the new Service", got)
	}
	if _, got := s.ServiceEndpoints("default", "new"); len(got) != 1 || got[0].Name != "new-1" {
		t.Errorf("ServiceEndpoints(default/new) = %v, want its slice new-1", got)
	}
	if _, got := s.ServiceEndpoints("default", "app-007"); len(got) != 1 || got[0].Name != "app-007-1" {
		t.Errorf("ServiceEndpoints(default/app-007) = %v, want its slice app-007-1", got)
	}
}
