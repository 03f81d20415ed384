package syncer

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/apply"
	"github.com/restysync/restysync/agent/internal/render"
	"github.com/restysync/restysync/agent/internal/testenv/agentnginx"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// A config nginx rejects on reload never stays on disk: the last good
// nginx.conf is put back at once, so a later cold start of nginx meets the
// config it ran, and the rejected hash is remembered until the next change.
// (Real nginx: it is nginx that rejects.)
func TestRejectedReloadPutsTheGoodConfigBack(t *testing.T) {
	n, settings, good := agentnginx.Start(t)
	prefix := settings.SharedDir

	rec := &recordingMetrics{}
	s := New(&fakeSource{}, n, Options{Render: settings, Metrics: rec}, slog.New(slog.DiscardHandler))
	bad := render.Config{Hash: "rejected", Bytes: append(append([]byte{}, good.Bytes...), "\nnot_a_directive on;\n"...)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := s.reload(ctx, bad)
	if !errors.Is(err, apply.ErrRejected) {
		t.Fatalf("reload of a config nginx rejects: %v, want ErrRejected", err)
	}
	onDisk, err := os.ReadFile(filepath.Join(prefix, render.ConfigName))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(onDisk, good.Bytes) {
		t.Error("the rejected nginx.conf stayed on disk; want the last good one put back")
	}
	if !errors.Is(s.configs.Rejected(bad.Hash), apply.ErrRejected) {
		t.Errorf("rejected %q: %v, want ErrRejected: the same config is not tried again until something changes", bad.Hash, s.configs.Rejected(bad.Hash))
	}
	if out, err := nginxproc.Test(t, prefix); err != nil {
		t.Errorf("nginx -t on the file left on disk: %v\n%s", err, out)
	}
	if rec.reloads != 1 || len(rec.rejected) != 1 || rec.rejected[0] != "nginx" {
		t.Errorf("metrics: %d reloads, validation failures %v; want 1 and [nginx]", rec.reloads, rec.rejected)
	}
}
