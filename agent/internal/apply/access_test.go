package apply_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/apply"
	"github.com/restysync/restysync/agent/internal/luaapi"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/testenv/agentnginx"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// nginx loads every Lua module in the master: workers that cannot read the
// shared dir still serve the config API and route requests, and the access
// check names what they cannot use.
func TestWorkersThatCannotReadTheSharedDir(t *testing.T) {
	n, settings, cfg := agentnginx.StartIn(t, nginxproc.ClosedPrefix(t))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	status, err := n.Lua.Status(ctx)
	if err != nil {
		t.Fatalf("GET /status: %v", err)
	}
	if status.ConfigHash != cfg.Hash {
		t.Fatalf("config hash %q, want %q", status.ConfigHash, cfg.Hash)
	}
	// The default server's "/" is routed by restysync.router: no route
	// is a 404 from Lua, a module a worker could not load a 500.
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/", settings.HTTPPort))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET / answered %d, want 404 from the Lua router", resp.StatusCode)
	}

	authFile := model.AuthFile{Name: "auth/default_basic", Content: "user:{PLAIN}pass\n"}
	if err := n.WriteAuthFiles([]model.AuthFile{authFile}); err != nil {
		t.Fatal(err)
	}
	denied, err := n.Lua.Access(ctx, apply.WorkerNeeds([]model.AuthFile{authFile}))
	if err != nil {
		t.Fatalf("POST /access: %v", err)
	}
	var paths []string
	for _, d := range denied {
		paths = append(paths, d.Access+" "+d.Path)
		if d.Error == "" {
			t.Errorf("%s: no reason given", d.Path)
		}
	}
	want := []string{
		"read " + filepath.Join(settings.SharedDir, "auth/default_basic"),
		"write " + filepath.Join(settings.SharedDir, "tmp/client_body"),
		"write " + filepath.Join(settings.SharedDir, "tmp/proxy"),
	}
	if !slices.Equal(paths, want) {
		t.Errorf("denied %q, want %q", paths, want)
	}
}

// In a shared dir the workers can enter, the access check finds an
// htpasswd file they cannot read, and nothing else.
func TestAccessCheckNamesAnUnreadableFile(t *testing.T) {
	n, settings, _ := agentnginx.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	files := []model.AuthFile{
		{Name: "auth/default_good", Content: "user:{PLAIN}pass\n"},
		{Name: "auth/default_locked", Content: "user:{PLAIN}pass\n"},
	}
	if err := n.WriteAuthFiles(files); err != nil {
		t.Fatal(err)
	}
	locked := filepath.Join(settings.SharedDir, "auth/default_locked")
	if err := os.Chown(locked, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(locked, 0o600); err != nil {
		t.Fatal(err)
	}
	denied, err := n.Lua.Access(ctx, apply.WorkerNeeds(files))
	if err != nil {
		t.Fatalf("POST /access: %v", err)
	}
	if os.Geteuid() != 0 { // the workers run as the test's user: they read it
		return
	}
	if len(denied) != 1 || denied[0].Path != locked || denied[0].Access != "read" {
		t.Fatalf("denied %+v, want only %s (read)", denied, locked)
	}

	for _, body := range []luaapi.AccessRequest{
		{Read: []string{"../etc/passwd"}},
		{Read: []string{"/etc/passwd"}},
		{Read: []string{"auth/../../x"}},
		{Write: []string{"tmp//x"}},
		{Read: []string{""}},
	} {
		if _, err := n.Lua.Access(ctx, body); err == nil {
			t.Errorf("POST /access %+v was taken; want 400", body)
		}
	}
}
