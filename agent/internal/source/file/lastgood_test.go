package file

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/model"
)

// readOnce reads dir with a Source that is not watching, as Start's first
// read does, and returns the source for more reads.
func readOnce(t *testing.T, dir string) *Source {
	t.Helper()
	s := New(dir)
	s.readAll()
	s.publish()
	return s
}

// reread reads path again and publishes, as the watch does after an event.
func reread(s *Source, path string) (model.Snapshot, []model.Problem) {
	s.readFile(path)
	s.publish()
	return s.Snapshot()
}

func problemOf(problems []model.Problem, name string) (model.Problem, bool) {
	i := slices.IndexFunc(problems, func(p model.Problem) bool { return p.Name == name })
	if i < 0 {
		return model.Problem{}, false
	}
	return problems[i], true
}

func sliceAddresses(snap model.Snapshot, name string) []string {
	for es := range snap.EndpointSlices.All() {
		if es.Name == name {
			var out []string
			for _, e := range es.Endpoints {
				out = append(out, e.Addresses...)
			}
			return out
		}
	}
	return nil
}

func TestLastGoodVersionIsKept(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "web.yaml")
	good := serviceYAML("a", 80) + "---\n" + endpointSliceYAML("a-1", "a") + "---\n" + serviceYAML("c", 80)
	writeFile(t, path, good)
	s := readOnce(t, dir)
	if _, problems := s.Snapshot(); len(problems) > 0 {
		t.Fatalf("problems on the good file: %v", problems)
	}

	t.Run("an unknown field keeps that document's last good object, the others take their new versions", func(t *testing.T) {
		broken := serviceYAML("a", 81) + "---\n" +
			strings.Replace(endpointSliceYAML("a-1", "a"), "addresses:", "adresses:", 1) + "---\n" + serviceYAML("c", 82)
		writeFile(t, path, broken)
		snap, problems := reread(s, path)
		if servicePort(snap, "a") != 81 || servicePort(snap, "c") != 82 {
			t.Errorf("services %v, want a:81 and c:82 (their new versions)", serviceSummary(snap))
		}
		if got := sliceAddresses(snap, "a-1"); len(got) == 0 {
			t.Errorf("EndpointSlice a-1 went offline, want its last good version kept")
		}
		// Held without its label (compact): the kept version keeps its Service.
		if _, found := s.ServiceEndpoints("default", "a"); len(found) != 1 || found[0].Labels != nil || snap.ServiceOfSlice(found[0]) != "a" {
			t.Errorf("the kept a-1 is not Service a's: ServiceEndpoints(a) = %v", found)
		}
		p, ok := problemOf(problems, path+"#2")
		if !ok {
			t.Fatalf("no problem for %s#2: %v", path, problems)
		}
		// The line of the file, not of the document, that holds the typo.
		t.Log(p.Reason)
		line := lineOf(t, broken, "adresses:")
		for _, want := range []string{"line " + line + ":", `unknown field "endpoints[0].adresses"`,
			"the last good version of EndpointSlice default/a-1 is kept"} {
			if !strings.Contains(p.Reason, want) {
				t.Errorf("reason %q does not say %q", p.Reason, want)
			}
		}
	})

	t.Run("invalid YAML names no object: the file's other last good objects are kept", func(t *testing.T) {
		broken := serviceYAML("a", 83) + "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: [a-1\n"
		writeFile(t, path, broken)
		snap, problems := reread(s, path)
		if servicePort(snap, "a") != 83 {
			t.Errorf("services %v, want a:83", serviceSummary(snap))
		}
		if len(sliceAddresses(snap, "a-1")) == 0 || servicePort(snap, "c") != 82 {
			t.Errorf("want EndpointSlice a-1 and Service c:82 kept; services %v", serviceSummary(snap))
		}
		p, ok := problemOf(problems, path+"#2")
		if !ok {
			t.Fatalf("no problem for %s#2: %v", path, problems)
		}
		t.Log(p.Reason)
		line := lineOf(t, broken, "metadata: [a-1")
		for _, want := range []string{"line " + line, "EndpointSlice default/a-1", "Service default/c", "kept"} {
			if !strings.Contains(p.Reason, want) {
				t.Errorf("reason %q does not say %q", p.Reason, want)
			}
		}
	})

	t.Run("fixed: the new version applies and the problem goes", func(t *testing.T) {
		fixed := serviceYAML("a", 84) + "---\n" + strings.Replace(endpointSliceYAML("a-1", "a"), "10.0.0.1", "10.0.0.9", 1)
		writeFile(t, path, fixed)
		snap, problems := reread(s, path)
		if len(problems) > 0 {
			t.Errorf("problems after the fix: %v", problems)
		}
		if servicePort(snap, "a") != 84 || servicePort(snap, "c") != 0 {
			t.Errorf("services %v, want a:84 and c gone (the fixed file no longer defines it)", serviceSummary(snap))
		}
		if got := sliceAddresses(snap, "a-1"); !slices.Contains(got, "10.0.0.9") {
			t.Errorf("EndpointSlice a-1 addresses %v, want the fixed version's 10.0.0.9", got)
		}
	})

	t.Run("deleting the file removes its objects", func(t *testing.T) {
		writeFile(t, path, "kind: [broken\n")
		if snap, _ := reread(s, path); servicePort(snap, "a") != 84 {
			t.Fatalf("services %v, want a:84 kept", serviceSummary(snap))
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		snap, problems := reread(s, path)
		if snap.Services.Len()+snap.EndpointSlices.Len() > 0 || len(problems) > 0 {
			t.Errorf("after delete: services %v, %d slices, problems %v", serviceSummary(snap), snap.EndpointSlices.Len(), problems)
		}
	})
}

func TestNeverGoodFileContributesNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.yaml")
	writeFile(t, path, strings.Replace(serviceYAML("a", 80), "ports:", "prots:", 1))
	s := readOnce(t, dir)
	snap, problems := s.Snapshot()
	if snap.Services.Len() > 0 {
		t.Errorf("services %v from a file never good", serviceSummary(snap))
	}
	p, ok := problemOf(problems, path+"#1")
	if !ok || !strings.Contains(p.Reason, "line 6: ") || !strings.HasSuffix(p.Reason, "document left out") {
		t.Errorf("problem %+v, want line 6 and the document left out", p)
	}
}

func TestOtherKindKeepsNothing(t *testing.T) {
	// A Service replaced by a Deployment is gone: the Deployment is left
	// out by design, not broken.
	dir := t.TempDir()
	path := filepath.Join(dir, "x.yaml")
	writeFile(t, path, serviceYAML("a", 80))
	s := readOnce(t, dir)
	writeFile(t, path, "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: a\n")
	if snap, _ := reread(s, path); snap.Services.Len() > 0 {
		t.Errorf("services %v, want none", serviceSummary(snap))
	}
}

func TestSplitterLines(t *testing.T) {
	data := "# head\n---\na: 1\n---   # c\n\nb: 2\n---junk\nc: 3\n---\n"
	split := splitter{data: []byte(data)}
	var got []string
	for {
		raw, ok := split.next()
		if !ok {
			break
		}
		if raw.err != nil {
			got = append(got, "error@"+strconv.Itoa(raw.errLine))
			continue
		}
		got = append(got, strconv.Itoa(raw.line)+":"+strings.TrimSpace(string(raw.data)))
	}
	// As apimachinery's YAMLReader: a malformed separator drops the document it ends.
	want := []string{"1:# head", "3:a: 1", "error@7", "8:c: 3"}
	if !slices.Equal(got, want) {
		t.Errorf("documents %q, want %q", got, want)
	}
}

func TestIdentify(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want string
	}{
		{"kind: Service\nmetadata:\n  name: a\nspec:\n  prots: []\n", "Service default/a"},
		{"kind: IngressClass\nmetadata:\n  name: c\n  namespace: x\n", "IngressClass c"},
		{"kind: EndpointSlice\nmetadata:\n  name: s\n  namespace: web\n", "EndpointSlice web/s"},
		{"kind: Deployment\nmetadata:\n  name: a\n", ""},
		{"kind: Service\nmetadata: [a\n", ""},
	} {
		got := ""
		if key := identify([]byte(tc.doc)); key != nil {
			got = key.String()
		}
		if got != tc.want {
			t.Errorf("identify(%q) = %q, want %q", tc.doc, got, tc.want)
		}
	}
}

func lineOf(t *testing.T, text, fragment string) string {
	t.Helper()
	for i, line := range strings.Split(text, "\n") {
		if strings.Contains(line, fragment) {
			return strconv.Itoa(i + 1)
		}
	}
	t.Fatalf("%q not in the text", fragment)
	return ""
}
