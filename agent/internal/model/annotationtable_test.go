package model

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/snippet"
)

// TestAnnotationTable checks each row: one per name, a known status, a
// family file for each key Build reads, a reason for each key ignored.
func TestAnnotationTable(t *testing.T) {
	seen := map[string]bool{}
	for _, row := range Annotations {
		if seen[row.Name] {
			t.Errorf("%s: two rows", row.Name)
		}
		seen[row.Name] = true
		if row.Doc == "" {
			t.Errorf("%s: no Doc", row.Name)
		}
		switch row.Status {
		case AnnotationSupported:
			if _, err := os.Stat(row.Family + ".go"); err != nil {
				t.Errorf("%s: family %q has no file model/%s.go", row.Name, row.Family, row.Family)
			}
		case AnnotationUnknown:
		case AnnotationRefused:
			if !isSnippet(row.Name) {
				t.Errorf("%s: refused, but not a snippet", row.Name)
			}
		case AnnotationIgnoredByIngressNginx:
			if row.Why == "" {
				t.Errorf("%s: ignored without Why", row.Name)
			}
		default:
			t.Errorf("%s: status %q", row.Name, row.Status)
		}
		if row.Status != AnnotationSupported && (row.Family != "" || row.ConfigMap != "" || row.Directive != "" || row.Ours) {
			t.Errorf("%s: not supported, but has a family, a ConfigMap key, a directive or Ours", row.Name)
		}
		// http-snippet is a ConfigMap key ingress-nginx ignores as an
		// annotation, and a snippet restysync refuses.
		got := AnnotationStatus(ingressNginxPrefix + row.Name)
		if got != row.Status && !(got == AnnotationRefused && isSnippet(row.Name)) {
			t.Errorf("AnnotationStatus(%s) = %q, the row says %q", ingressNginxPrefix+row.Name, got, row.Status)
		}
	}
}

// TestAnnotationDirectives checks the Directive column against the
// directives package snippet accepts as settings, and that each has a
// field in ProxySettings (proxy_ssl_verify sets two; applySnippetProxy
// reads it on its own).
func TestAnnotationDirectives(t *testing.T) {
	var directives []string
	for _, row := range Annotations {
		if row.Directive == "" {
			continue
		}
		directives = append(directives, row.Directive)
		if text, number := proxyField(&ProxySettings{}, row.Directive); text == nil && number == nil && row.Directive != "proxy_ssl_verify" {
			t.Errorf("%s: directive %s sets no field of ProxySettings (proxyField)", row.Name, row.Directive)
		}
	}
	slices.Sort(directives)
	want := slices.Sorted(slices.Values(snippet.SettingDirectives))
	if !slices.Equal(directives, want) {
		t.Errorf("the table's directives %v, snippet.SettingDirectives %v", directives, want)
	}
}

// TestAnnotationKeysNamedOnce checks that a key Build reads is written as
// a quoted string only in its row (model/annotationtable.go) and its
// family file (model/FAMILY.go): every other file names it by the
// constant the family file declares. Tests are not counted.
func TestAnnotationKeysNamedOnce(t *testing.T) {
	quoted := map[string][]string{} // `"name"` → files
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, row := range Annotations {
			if row.Status == AnnotationSupported && strings.Contains(string(data), `"`+row.Name+`"`) {
				quoted[row.Name] = append(quoted[row.Name], filepath.ToSlash(path))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range Annotations {
		for _, file := range quoted[row.Name] {
			if file != "../../internal/model/annotationtable.go" && file != "../../internal/model/"+row.Family+".go" {
				t.Errorf("%q is written in %s: name it by its family's constant (model/%s.go)", row.Name, file, row.Family)
			}
		}
	}
}

// readmeAnnotationName is a name in the first column of README.md's
// annotation tables ("`allowlist-`", an abbreviation, is not one).
var readmeAnnotationName = regexp.MustCompile("`([a-z0-9]+(?:-[a-z0-9]+)*)`")

// readmeAnnotations returns the annotation names of the tables of
// README.md's section "### Annotations" and its subsections: the tables
// whose header's first column is "Annotation".
func readmeAnnotations(t *testing.T) []string {
	f, err := os.Open("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names []string
	inSection, inTable := false, false
	scan := bufio.NewScanner(f)
	for scan.Scan() {
		line := scan.Text()
		switch {
		case line == "### Annotations":
			inSection = true
		case inSection && (strings.HasPrefix(line, "### ") || strings.HasPrefix(line, "## ")):
			inSection = false
		case !inSection:
		case strings.HasPrefix(line, "| Annotation |"):
			inTable = true
		case !strings.HasPrefix(line, "|"):
			inTable = false
		case inTable:
			first, _, _ := strings.Cut(strings.TrimPrefix(line, "|"), "|")
			for _, m := range readmeAnnotationName.FindAllStringSubmatch(first, -1) {
				names = append(names, m[1])
			}
		}
	}
	if err := scan.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}

// TestREADMEAnnotations checks README.md's annotation tables against the
// table: every key Build reads is documented there, and every key
// documented there is one Build reads.
func TestREADMEAnnotations(t *testing.T) {
	documented := readmeAnnotations(t)
	if len(documented) < 100 {
		t.Fatalf("found %d annotations in README.md's tables, want the section \"### Annotations\" and its tables", len(documented))
	}
	for _, name := range documented {
		if !supportedAnnotation(name) {
			t.Errorf("README.md documents annotation %s, which the table does not support", name)
		}
	}
	for _, row := range Annotations {
		if row.Status == AnnotationSupported && !slices.Contains(documented, row.Name) {
			t.Errorf("annotation %s is supported, but README.md's annotation tables do not document it", row.Name)
		}
	}
}

// TestAnnotationChecks: every supported row has its Check.
func TestAnnotationChecks(t *testing.T) {
	for _, row := range Annotations {
		if row.Status == AnnotationSupported && row.Check == nil {
			t.Errorf("%s: supported, no Check", row.Name)
		}
	}
}
