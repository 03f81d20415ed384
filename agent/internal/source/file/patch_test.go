package file

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/source"
)

// TestPatchViewIsBuildView edits a folder one file at a time and checks,
// after each publish, that the view served is the one buildView makes of
// the same files, and that the edits that only change objects in place
// (patchView) report just those objects.
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
		{"a document is added", "a.yaml", app("a", "10.0.0.9") + "---\n" + configMapYAML, nil},
		{"a document breaks", "a.yaml", app("a", "10.0.0.9") + "---\nkind: [\n", nil},
		{"a file is new", "c.yaml", serviceYAML("c", 80), nil},
	} {
		path := filepath.Join(dir, step.file)
		writeFile(t, path, step.content)
		s.readFile(path)
		pending := s.pending
		s.pending = nil
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
			s.publish()
		}
		if want := s.buildView(); !reflect.DeepEqual(s.view, want) {
			t.Errorf("%s: the view served differs from the one built whole:\n%+v\nwant\n%+v", step.name, s.view, want)
		}
	}
	if got := s.TakeChangedServices(); !slices.Contains(got, source.ServiceKey{Namespace: "default", Name: "a"}) {
		t.Errorf("changed services %v, want default/a among them", got)
	}
}
