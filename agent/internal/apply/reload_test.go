package apply_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
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

// nginx's error log, on real nginx with the rendered config: every line
// reaches stderr at the stderr level (notice by default), only the error
// lines reach the file; TrimErrorLog empties the file past its limit while
// nginx's workers keep writing to it, and their next line lands at the
// start of the emptied file (O_APPEND, no hole of NUL bytes); a reload
// nginx rejects after a trim is still caught with its reason.
func TestErrorLogTrimmed(t *testing.T) {
	port := nginxproc.FreePort(t)
	// A server of the test's own whose location logs what it is asked to.
	server := fmt.Sprintf(`
    server {
        listen 127.0.0.1:%d;
        location /error { content_by_lua_block { ngx.log(ngx.ERR, "errorlog-test error ", ngx.var.arg_n, " ", string.rep("x", 200)) ngx.say("ok") } }
        location /warn { content_by_lua_block { ngx.log(ngx.WARN, "errorlog-test warn") ngx.say("ok") } }
    }
`, port)
	n, proc, _, good := agentnginx.StartEdited(t, nginxproc.TempPrefix(t), func(conf []byte) []byte {
		i := bytes.LastIndexByte(conf, '}')
		return append(append(append([]byte{}, conf[:i]...), server...), conf[i:]...)
	})
	path := filepath.Join(n.SharedDir, render.ErrorLogName)
	get := func(what string) {
		t.Helper()
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/%s", port, what))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	read := func() string {
		t.Helper()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}

	get("warn")
	for i := range 30 {
		get(fmt.Sprintf("error?n=%d", i))
	}
	file := read()
	if !strings.Contains(file, "errorlog-test error 29 ") || strings.Contains(file, "errorlog-test warn") || strings.Contains(file, "[notice]") {
		t.Errorf("the error log file should hold the error lines only, it holds:\n%s", file)
	}
	// The test copies nginx's stderr from a pipe: wait for the last line.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(proc.Stderr(), "errorlog-test error 29 ") && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	stderr := proc.Stderr()
	for _, want := range []string{"errorlog-test error 29 ", "[warn]", "errorlog-test warn", "[notice]"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("nginx's stderr lacks %q:\n%s", want, stderr)
		}
	}

	const limit = 4096
	if len(file) <= limit {
		t.Fatalf("the error log holds %d bytes, want more than %d for the test", len(file), limit)
	}
	if trimmed, err := n.TrimErrorLog(limit); !trimmed || err != nil {
		t.Fatalf("TrimErrorLog over the limit: %t, %v; want it emptied", trimmed, err)
	}
	get("error?n=after")
	file = read()
	if !strings.HasPrefix(file, "20") || !strings.Contains(file, "errorlog-test error after ") || strings.Count(file, "\n") != 1 {
		t.Errorf("after the trim the file holds %d bytes, want the one new line at its start:\n%q", len(file), file)
	}
	if trimmed, err := n.TrimErrorLog(limit); trimmed || err != nil {
		t.Errorf("TrimErrorLog under the limit: %t, %v; want it left alone", trimmed, err)
	}

	// The rejection of a reload is still read from the emptied file.
	if trimmed, _ := n.TrimErrorLog(0); !trimmed {
		t.Fatal("TrimErrorLog(0) of a file with a line left it")
	}
	if err := n.WriteConfig(append(append([]byte{}, good.Bytes...), "\nnot_a_directive on;\n"...)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.Reload(ctx, "some-new-hash"); !errors.Is(err, apply.ErrRejected) || !strings.Contains(err.Error(), "[emerg]") {
		t.Errorf("reload of a bad config after a trim: %v; want apply.ErrRejected with nginx's [emerg]", err)
	}
}
