package file

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
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
			if doc.obj == nil || doc.key().name == "" {
				t.Errorf("document %d: incomplete %+v", doc.index, doc)
			}
			if (doc.key().namespace == "") != (doc.key().kind == source.KindIngressClass) {
				t.Errorf("document %d: %s has namespace %q", doc.index, doc.key().kind, doc.key().namespace)
			}
		}
		for _, p := range problems {
			if p.path != "f.yaml" || p.index < 1 || p.reason == "" || len(p.reason) > 2*maxReasonLen {
				t.Errorf("bad problem %+v", p)
			}
		}
	})
}

// FuzzDecodeObject checks that decodeObject, which parses a document's
// YAML once, decodes every document as apimachinery's strict YAML decoder
// does: the same object, kind and error.
func FuzzDecodeObject(f *testing.F) {
	for _, seed := range []string{
		serviceYAML("a", 80), ingressYAML("b", "a"), endpointSliceYAML("a-1", "a"),
		tlsSecretYAML, ingressClassYAML, configMapYAML,
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  name: b\ndata: {x: y}\n",
		"apiVersion: v1\nkind: Service\nmetadata:\n  name: a\nspec:\n  portz: []\n",
		"apiVersion: v1\nkind: Service\nmetadata:\n  name: a\n  labels: {x: 1}\n",
		"apiVersion: extensions/v1beta1\nkind: Ingress\nmetadata:\n  name: a\n",
		"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: a\n",
		"kind: Service\nmetadata:\n  name: a\n",
		"apiVersion: v1\nmetadata:\n  name: a\n",
		"apiVersion: 1\nkind: Service\n",
		`{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a"}, "spec": {"ports": [{"port": 80}]}}`,
		`{"apiVersion": "v1", "kind": "Service", "kind": "Secret"}`,
		"apiVersion: v1\nkind: Service\nmetadata:\n  name: a\nspec:\n  ports:\n    - port: \"80\"\n",
		"apiVersion: v1\nkind: Service\nmetadata: [1, 2]\n",
		"- a\n- b\n",
		"apiVersion: v1\nkind: Service\n\tmetadata: x\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, gotKind, gotErr := decodeObject(raw)
		want, wantKind, wantErr := manifestDecoder.Decode(raw, nil, nil)
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Fatalf("error %v, apimachinery's %v", gotErr, wantErr)
		}
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotKind, wantKind) {
			t.Fatalf("decoded %#v (%v), apimachinery %#v (%v)", got, gotKind, want, wantKind)
		}
	})
}
