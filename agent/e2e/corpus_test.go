package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// corpusMoves is how many Ingresses of ../shared/migration-corpus move
// from ingress-nginx unchanged. It may only go up: raise it with the work
// that makes more of them move, never lower it.
const corpusMoves = 90

// corpusDir finds the migration corpus, which lives beside the repository
// rather than in it (it is other projects' text): $RESTYSYNC_MIGRATION_CORPUS,
// else shared/migration-corpus beside the module's folder or one of its
// parents, or beside the repository a clone was made from (a clean clone
// in /tmp of the working repository). "" when there is none.
func corpusDir(t *testing.T) string {
	if dir := os.Getenv("RESTYSYNC_MIGRATION_CORPUS"); dir != "" {
		return dir
	}
	var roots []string
	if gomod, err := exec.Command("go", "env", "GOMOD").Output(); err == nil {
		roots = append(roots, filepath.Dir(strings.TrimSpace(string(gomod))))
	}
	if origin, err := exec.Command("git", "config", "--get", "remote.origin.url").Output(); err == nil {
		if dir := strings.TrimSpace(string(origin)); filepath.IsAbs(dir) {
			roots = append(roots, dir)
		}
	}
	for _, root := range roots {
		for dir := root; ; dir = filepath.Dir(dir) {
			candidate := filepath.Join(filepath.Dir(dir), "shared", "migration-corpus")
			if info, err := os.Stat(candidate); err == nil && info.IsDir() {
				return candidate
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	return ""
}

// TestCheckMigrationCorpus runs restysync check on the real Ingresses users
// bring from ingress-nginx and holds the number that move unchanged.
func TestCheckMigrationCorpus(t *testing.T) {
	dir := corpusDir(t)
	if dir == "" {
		const msg = "no shared/migration-corpus beside the repository or the one it was cloned from (set RESTYSYNC_MIGRATION_CORPUS)"
		if isCI() {
			t.Fatal(msg + " (CI=true)")
		}
		t.Skip(msg)
	}
	out, _ := exec.Command(agentBinary, "check", "--source", "file:"+dir, "-o", "json").Output()
	var report struct {
		Ingresses []struct {
			Ingress string `json:"ingress"`
			Moves   bool   `json:"moves"`
		} `json:"ingresses"`
		Summary struct {
			Ingresses int `json:"ingresses"`
			Moves     int `json:"moves"`
		} `json:"summary"`
	}
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("decoding the report: %v\n%s", err, out)
	}
	moving := 0
	for _, ing := range report.Ingresses {
		if ing.Moves {
			moving++
		}
	}
	if moving != report.Summary.Moves {
		t.Errorf("summary says %d move, the Ingresses %d", report.Summary.Moves, moving)
	}
	t.Logf("%d of %d Ingresses move unchanged", report.Summary.Moves, report.Summary.Ingresses)
	if report.Summary.Moves < corpusMoves {
		t.Errorf("%d of %d Ingresses move unchanged, fewer than the %d that did", report.Summary.Moves, report.Summary.Ingresses, corpusMoves)
	}
	if report.Summary.Moves > corpusMoves {
		t.Logf("more Ingresses move than corpusMoves says: raise it to %d", report.Summary.Moves)
	}
}
