package apply

import (
	"context"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
)

// Reload is the stage's Reload step, for the tests in package apply_test
// (testenv/agentnginx, which they use, imports apply).
func (s *Stage) Reload(ctx context.Context, cfg render.Config) error { return s.reload(ctx, cfg) }

// holdRoute, dropRoute, holdBackend and dropBackend record one push of one
// item, for the tests.
func (l *LuaState) holdRoute(r model.Route)     { l.holdRoutes([]model.Route{r}) }
func (l *LuaState) dropRoute(host string)       { l.dropRoutes([]string{host}) }
func (l *LuaState) holdBackend(b model.Backend) { l.holdBackends([]model.Backend{b}) }
func (l *LuaState) dropBackend(name string)     { l.dropBackends([]string{name}) }

// HeldRoutes is the record of the routes Lua holds.
func (s *Stage) HeldRoutes() render.RouteList { return s.lua.heldRoutes() }

// SetCertificateBatchBytes makes l send certificates in batches of about
// n bytes.
func (l *LuaState) SetCertificateBatchBytes(n int) { l.certBatchBytes = n }
