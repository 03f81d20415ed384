package syncer

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// pipelineOrder is the one order of the stages the syncer drives; every
// package doc that names stages names them in this order.
var pipelineOrder = []string{"source", "model", "render", "plan", "apply"}

// stageChain matches "a → b → c" in a doc comment (the words may wrap).
var stageChain = regexp.MustCompile(`[\w./]+(?:\s*(?://\s*)?→\s*(?://\s*)?[\w./]+)+`)

// Every package doc agrees on the pipeline's order, only apply calls itself
// its last stage, and only the sources its first.
func TestPackageDocsAgreeOnPipelineOrder(t *testing.T) {
	docs := packageDocs(t, "../..", "../../../lua")
	if len(docs) < 15 {
		t.Fatalf("found %d package docs; the walk is wrong", len(docs))
	}
	for pkg, doc := range docs {
		for _, chain := range stageChain.FindAllString(doc, -1) {
			var stages []string
			for _, word := range strings.Split(chain, "→") {
				word = strings.Trim(strings.TrimPrefix(strings.TrimSpace(word), "//"), " \n.,;:()")
				if slices.Contains(pipelineOrder, word) {
					stages = append(stages, word)
				}
			}
			if len(stages) < 2 {
				continue // not a chain of stages ("model → nginx.conf")
			}
			start := slices.Index(pipelineOrder, stages[0])
			if end := start + len(stages); end > len(pipelineOrder) || !slices.Equal(pipelineOrder[start:end], stages) {
				t.Errorf("package %s names the pipeline %q; the order is %s", pkg, chain, strings.Join(pipelineOrder, " → "))
			}
		}
		if strings.Contains(doc, "is the last stage") && filepath.Base(pkg) != "apply" {
			t.Errorf("package %s calls itself the last stage; apply is", pkg)
		}
		if strings.Contains(doc, "is the first stage") && filepath.Base(pkg) != "source" {
			t.Errorf("package %s calls itself the first stage; source is", pkg)
		}
	}
}

// packageDocs returns the package doc comments of every package under the
// roots, by folder.
func packageDocs(t *testing.T, roots ...string) map[string]string {
	t.Helper()
	docs := map[string]string{}
	for _, root := range roots {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				return err
			}
			if f.Doc != nil {
				docs[filepath.Dir(path)] += f.Doc.Text()
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return docs
}
