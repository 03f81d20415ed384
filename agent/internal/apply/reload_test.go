package apply_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/apply"
	"github.com/restysync/restysync/agent/internal/render"
	"github.com/restysync/restysync/agent/internal/testenv/agentnginx"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// A config nginx rejects on SIGHUP is reported as not confirmed, with
// nginx's own reason, while nginx keeps running the previous one.
func TestReloadRejectedWithNginxReason(t *testing.T) {
	n, _, good := agentnginx.Start(t)

	for _, tc := range []struct {
		name, want string
		bad        []byte
	}{
		{"a directive nginx does not know", "[emerg]",
			append(append([]byte{}, good.Bytes...), "\nnot_a_directive on;\n"...)},
		// init_by_lua failing is only an [error] line, but nginx keeps the
		// old config all the same.
		{"init_by_lua failing", "init_by_lua error",
			[]byte(strings.Replace(string(good.Bytes), `require("restysync").init(`, `error("boom") require("restysync").init(`, 1))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := n.WriteConfig(tc.bad); err != nil {
				t.Fatal(err)
			}
			// The rejection is read from nginx's log as it happens: the
			// call must not wait for the minute-long confirmation bound.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := n.Reload(ctx, "some-new-hash")
			if ctx.Err() != nil {
				t.Fatalf("the rejected reload was noticed only at the timeout: %v", err)
			}
			if !errors.Is(err, apply.ErrRejected) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("reload error %v; want apply.ErrRejected with nginx's reason %q", err, tc.want)
			}
			st, err := n.Lua.Status(context.Background())
			if err != nil || st.ConfigHash != good.Hash {
				t.Errorf("after the rejected reload nginx runs %q (%v), want the previous %q", st.ConfigHash, err, good.Hash)
			}
		})
	}
}

// stageMetrics counts the reloads and keeps the validators of the
// rejections the stage reports.
type stageMetrics struct {
	reloads  int
	rejected []string
}

func (m *stageMetrics) Pushed(string, int, time.Duration, error) {}
func (m *stageMetrics) Reloaded(time.Duration, error)            { m.reloads++ }
func (m *stageMetrics) ReloadUnconfirmed()                       {}
func (m *stageMetrics) ValidationFailed(validator string)        { m.rejected = append(m.rejected, validator) }

// A config nginx rejects on reload never stays on disk: the last good
// nginx.conf is put back at once, so a later cold start of nginx meets the
// config it ran, and the rejected hash is remembered until the next change.
// (Real nginx: it is nginx that rejects.)
func TestRejectedReloadPutsTheGoodConfigBack(t *testing.T) {
	n, settings, good := agentnginx.Start(t)
	prefix := settings.SharedDir

	rec := &stageMetrics{}
	s := apply.NewStage(n, settings, 5*time.Second, false, rec, slog.New(slog.DiscardHandler))
	bad := render.Config{Hash: "rejected", Bytes: append(append([]byte{}, good.Bytes...), "\nnot_a_directive on;\n"...)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := s.Reload(ctx, bad)
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
	if !errors.Is(s.Rejected(bad.Hash), apply.ErrRejected) {
		t.Errorf("rejected %q: %v, want ErrRejected: the same config is not tried again until something changes", bad.Hash, s.Rejected(bad.Hash))
	}
	if out, err := nginxproc.Test(t, prefix); err != nil {
		t.Errorf("nginx -t on the file left on disk: %v\n%s", err, out)
	}
	if rec.reloads != 1 || len(rec.rejected) != 1 || rec.rejected[0] != "nginx" {
		t.Errorf("metrics: %d reloads, validation failures %v; want 1 and [nginx]", rec.reloads, rec.rejected)
	}
}
