package syncer

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/model"
)

// Every problem, from the source or the model, is logged once when it
// appears, not on every sync, and again if it comes back after a fix.
func TestProblemsLoggedOnce(t *testing.T) {
	var logs strings.Builder
	s := New(nil, nil, Options{}, slog.New(slog.NewTextHandler(&logs, nil)))
	file := model.Problem{Kind: "File", Name: "/m/x.yaml#1", Reason: "unknown kind Pod"}
	ing := model.Problem{Kind: "Ingress", Namespace: "default", Name: "a", Reason: "bad path"}
	for range 3 {
		s.reportProblems([]model.Problem{file, ing})
	}
	if got := strings.Count(logs.String(), "level=WARN"); got != 2 {
		t.Fatalf("%d warnings, want 2:\n%s", got, logs.String())
	}
	for _, want := range []string{"x.yaml#1", "Ingress default/a", "bad path"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log does not name %q:\n%s", want, logs.String())
		}
	}
	s.reportProblems([]model.Problem{ing})
	s.reportProblems([]model.Problem{file, ing})
	if got := strings.Count(logs.String(), "level=WARN"); got != 3 {
		t.Errorf("%d warnings after the file problem came back, want 3:\n%s", got, logs.String())
	}
}
