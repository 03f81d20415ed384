// Package agentnginx is a test helper: a real nginx started from a shared
// dir laid out as the agent lays it out (Lua modules, default certificate,
// the rendered nginx.conf of an empty model), with the apply.Nginx that
// drives it. It lives apart from nginxproc because it needs apply and
// render, whose own tests use nginxproc.
package agentnginx

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/apply"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
	"github.com/restysync/restysync/lua"
)

// Start makes a shared dir, starts nginx on loopback with the config of an
// empty model, and returns the Nginx that drives it (a minute to confirm a
// reload), the settings and that config. The test's cleanup stops nginx.
func Start(t testing.TB) (*apply.Nginx, render.Settings, render.Config) {
	t.Helper()
	nginxproc.Binary(t)
	return StartIn(t, nginxproc.TempPrefix(t))
}

// StartIn is Start in the given prefix folder (with logs/ and tmp/ in it).
func StartIn(t testing.TB, prefix string) (*apply.Nginx, render.Settings, render.Config) {
	t.Helper()
	n, _, settings, cfg := StartEdited(t, prefix, nil)
	return n, settings, cfg
}

// StartEdited is StartIn, but nginx starts with edit(config) when edit is
// not nil (a test's own server in the http block, say); it also returns
// the nginx process.
func StartEdited(t testing.TB, prefix string, edit func([]byte) []byte) (*apply.Nginx, *nginxproc.Nginx, render.Settings, render.Config) {
	t.Helper()
	settings := render.Settings{SharedDir: prefix, HTTPPort: nginxproc.FreePort(t), HTTPSPort: nginxproc.FreePort(t),
		ListenAddress: "127.0.0.1", LoadModules: nginxproc.DebianLoadModules(), WorkerProcesses: "1"}
	if err := lua.WriteTo(prefix, apply.WriteFileAtomic); err != nil {
		t.Fatal(err)
	}
	if _, err := render.WriteFallbackCertificate(prefix); err != nil {
		t.Fatal(err)
	}
	cfg, err := render.Render(model.Model{}, settings)
	if err != nil {
		t.Fatal(err)
	}
	conf := cfg.Bytes
	if edit != nil {
		conf = edit(conf)
	}
	n := &apply.Nginx{SharedDir: prefix, Lua: apply.NewLuaClient(filepath.Join(prefix, render.SocketName)), ConfirmTimeout: time.Minute}
	if err := n.WriteConfig(conf); err != nil {
		t.Fatal(err)
	}
	return n, nginxproc.Start(t, prefix), settings, cfg
}
