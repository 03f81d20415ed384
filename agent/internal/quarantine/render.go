package quarantine

import (
	"errors"
	"maps"
	"slices"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
)

// A render failure is isolated like an nginx rejection: the Ingresses
// without which the model renders are quarantined, and everything else is
// served.
//
// The culprits are found by rendering, not by reading render's error:
// render fails in many places (a quoted value, a profile, a host, an auth
// location) and only some of them know the Ingress, while a model built from
// a subset of the Ingresses tells for every one of them, with nothing in
// render to keep in step. It is a bisection like the guard's, but in
// process and in one sync: render is pure and takes milliseconds, so no
// reload and no loop step is spent on it. It runs only when a render failed.

// Renderer renders a model (render.Build, or the agent's wrapper of it).
type Renderer func(model.Model, render.Settings, ...render.Profile) (render.Config, []model.Route, error)

// Refusal is an Ingress quarantined because render refuses it: its key
// ("namespace/name") and render's error.
type Refusal struct{ Key, Reason string }

// RefuseRenders quarantines the Ingresses of snap, the snapshot of the
// last full build, that build refuses with settings (RenderFailures; the
// Trusted are never blamed), like ones nginx refused, and returns them
// sorted by key. Its error is RenderFailures'.
func (g *Guard) RefuseRenders(snap model.Snapshot, settings render.Settings, build Renderer) ([]Refusal, error) {
	culprits, err := RenderFailures(snap, settings, g.Trusted, build)
	if err != nil {
		return nil, err
	}
	var refused []Refusal
	for _, key := range slices.Sorted(maps.Keys(culprits)) {
		reason := culprits[key].Error()
		if ing := g.used.get(key); ing != nil {
			g.quarantine[key] = quarantinedIngress{ingress: ing, refused: RenderRefused, reason: reason}
		}
		refused = append(refused, Refusal{Key: key, Reason: reason})
	}
	return refused, nil
}

// ErrNotIngresses is what RenderFailures returns when the Ingresses it may
// not blame fail to render on their own: the settings, or the agent, are
// to blame.
var ErrNotIngresses = errors.New("the Ingresses known to render do not render")

// RenderFailures returns the Ingresses of snap that build refuses, each
// with render's error, found by bisection: the model of the trusted
// Ingresses plus each group of the others is rendered, a group that
// renders is kept, a group of one that fails is a culprit, a larger one is
// split in half. k culprits among n suspects cost about 2k·log2(n) builds
// and renders. trusted (nil: none) names Ingresses known to render, which
// are never blamed (Guard.Trusted: those nginx last took); when they do not
// render with settings alone, the error wraps ErrNotIngresses. An empty result with a nil error means snap
// renders.
func RenderFailures(snap model.Snapshot, settings render.Settings, trusted func(*networkingv1.Ingress) bool, build Renderer) (map[string]error, error) {
	all := snap.Ingresses
	renders := func(keep map[string]bool) error {
		sub := snap
		kept := make([]*networkingv1.Ingress, 0, len(keep))
		for ing := range all.All() {
			if keep[ingressKey(ing)] {
				kept = append(kept, ing)
			}
		}
		sub.Ingresses = model.ListOf(kept...)
		m, _ := model.Build(sub)
		_, _, err := build(m, settings)
		return err
	}
	accepted := map[string]bool{}
	var suspects []string
	for ing := range all.All() {
		if trusted != nil && trusted(ing) {
			accepted[ingressKey(ing)] = true
		} else {
			suspects = append(suspects, ingressKey(ing))
		}
	}
	if err := renders(accepted); err != nil {
		return nil, errors.Join(ErrNotIngresses, err)
	}
	culprits := map[string]error{}
	var search func(group []string)
	search = func(group []string) {
		try := make(map[string]bool, len(accepted)+len(group))
		for key := range accepted {
			try[key] = true
		}
		for _, key := range group {
			try[key] = true
		}
		err := renders(try)
		switch {
		case err == nil:
			accepted = try
		case len(group) == 1:
			culprits[group[0]] = err
		default:
			half := len(group) / 2
			search(group[:half])
			search(group[half:])
		}
	}
	if len(suspects) > 0 {
		search(suspects)
	}
	return culprits, nil
}
