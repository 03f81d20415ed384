package apply

import (
	"context"

	"github.com/restysync/restysync/agent/internal/render"
)

// Reload is the stage's Reload step, for the tests in package apply_test
// (testenv/agentnginx, which they use, imports apply).
func (s *Stage) Reload(ctx context.Context, cfg render.Config) error { return s.reload(ctx, cfg) }
