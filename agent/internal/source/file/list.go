package file

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// A list is one document holding objects in its items: "kind: List" as
// `kubectl get -o yaml` writes it, or a typed list (IngressList) as the
// API server returns it. Each item is read as a document of its own,
// named in a Problem by the list's document and its place in items.

// listItems returns the items of raw when raw is a list. Only a document
// that mentions "List" is parsed for it: the others are decoded once.
func listItems(raw []byte) ([]json.RawMessage, bool) {
	if !bytes.Contains(raw, []byte("List")) {
		return nil, false
	}
	data, err := utilyaml.ToJSON(raw)
	if err != nil {
		return nil, false // decodeDocument reports it
	}
	var list struct {
		Kind  string            `json:"kind"`
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(data, &list); err != nil || !strings.HasSuffix(list.Kind, "List") || list.Items == nil {
		return nil, false
	}
	return list.Items, true
}

// decodeList decodes the items of the list that is document index of path.
func decodeList(path string, index int, items []json.RawMessage) ([]document, []problem) {
	var docs []document
	var problems []problem
	for i, item := range items {
		doc, reason, byDesign := decodeDocument(item)
		if reason != "" {
			p := problem{path: path, index: index, reason: fmt.Sprintf("items[%d]: %s", i, reason), failed: !byDesign}
			if p.failed {
				p.defines = identify(item)
			}
			problems = append(problems, p)
			continue
		}
		doc.index = index
		docs = append(docs, doc)
	}
	return docs, problems
}
