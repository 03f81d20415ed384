package apply

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
	"github.com/restysync/restysync/lua"
)

// A config nginx rejects on SIGHUP is reported as not confirmed, with
// nginx's own reason, while nginx keeps running the previous one.
func TestReloadRejectedWithNginxReason(t *testing.T) {
	nginxproc.Binary(t)
	prefix := nginxproc.TempPrefix(t)
	settings := render.Settings{SharedDir: prefix, HTTPPort: nginxproc.FreePort(t), HTTPSPort: nginxproc.FreePort(t),
		ListenAddress: "127.0.0.1", LoadModules: nginxproc.DebianLoadModules(), WorkerProcesses: "1"}
	if err := lua.WriteTo(prefix, WriteFileAtomic); err != nil {
		t.Fatal(err)
	}
	if _, err := render.WriteFallbackCertificate(prefix); err != nil {
		t.Fatal(err)
	}
	good, err := render.Render(model.Model{}, settings)
	if err != nil {
		t.Fatal(err)
	}
	n := &Nginx{SharedDir: prefix, Lua: NewLuaClient(filepath.Join(prefix, render.SocketName)), ConfirmTimeout: time.Minute}
	if err := n.WriteConfig(good.Bytes); err != nil {
		t.Fatal(err)
	}
	nginxproc.Start(t, prefix)

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
			if !errors.Is(err, ErrNotConfirmed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("reload error %v; want ErrNotConfirmed with nginx's reason %q", err, tc.want)
			}
			st, err := n.Lua.Status(context.Background())
			if err != nil || st.ConfigHash != good.Hash {
				t.Errorf("after the rejected reload nginx runs %q (%v), want the previous %q", st.ConfigHash, err, good.Hash)
			}
		})
	}
}
