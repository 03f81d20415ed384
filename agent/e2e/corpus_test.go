package e2e

import (
	"encoding/json"
	"os/exec"
	"testing"

	"github.com/restysync/restysync/agent/internal/testenv/corpus"
)

// corpusMoves is how many Ingresses of ../shared/migration-corpus move
// from ingress-nginx unchanged. It may only go up: raise it with the work
// that makes more of them move, never lower it.
const corpusMoves = 90

// corpusDir finds the migration corpus (corpus.Dir).
func corpusDir(*testing.T) string { return corpus.Dir() }

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
