package render

import (
	"fmt"
	"strings"

	"github.com/restysync/restysync/agent/internal/model"
)

// Request mirroring of a location's profile (model.ProxySettings.Mirror;
// model/mirror.go reads it).
//
// The profile sets $restysync_mirror_target and
// $restysync_mirror_host and names one of two internal locations in the
// server (mirrorLocation, mirrorLocationWithoutBody), which proxy the copy
// there. A subrequest shares its request's variables, so one location
// serves every target; it is written only when a profile (one kept from an
// earlier config too) names it.

// The internal locations of mirrored requests, with and without the body.
const (
	mirrorLocation            = "/_restysync/mirror"
	mirrorLocationWithoutBody = "/_restysync/mirror-without-body"
)

// mirrorView is what a profile prints to mirror its requests.
type mirrorView struct {
	// Location is the internal location the copy goes to.
	Location string
	// Target and Host are model.Mirror's, with ${vars}.
	Target, Host string
	NoBody       bool
}

// addMirror derives the mirror part of v from p.
func addMirror(v *proxyView, p model.ProxySettings) error {
	if p.Mirror.Target != "" {
		m := mirrorView{Location: mirrorLocation, Target: p.Mirror.Target, Host: p.Mirror.Host, NoBody: p.Mirror.NoBody}
		if m.NoBody {
			m.Location = mirrorLocationWithoutBody
		}
		for _, s := range []string{m.Target, m.Host} {
			if _, err := QuoteWithVariables(s); err != nil {
				return fmt.Errorf("mirror: %w", err)
			}
		}
		v.MirrorTo = &m
	}
	return nil
}

// mirrorHTTPView says which internal mirror locations the profiles name.
type mirrorHTTPView struct {
	Body, NoBody bool
}

// Any says a mirror location is written (and the map its Host needs).
func (m mirrorHTTPView) Any() bool { return m.Body || m.NoBody }

// profileNeeds returns what the profiles (kept ones included) need in the
// http and server blocks: the mirror locations, and the variable of a
// literal "$".
func profileNeeds(profiles []Profile) (mirror mirrorHTTPView, dollar bool) {
	for _, p := range profiles {
		mirror.Body = mirror.Body || strings.Contains(p.Body, "mirror "+mirrorLocation+";")
		mirror.NoBody = mirror.NoBody || strings.Contains(p.Body, "mirror "+mirrorLocationWithoutBody+";")
		dollar = dollar || strings.Contains(p.Body, "${restysync_dollar}")
	}
	return mirror, dollar
}
