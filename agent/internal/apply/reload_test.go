package apply_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/apply"
	"github.com/restysync/restysync/agent/internal/testenv/agentnginx"
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
