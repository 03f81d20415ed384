package syncer

import (
	"errors"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/quarantine"
	"github.com/restysync/restysync/agent/internal/render"
)

// renderBuild is render.Build. e2e builds (tag e2ehooks) wrap it to make
// render fail on demand; unit tests replace it.
var renderBuild quarantine.Renderer = render.Build

// errRender marks an error of rendering nginx.conf and the routes.
var errRender = errors.New("rendering nginx.conf and routes")

// RenderFailures is quarantine.RenderFailures with the agent's render, so
// that `restysync check` finds the Ingresses the agent would quarantine,
// e2e hooks included.
func RenderFailures(snap model.Snapshot, settings render.Settings, trusted func(*networkingv1.Ingress) bool) (map[string]error, error) {
	return quarantine.RenderFailures(snap, settings, trusted, renderBuild)
}
