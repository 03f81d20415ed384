//go:build e2ehooks

package syncer

import (
	"fmt"
	"os"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
)

// E2ERenderRefusesHost names the environment variable that, in a binary
// built with the tag e2ehooks (as the e2e tests build the agent), makes
// render fail on any model that serves the host it holds, as render fails
// on a value the model let through. The e2e tests prove the isolation of a
// render failure with it, whatever values the model comes to refuse.
const E2ERenderRefusesHost = "RESTYSYNC_E2E_RENDER_REFUSES_HOST"

func init() {
	host := os.Getenv(E2ERenderRefusesHost)
	if host == "" {
		return
	}
	renderRefuses = func(m model.Model, _ render.Settings) error {
		for srv := range m.Servers.All() {
			if srv.Host == host {
				return fmt.Errorf("server %q: refused by the e2e hook %s", host, E2ERenderRefusesHost)
			}
		}
		return nil
	}
}
