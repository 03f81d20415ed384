package syncer

import (
	"maps"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/restysync/restysync/agent/internal/configmap"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
)

// globals are what the agent's ConfigMap gave, kept between syncs so that
// an unchanged ConfigMap is not read (nor its Problems logged) again.
type globals struct {
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
	read           bool              // a ConfigMap (or its absence) was read
	found          bool              // it existed
	data           map[string]string // its data when read
	problems       []model.Problem
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
