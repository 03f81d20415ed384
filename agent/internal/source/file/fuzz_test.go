package file

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/restysync/restysync/agent/internal/source"
)

// FuzzDecode feeds arbitrary bytes to the manifest decoder: it must not
// panic, and whatever it returns must be usable.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		serviceYAML("a", 80) + "---\n" + ingressYAML("b", "a") + "---\n" + endpointSliceYAML("a-1", "a"),
		tlsSecretYAML + "---\n" + ingressClassYAML + "---\n" + configMapYAML,
		"---\n---\n# comment\n",
	} {
		f.Add([]byte(seed))
	}
	examples, _ := filepath.Glob(filepath.Join("..", "..", "..", "..", "examples", "local", "*.yaml"))
	for _, path := range examples {
		if data, err := os.ReadFile(path); err == nil {
			f.Add(data)
		}
	}

	const maxDocuments = 50
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, problems := decodeManifests("f.yaml", data, maxDocuments)
		if len(docs) > maxDocuments {
			t.Errorf("%d documents, more than the cap of %d", len(docs), maxDocuments)
		}
		last := 0
		for _, doc := range docs {
			if doc.index <= last {
				t.Errorf("document index %d after %d", doc.index, last)
			}
			last = doc.index
			if doc.obj == nil || doc.key.name == "" {
				t.Errorf("document %d: incomplete %+v", doc.index, doc)
			}
			if (doc.key.namespace == "") != (doc.key.kind == source.KindIngressClass) {
				t.Errorf("document %d: %s has namespace %q", doc.index, doc.key.kind, doc.key.namespace)
			}
		}
		for _, p := range problems {
			if p.path != "f.yaml" || p.index < 1 || p.reason == "" || len(p.reason) > 2*maxReasonLen {
				t.Errorf("bad problem %+v", p)
			}
		}
	})
}
