package file

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/restysync/restysync/agent/internal/model"
)

// Hostile folders: files that are huge, bombs, binary or not UTF-8 sit
// beside good manifests. Each bad file or document is a Problem naming
// "path#N" and the reason, the good manifests are still served, and
// reading the folder allocates a bounded amount of memory (measured from
// the heap statistics, with wide margins; no wall clock).

const mib = 1 << 20

// goodManifests is what every hostile folder also holds, in good.yaml.
var goodManifests = serviceYAML("web", 80) + "---\n" + ingressYAML("web", "web") + "---\n" + endpointSliceYAML("web-1", "web")

var goodObjects = []string{"Ingress default/web", "Service default/web", "EndpointSlice default/web-1"}

// aliasBomb is the classic "billion laughs": ten levels of nine aliases,
// 9^9 copies of "lol" once expanded.
func aliasBomb() string {
	var b strings.Builder
	b.WriteString(configMapYAML + "  bomb: x\nx:\n")
	b.WriteString(`  l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]` + "\n")
	for i := 1; i <= 9; i++ {
		refs := strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d,", i-1), 9), ",")
		fmt.Fprintf(&b, "  l%d: &l%d [%s]\n", i, i, refs)
	}
	return b.String()
}

// wideAliasBomb aliases one 1 MiB string 300 times in a flat list: few
// enough aliases per node that the YAML library's own ratio check lets it
// through, and it would expand to 300 MiB of JSON (measured: 1.6 GiB
// allocated, 13 s) without MaxAliasExpansion.
func wideAliasBomb() string {
	return configMapYAML + "x:\n  s: &s \"" + strings.Repeat("y", mib) + "\"\n  c: [" +
		strings.TrimSuffix(strings.Repeat("*s,", 300), ",") + "]\n"
}

// readBounded reads dir the way Start does, and fails if that allocates
// more than limit bytes in all, or keeps more than 32 MiB once done.
func readBounded(t *testing.T, dir string, limit uint64, opts ...Option) *Source {
	t.Helper()
	const retainLimit = 32 * mib
	s := New(dir, opts...)
	runtime.GC()
	var before, after, retained runtime.MemStats
	runtime.ReadMemStats(&before)
	s.readAll()
	s.publish()
	runtime.ReadMemStats(&after)
	runtime.GC()
	runtime.ReadMemStats(&retained)
	runtime.KeepAlive(s)
	allocated := after.TotalAlloc - before.TotalAlloc
	kept := int64(retained.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("reading the folder allocated %.1f MiB and keeps %.1f MiB", float64(allocated)/mib, float64(kept)/mib)
	if allocated > limit {
		t.Errorf("reading the folder allocated %d bytes, more than the bound %d", allocated, limit)
	}
	if kept > retainLimit {
		t.Errorf("the source keeps %d bytes after reading the folder, more than the bound %d", kept, retainLimit)
	}
	return s
}

func TestHostileFiles(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	binary := make([]byte, 64<<10)
	rng.Read(binary)

	tests := []struct {
		name string
		// write puts the hostile file(s) into dir.
		write func(t *testing.T, dir string)
		// want are the problems, by name relative to dir.
		want []wantProblem
		// limit bounds the bytes allocated reading the folder.
		limit uint64
	}{
		{
			name: "1 GiB sparse file",
			write: func(t *testing.T, dir string) {
				f, err := os.Create(filepath.Join(dir, "huge.yaml"))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if err := f.Truncate(1 << 30); err != nil { // a hole: no disk used
					t.Fatal(err)
				}
			},
			want:  []wantProblem{{"huge.yaml", fmt.Sprintf("file is 1073741824 bytes, more than the limit of %d; file left out", DefaultMaxFileSize)}},
			limit: 4 * mib,
		},
		{
			name:  "billion laughs",
			write: func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "bomb.yaml"), aliasBomb()) },
			want:  []wantProblem{{"bomb.yaml#1", "YAML aliases expand the document by more than"}},
			limit: 16 * mib,
		},
		{
			name:  "wide alias bomb",
			write: func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "bomb.yaml"), wideAliasBomb()) },
			want:  []wantProblem{{"bomb.yaml#1", fmt.Sprintf("YAML aliases expand the document by more than %d bytes (the limit); document left out", MaxAliasExpansion)}},
			limit: 64 * mib,
		},
		{
			name: "alias inside its own anchor",
			write: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, "loop.yaml"), configMapYAML+"x: &loop [a, *loop]\n")
			},
			want:  []wantProblem{{"loop.yaml#1", "YAML alias *loop refers to the node that holds it; document left out"}},
			limit: 4 * mib,
		},
		{
			name: "aliases within the limit are fine",
			write: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, "anchors.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: anchors\n"+
					"  labels: &labels {app: web, tier: \"*front*\"}\n  annotations: *labels\ndata: *labels\n")
			},
			limit: 4 * mib,
		},
		{
			name: "invalid UTF-8",
			write: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, "latin1.yaml"), serviceYAML("ok", 80)+"---\n"+strings.Replace(configMapYAML, "a: b", "a: caf\xe9", 1))
			},
			want:  []wantProblem{{"latin1.yaml#2", "UTF-8"}},
			limit: 4 * mib,
		},
		{
			name:  "binary file",
			write: func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "blob.yaml"), string(binary)) },
			want:  []wantProblem{{"blob.yaml#1", "document left out"}},
			limit: 16 * mib,
		},
		{
			name: "more documents than the limit",
			write: func(t *testing.T, dir string) {
				var b strings.Builder
				for i := range DefaultMaxDocuments + 100 {
					fmt.Fprintf(&b, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c%d\n---\n", i)
				}
				writeFile(t, filepath.Join(dir, "many.yaml"), b.String())
			},
			want: []wantProblem{{fmt.Sprintf("many.yaml#%d", DefaultMaxDocuments+1),
				fmt.Sprintf("the file has more than %d documents; this one and the rest are left out", DefaultMaxDocuments)}},
			limit: 512 * mib, // ~25 KiB per decoded document, measured
		},
		{
			name: "a million empty documents",
			write: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, "empty.yaml"), strings.Repeat("---\n#\n", 1_000_000)+serviceYAML("last", 80))
			},
			limit: 512 * mib, // ~200 bytes per empty document, measured; the file size caps it
		},
		{
			name: "three million separators, over the size limit",
			write: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, "separators.yaml"), strings.Repeat("---\n", 3*mib))
			},
			want:  []wantProblem{{"separators.yaml", "more than the limit of 8388608; file left out"}},
			limit: 4 * mib,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "good.yaml"), goodManifests)
			tt.write(t, dir)
			s := readBounded(t, dir, tt.limit)

			names := objectNames(s)
			for _, want := range goodObjects {
				if !slices.Contains(names, want) {
					t.Errorf("good manifest %s not served beside the hostile file; served: %v", want, clipList(names))
				}
			}
			_, problems := s.Snapshot()
			problems = relativeProblems(dir, problems)
			checkHostileProblems(t, problems, tt.want)
		})
	}
}

// checkHostileProblems fails unless problems are exactly one per want, in
// order, each naming its file (and document) and holding its reason, each
// short and valid UTF-8.
func checkHostileProblems(t *testing.T, problems []model.Problem, want []wantProblem) {
	t.Helper()
	if len(problems) != len(want) {
		t.Fatalf("%d problems, want %d:\n%s", len(problems), len(want), problemLines(problems))
	}
	for i, p := range problems {
		if p.Kind != "File" || p.Name != want[i].name || !strings.Contains(p.Reason, want[i].reason) {
			t.Errorf("problem %d = %s, want File %s: ...%s...", i, p, want[i].name, want[i].reason)
		}
		if len(p.Reason) > 2*maxReasonLen || !utf8.ValidString(p.Reason) {
			t.Errorf("problem %d: reason of %d bytes, valid UTF-8 %t: %q", i, len(p.Reason), utf8.ValidString(p.Reason), p.Reason)
		}
	}
}

func problemLines(problems []model.Problem) string {
	var b strings.Builder
	for _, p := range problems {
		fmt.Fprintf(&b, "  %s\n", p)
	}
	return b.String()
}

func clipList(names []string) []string {
	if len(names) > 10 {
		return append(slices.Clone(names[:10]), fmt.Sprintf("… %d more", len(names)-10))
	}
	return names
}

// TestHostileAliasesAreMeasuredNotExpanded checks checkAliases directly:
// the bytes counted grow with the expansion, the work with the input.
func TestHostileAliasesAreMeasuredNotExpanded(t *testing.T) {
	tests := []struct {
		name, doc string
		want      string
	}{
		{"no alias", serviceYAML("a", 80), ""},
		{"a '*' that is no alias", "host: \"*.example.com\"\n", ""},
		{"small anchors", "a: &a {b: c}\nd: *a\ne: *a\n", ""},
		{"just under the limit", "a: &a \"" + strings.Repeat("z", MaxAliasExpansion/2-2*aliasNodeCost) + "\"\nb: [*a, *a]\n", ""},
		{"just over the limit", "a: &a \"" + strings.Repeat("z", MaxAliasExpansion/2) + "\"\nb: [*a, *a, *a]\n", "YAML aliases expand the document"},
		{"billion laughs", aliasBomb(), "YAML aliases expand the document"},
		{"self reference", "a: &a {b: *a}\n", "YAML alias *a refers to the node that holds it"},
		{"not YAML", "a: [\n", ""}, // left to the decoder's own error
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := checkAliases([]byte(tt.doc)); (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("checkAliases = %q, want %q", got, tt.want)
			}
		})
	}
}
