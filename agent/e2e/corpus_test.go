package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// corpusMoves is how many Ingresses of ../shared/migration-corpus move
// from ingress-nginx unchanged. It may only go up: raise it with the work
// that makes more of them move, never lower it.
const corpusMoves = 66

// corpusDir finds the migration corpus: $RESTYSYNC_MIGRATION_CORPUS, else
// ../shared/migration-corpus beside the repository.
func corpusDir(t *testing.T) string {
	if dir := os.Getenv("RESTYSYNC_MIGRATION_CORPUS"); dir != "" {
		return dir
	}
	root, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(filepath.Dir(string(root[:len(root)-1])), "..", "shared", "migration-corpus")
}

// TestCheckMigrationCorpus runs restysync check on the real Ingresses users
// bring from ingress-nginx and holds the number that move unchanged.
func TestCheckMigrationCorpus(t *testing.T) {
	dir := corpusDir(t)
	if _, err := os.Stat(dir); err != nil {
		// The corpus lives beside the repository, not in it (it is other
		// projects' text); a checkout without it cannot run this test.
		t.Skipf("no migration corpus at %s (set RESTYSYNC_MIGRATION_CORPUS): %v", dir, err)
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
