package syncer

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
	"github.com/restysync/restysync/agent/internal/source"
	"github.com/restysync/restysync/agent/internal/testenv/agentnginx"
	"github.com/restysync/restysync/agent/internal/testenv/syncbuf"
)

// A reload nginx is slow to take (here: its master is stopped, and
// resumed later) is waited for, not judged: no Ingress is quarantined, the
// config stays on disk for nginx to load, no second signal is sent, and
// the config is adopted once nginx runs it. (Real nginx.)
func TestSlowReloadIsNotRejected(t *testing.T) {
	n, settings, _ := agentnginx.Start(t)
	n.ConfirmTimeout = 300 * time.Millisecond
	pid, err := n.MasterPID()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) }) // before nginx is stopped

	src := &fakeSource{snap: oneIngressSnapshot("127.0.0.1")}
	rec := &recordingMetrics{}
	var logs syncbuf.Buffer
	s := New(src, n, Options{Render: settings, Metrics: rec, IngressClass: "restysync", Targets: model.Targets{Local: true}}, slog.New(slog.NewTextHandler(&logs, nil)))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := s.sync(ctx); err != nil {
		t.Fatalf("first sync: %v\n%s", err, logs.String())
	}

	// An annotation that needs nginx directives: a reload.
	snap := oneIngressSnapshot("127.0.0.1")
	snap.Ingresses.At(0).Annotations = map[string]string{"nginx.ingress.kubernetes.io/proxy-body-size": "8m"}
	src.snap = snap
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	for round := range 2 { // the second sync sends no second signal
		s.changed(source.Change{Kind: source.KindIngress})
		if err := s.sync(ctx); err != nil {
			t.Fatalf("sync %d while nginx is stopped: %v", round, err)
		}
	}
	want := s.lastConfig
	st := s.State()
	if len(st.Quarantined) > 0 || s.guard.Bisecting() || s.stage.Rejected(want.Hash) != nil {
		t.Fatalf("a slow reload was judged: quarantined %v, bisecting %v, rejected: %v", st.Quarantined, s.guard.Bisecting(), s.stage.Rejected(want.Hash))
	}
	if rec.unconfirmed != 1 || len(rec.rejected) != 0 {
		t.Errorf("metrics: %d unconfirmed reloads, validation failures %v; want 1 and none", rec.unconfirmed, rec.rejected)
	}
	onDisk, err := os.ReadFile(filepath.Join(settings.SharedDir, render.ConfigName))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(onDisk, want.Bytes) {
		t.Error("the new nginx.conf was taken off disk while nginx had yet to load it")
	}

	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// Resumed, the master starts new workers while the old ones still
	// answer for a moment: a sync then may see the old config and wait for
	// the next report, as the loop does when NeedsSync says so.
	deadline := time.Now().Add(30 * time.Second)
	for st = s.State(); !st.Applied || st.ConfigHash != want.Hash; st = s.State() {
		if time.Now().After(deadline) {
			t.Fatalf("after nginx resumed: config %s applied %v, want %s\n%s", st.ConfigHash, st.Applied, want.Hash, logs.String())
		}
		if s.stage.NeedsSync(ctx, s.lastConfig.Hash) {
			if err := s.sync(ctx); err != nil {
				t.Fatal(err)
			}
			continue
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(st.Quarantined) > 0 || len(st.Problems) > 0 {
		t.Errorf("quarantined %v, problems %v; want none", st.Quarantined, st.Problems)
	}
	var served bool
	for srv := range st.Model.Servers.All() {
		served = served || srv.Host == "web.test"
	}
	if !served {
		t.Error("web.test is not served")
	}
}
