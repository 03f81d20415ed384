package syncer

import (
	"errors"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/quarantine"
	"github.com/restysync/restysync/agent/internal/render"
)

// renderRefuses, when set, fails every render whose model and settings it
// returns an error for, as render fails on a value the model let through:
// e2e builds (tag e2ehooks) set it to make render fail on demand, unit
// tests too.
var renderRefuses func(model.Model, render.Settings) error

// renderBuild is render.Build, for the quarantine's renders of parts of
// the snapshot; renderRefuses applies.
func renderBuild(m model.Model, s render.Settings, keep ...render.Profile) (render.Config, []model.Route, error) {
	if renderRefuses != nil {
		if err := renderRefuses(m, s); err != nil {
			return render.Config{}, nil, err
		}
	}
	return render.Build(m, s, keep...)
}

// renderCached is renderBuild by the syncer's render.Cache: what the
// last model's unchanged servers gave is reused.
func renderCached(c *render.Cache, m model.Model, s render.Settings, keep ...render.Profile) (render.Config, render.RouteList, error) {
	if renderRefuses != nil {
		if err := renderRefuses(m, s); err != nil {
			return render.Config{}, render.RouteList{}, err
		}
	}
	return c.Build(m, s, keep...)
}

// errRender marks an error of rendering nginx.conf and the routes.
var errRender = errors.New("rendering nginx.conf and routes")

// RenderFailures is quarantine.RenderFailures with the agent's render, so
// that `restysync check` finds the Ingresses the agent would quarantine,
// e2e hooks included.
func RenderFailures(snap model.Snapshot, settings render.Settings, trusted func(*networkingv1.Ingress) bool) (map[string]error, error) {
	return quarantine.RenderFailures(snap, settings, trusted, renderBuild)
}
