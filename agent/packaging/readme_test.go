package packaging

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

var update = flag.Bool("update", false, "rewrite the generated section of charts/restysync/README.md")

const (
	valuesStart = "<!-- values:start (generated from values.yaml by agent/packaging: go test -run TestChartREADME -update) -->"
	valuesEnd   = "<!-- values:end -->"
)

// valueDoc is one documented value of values.yaml.
type valueDoc struct {
	key     string // dotted path
	kind    string // YAML type of the default
	def     string // default, as JSON
	comment string
}

// documentValues walks values.yaml and returns every key with its comment
// (the comment lines right above it), leaves and sections alike, in file
// order. Lists and empty maps are leaves; a key without a comment is an
// error.
func documentValues(src []byte) ([]valueDoc, []string, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, nil, err
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, nil, fmt.Errorf("values.yaml is not a mapping")
	}
	var (
		docs    []valueDoc
		missing []string
	)
	var walk func(prefix string, m *yaml.Node)
	walk = func(prefix string, m *yaml.Node) {
		for i := 0; i < len(m.Content); i += 2 {
			k, v := m.Content[i], m.Content[i+1]
			key := k.Value
			if strings.ContainsAny(key, "./") {
				key = fmt.Sprintf("%q", key)
			}
			if prefix != "" {
				key = prefix + "." + key
			}
			comment := cleanComment(k.HeadComment)
			if comment == "" {
				missing = append(missing, key)
			}
			if v.Kind == yaml.MappingNode && len(v.Content) > 0 {
				docs = append(docs, valueDoc{key: key, kind: "object", comment: comment})
				walk(key, v)
				continue
			}
			var val any
			if err := v.Decode(&val); err != nil {
				missing = append(missing, key+" (does not decode: "+err.Error()+")")
				continue
			}
			def, _ := json.Marshal(val)
			docs = append(docs, valueDoc{key: key, kind: yamlKind(val), def: string(def), comment: comment})
		}
	}
	walk("", doc.Content[0])
	return docs, missing, nil
}

func cleanComment(c string) string {
	var lines []string
	for _, l := range strings.Split(c, "\n") {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "#"))
		if l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, " ")
}

func yamlKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "bool"
	case int, int64, uint64, float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "list"
	default:
		return "object"
	}
}

// valuesTable renders the documented values as a Markdown table.
func valuesTable(docs []valueDoc) string {
	var b strings.Builder
	b.WriteString("| Key | Type | Default | Description |\n|---|---|---|---|\n")
	esc := strings.NewReplacer("|", `\|`, "\n", " ")
	for _, d := range docs {
		def := ""
		if d.kind != "object" || d.def != "" {
			def = "`" + esc.Replace(d.def) + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", d.key, d.kind, def, esc.Replace(d.comment))
	}
	return b.String()
}

// Every value in values.yaml has a comment, and the chart README's table of
// values is generated from those comments: this test fails when the README
// is stale, and -update rewrites it.
func TestChartREADME(t *testing.T) {
	docs, missing := chartValueDocs(t)
	for _, key := range missing {
		t.Errorf("values.yaml: %s has no comment", key)
	}
	if len(docs) < 50 {
		t.Fatalf("only %d values documented: the walk is broken", len(docs))
	}

	readmePath := filepath.Join(chartDir(), "README.md")
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	start := bytes.Index(readme, []byte(valuesStart))
	end := bytes.Index(readme, []byte(valuesEnd))
	if start < 0 || end < start {
		t.Fatalf("%s has no %q ... %q section", readmePath, valuesStart, valuesEnd)
	}
	want := make([]byte, 0, len(readme))
	want = append(want, readme[:start+len(valuesStart)]...)
	want = append(want, "\n\n"+valuesTable(docs)+"\n"...)
	want = append(want, readme[end:]...)
	if bytes.Equal(readme, want) {
		return
	}
	if *update {
		if err := os.WriteFile(readmePath, want, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("updated %s", readmePath)
		return
	}
	t.Errorf("%s is stale: run `cd agent/packaging && go test -run TestChartREADME -update`", readmePath)
}

// Every value in values.yaml is in values.schema.json (the schema refuses
// unknown keys, so a value missing from it could not even be set).
func TestChartSchemaCoversValues(t *testing.T) {
	docs, _ := chartValueDocs(t)
	raw, err := os.ReadFile(filepath.Join(chartDir(), "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	for _, d := range docs {
		node := schema
		for _, part := range strings.Split(d.key, ".") {
			props, _ := node["properties"].(map[string]any)
			next, ok := props[strings.Trim(part, `"`)].(map[string]any)
			if !ok {
				if node["type"] == "object" && node["properties"] == nil {
					break // a free-form object (nodeSelector, resources, ...)
				}
				t.Errorf("values.schema.json has no %s", d.key)
				break
			}
			node = next
		}
	}
}

// chartValueDocs returns the values of values.yaml with their comments,
// and the keys that have none.
func chartValueDocs(t *testing.T) (docs []valueDoc, missing []string) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(chartDir(), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs, missing, err = documentValues(src)
	if err != nil {
		t.Fatal(err)
	}
	return docs, missing
}
