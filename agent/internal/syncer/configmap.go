package syncer

import (
	"maps"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/restysync/restysync/agent/internal/configmap"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/quarantine"
	"github.com/restysync/restysync/agent/internal/render"
)

// globals are what the agent's ConfigMap gave, kept between syncs so that
// an unchanged ConfigMap is not read (nor its Problems logged) again.
type globals struct {
	globalValues
	read     bool              // a ConfigMap (or its absence) was read
	found    bool              // it existed
	data     map[string]string // its data when read
	problems []model.Problem
}

// globalValues are what the ConfigMap feeds into nginx.conf and the model:
// all that nginx runs besides the Ingresses, Services, Secrets and flags.
type globalValues struct {
	// settings render nginx.conf: Options.Render with the keys applied.
	settings render.Settings
	// loadBalance is model.Snapshot.LoadBalance.
	loadBalance string
	// serviceUpstream is model.Snapshot.ServiceUpstream.
	serviceUpstream bool
	// globalAuth and globalAuthDenied are model.Snapshot's.
	globalAuth       model.ExternalAuth
	globalAuthDenied string
	// snippetsOff and globalSnippets are model.Snapshot's
	// SnippetAnnotationsOff (with Options') and GlobalSnippets.
	snippetsOff    bool
	globalSnippets model.GlobalSnippets
}

// readConfigMap applies cm, the agent's ConfigMap (nil: it does not
// exist), when it changed since the last sync, and returns its Problems.
// When the settings change, the next config is rendered again; whether
// nginx reloads is then up to the bytes (the plan compares hashes), so a
// change of load-balance alone is a push.
func (s *Syncer) readConfigMap(cm *corev1.ConfigMap) []model.Problem {
	if s.opts.ConfigMap == "" {
		return nil
	}
	var data map[string]string
	if cm != nil {
		data = cm.Data
	}
	g := &s.globals
	if g.read && g.found == (cm != nil) && maps.Equal(g.data, data) {
		return g.problems
	}
	namespace, name, _ := strings.Cut(s.opts.ConfigMap, "/")
	res := configmap.Apply(s.opts.Render, namespace, name, data)
	g.read, g.found, g.data = true, cm != nil, maps.Clone(data)
	g.problems = res.Problems
	s.configMapRefused = "" // a new ConfigMap: nginx judges it anew
	if cm == nil {
		g.problems = []model.Problem{configmap.NotFound(namespace, name)}
	}
	if !reflect.DeepEqual(res.Render, g.settings) {
		g.settings = res.Render
		s.lastConfig = render.Config{} // render again, with the new settings
	}
	invalid := 0
	for _, k := range res.Keys {
		if k.Status != configmap.StatusSupported {
			invalid++
		}
	}
	s.logger.Info("ConfigMap read", "configmap", s.opts.ConfigMap, "found", cm != nil,
		"keys", len(res.Keys), "not_applied", invalid, "load_balance", res.LoadBalance)
	g.loadBalance = res.LoadBalance
	g.serviceUpstream = res.ServiceUpstream
	g.globalAuth, g.globalAuthDenied = res.GlobalAuth, res.GlobalAuthDenied
	g.snippetsOff, g.globalSnippets = res.SnippetAnnotationsOff, res.GlobalSnippets
	return g.problems
}

// A reload nginx refuses after the ConfigMap changed may be the ConfigMap's
// fault (a value only nginx can judge: a file it cannot open, a cipher its
// OpenSSL does not know) and not the changed Ingresses'. Before the guard
// bisects the Ingresses, the loop tries the Ingresses of the last config
// nginx took with the new globals; if nginx refuses that too, the ConfigMap
// is to blame: the globals nginx last took are put back, the ConfigMap gets
// a Problem, /readyz says why, no Ingress is quarantined, and Ingress
// changes keep applying on top of the good globals until the ConfigMap
// changes again. A ConfigMap with which the Ingresses nginx took do not
// render is blamed the same way (isolateRenderFailure).

// globalsChanged says whether the globals differ from those of the last
// full build nginx confirmed (before the first: from the flags' alone).
func (s *Syncer) globalsChanged() bool {
	return !reflect.DeepEqual(s.globals.globalValues, s.goodGlobals)
}

// judgeGlobals is the first word on a config nginx refused, saying reason:
// it returns true when the refusal is the globals' matter, and the guard
// has nothing to do with it.
func (s *Syncer) judgeGlobals(reason string) bool {
	switch {
	case s.globalsTrial:
		s.blameConfigMap(quarantine.NginxRefused, reason)
	case s.globalsChanged():
		s.globalsTrial, s.guard.OnlyGood = true, true
		s.logger.Info("nginx rejected a config after the ConfigMap changed; trying the Ingresses of the last config it took with the new ConfigMap",
			"configmap", s.opts.ConfigMap, "reason", reason)
	default:
		return false
	}
	s.rerender = true
	s.markDirty()
	return true
}

// blameConfigMap puts back the globals nginx last took, and keeps them
// until the ConfigMap changes: refused (nginxRefused or renderRefused)
// them with the Ingresses nginx took before, saying reason.
func (s *Syncer) blameConfigMap(refused, reason string) {
	s.globalsTrial, s.guard.OnlyGood = false, false
	// readConfigMap compares the data, which stays: the refused
	// ConfigMap is not applied again until it changes.
	bad := s.globals
	s.globals.globalValues = s.goodGlobals
	namespace, name, _ := strings.Cut(s.opts.ConfigMap, "/")
	s.globals.problems = append(slices.Clip(bad.problems), model.Problem{Kind: "ConfigMap", Namespace: namespace, Name: name,
		Reason: refused + " with this version of it (" + quarantine.ClipReason(reason) + "); the last version nginx took keeps serving, " +
			"with every Ingress change on top of it, until it changes"})
	s.configMapRefused = refused + ": " + reason
	s.lastConfig = render.Config{}
	s.logger.Error("the ConfigMap is refused: its last version nginx took keeps serving until it changes; no Ingress is quarantined",
		"configmap", s.opts.ConfigMap, "refused", refused, "reason", reason)
}

// confirmGlobals records that nginx runs a config of the globals: they are
// good. After a trial, the changed Ingresses are tried on top of them.
func (s *Syncer) confirmGlobals() {
	s.goodGlobals = s.globals.globalValues
	if s.globalsTrial {
		s.globalsTrial, s.guard.OnlyGood = false, false
		s.rerender = true
		s.markDirty()
	}
}
