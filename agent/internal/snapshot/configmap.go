package snapshot

import (
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/restysync/restysync/agent/internal/configmap"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
)

// ConfigMap is the agent's ConfigMap as Build last read it, kept between
// builds so that an unchanged ConfigMap is not read (nor its Problems
// logged) again, and the globals of the last version nginx took.
//
// A reload nginx refuses after the ConfigMap changed may be the ConfigMap's
// fault (a value only nginx can judge: a file it cannot open, a cipher its
// OpenSSL does not know) and not the changed Ingresses'. The syncer then
// tries the Ingresses of the last config nginx took with the new globals
// (StartTrial); if nginx refuses that too, the ConfigMap is to blame
// (Blame): the globals nginx last took are put back, the ConfigMap gets a
// Problem, and they stay until the ConfigMap changes again.
type ConfigMap struct {
	ref    string          // "namespace/name"; "": none
	base   render.Settings // the flags'
	logger *slog.Logger    // nil: nothing is logged

	read     bool              // a ConfigMap (or its absence) was read
	found    bool              // it existed
	data     map[string]string // its data when read
	problems []model.Problem

	values  globals // what Build applies
	good    globals // those of the last config nginx confirmed
	trial   bool
	refused string
}

// globals are what the ConfigMap feeds into nginx.conf and the model: all
// that nginx runs besides the Ingresses, Services, Secrets and flags.
type globals struct {
	// settings render nginx.conf: Options.Render with the keys applied.
	settings         render.Settings
	loadBalance      string
	serviceUpstream  bool
	globalAuth       model.ExternalAuth
	globalAuthDenied string
	snippetsOff      bool
	globalSnippets   model.GlobalSnippets
}

// NewConfigMap returns the ConfigMap opts name, not read yet: the flags'
// settings alone, which are also the good globals before nginx confirmed
// any config (the bootstrap's). logger, if not nil, is told of each read.
func NewConfigMap(opts Options, logger *slog.Logger) *ConfigMap {
	flags := globals{settings: opts.Render}
	return &ConfigMap{ref: opts.ConfigMap, base: opts.Render, logger: logger, values: flags, good: flags}
}

// Read applies cm, the ConfigMap (nil: it does not exist), when it changed
// since the last read, and returns its Problems; settingsChanged says the
// render settings changed. A new ConfigMap clears Refused: nginx judges it
// anew.
func (c *ConfigMap) Read(cm *corev1.ConfigMap) (problems []model.Problem, settingsChanged bool) {
	if c.ref == "" {
		return nil, false
	}
	var data map[string]string
	if cm != nil {
		data = cm.Data
	}
	if c.read && c.found == (cm != nil) && maps.Equal(c.data, data) {
		return c.problems, false
	}
	namespace, name, _ := strings.Cut(c.ref, "/")
	res := configmap.Apply(c.base, namespace, name, data)
	c.read, c.found, c.data = true, cm != nil, maps.Clone(data)
	c.problems = res.Problems
	c.refused = ""
	if cm == nil {
		c.problems = []model.Problem{configmap.NotFound(namespace, name)}
	}
	settingsChanged = !reflect.DeepEqual(res.Render, c.values.settings)
	c.values = globals{settings: res.Render, loadBalance: res.LoadBalance, serviceUpstream: res.ServiceUpstream,
		globalAuth: res.GlobalAuth, globalAuthDenied: res.GlobalAuthDenied,
		snippetsOff: res.SnippetAnnotationsOff, globalSnippets: res.GlobalSnippets}
	if c.logger != nil {
		invalid := 0
		for _, k := range res.Keys {
			if k.Status != configmap.StatusSupported {
				invalid++
			}
		}
		c.logger.Info("ConfigMap read", "configmap", c.ref, "found", cm != nil,
			"keys", len(res.Keys), "not_applied", invalid, "load_balance", res.LoadBalance)
	}
	return c.problems, settingsChanged
}

// Settings render nginx.conf: the flags' with the ConfigMap's keys
// applied, or those nginx last took while the ConfigMap is blamed.
func (c *ConfigMap) Settings() render.Settings {
	return c.values.settings
}

// SetNginx renders for n from now on (render.Settings.Nginx): the flags'
// settings, the ConfigMap's and those nginx last took alike, since which
// nginx runs is no matter of the ConfigMap (Changed stays as it was).
func (c *ConfigMap) SetNginx(n render.Nginx) {
	c.base.Nginx = n
	c.values.settings.Nginx = n
	c.good.settings.Nginx = n
}

// Changed says whether the globals differ from those of the last config
// nginx confirmed (before the first: the flags' alone).
func (c *ConfigMap) Changed() bool {
	return !reflect.DeepEqual(c.values, c.good)
}

// Trial says the next build tries the Ingresses of the last config nginx
// took with globals that changed since (StartTrial).
func (c *ConfigMap) Trial() bool {
	return c.trial
}

// StartTrial begins a trial of the changed globals, after nginx refused a
// config in which they and the Ingresses changed at once.
func (c *ConfigMap) StartTrial() {
	c.trial = true
}

// Blame puts back the globals nginx last took and keeps them until the
// ConfigMap changes; the ConfigMap gets a Problem saying why (what refused
// this version of it, and how), and Refused says refused. It ends a trial.
func (c *ConfigMap) Blame(why, refused string) {
	c.trial = false
	// Read compares the data, which stays: the refused ConfigMap is not
	// applied again until it changes.
	c.values = c.good
	namespace, name, _ := strings.Cut(c.ref, "/")
	c.problems = append(slices.Clip(c.problems), model.Problem{Kind: "ConfigMap", Namespace: namespace, Name: name,
		Reason: why + "; the last version nginx took keeps serving, with every Ingress change on top of it, until it changes"})
	c.refused = refused
}

// Confirm records that nginx runs a config of the globals: they are good.
// It says whether that ended a trial.
func (c *ConfigMap) Confirm() (trialEnded bool) {
	c.good = c.values
	trialEnded, c.trial = c.trial, false
	return trialEnded
}

// Refused is why the ConfigMap as it is was refused ("" when it was not,
// or changed since).
func (c *ConfigMap) Refused() string {
	return c.refused
}
