package syncer

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/apply"
	"github.com/restysync/restysync/agent/internal/testenv/agentnginx"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
	"github.com/restysync/restysync/agent/internal/testenv/syncbuf"
)

// Workers that cannot use the shared dir are reported by path, in the log
// and in State (which /readyz gives as its reason), instead of a silent
// wait; and a socket the agent cannot reach is a warning, not a debug line.
func TestWorkerAccessIsReported(t *testing.T) {
	prefix := nginxproc.ClosedPrefix(t)
	n, settings, _ := agentnginx.StartIn(t, prefix)
	var logs syncbuf.Buffer
	s := New(&fakeSource{}, n, Options{Render: settings, Metrics: &recordingMetrics{}}, slog.New(slog.NewTextHandler(&logs, nil)))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := s.sync(ctx); err != nil {
		t.Fatal(err)
	}
	st := s.State()
	if st.ConfigHash == "" {
		t.Fatalf("no config confirmed; log:\n%s", logs.String())
	}
	want := "nginx workers cannot write " + filepath.Join(prefix, "tmp/client_body")
	if len(st.WorkerAccess) == 0 || !strings.HasPrefix(st.WorkerAccess[0], want) {
		t.Errorf("State.WorkerAccess = %q, want it to start with %q", st.WorkerAccess, want)
	}
	if !strings.Contains(logs.String(), "path="+filepath.Join(prefix, "tmp/client_body")) {
		t.Errorf("the log names no path:\n%s", logs.String())
	}

	// A config socket that answers, but not as the config API does (a
	// worker that could not load the module that serves it).
	var socketLogs syncbuf.Buffer
	sock := filepath.Join(t.TempDir(), "restysync.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	broken := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "module 'restysync.api' not found", http.StatusInternalServerError)
	}), ReadHeaderTimeout: 5 * time.Second}
	go broken.Serve(l)
	defer broken.Close()
	closed := &apply.Nginx{SharedDir: t.TempDir(), Lua: apply.NewLuaClient(sock)}
	s2 := New(&fakeSource{}, closed, Options{Render: settings, Metrics: &recordingMetrics{}}, slog.New(slog.NewTextHandler(&socketLogs, nil)))
	if err := s2.sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s2.State().NginxUnreachable; !strings.Contains(got, "restysync.api' not found") {
		t.Errorf("State.NginxUnreachable = %q, want nginx's answer", got)
	}
	if !bytes.Contains([]byte(socketLogs.String()), []byte("level=WARN")) {
		t.Errorf("an unusable socket logged no warning:\n%s", socketLogs.String())
	}
}
