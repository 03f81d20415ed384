package syncer

import (
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/quarantine"
	"github.com/restysync/restysync/agent/internal/render"
	"github.com/restysync/restysync/agent/internal/snapshot"
)

// The agent's ConfigMap is read, and its globals kept, by
// snapshot.ConfigMap; the loop only says when nginx took or refused them.
// A reload nginx refuses after the ConfigMap changed is first tried with
// the Ingresses of the last config nginx took (a trial); if nginx refuses
// that too, the ConfigMap is to blame: no Ingress is quarantined, /readyz
// says why, and Ingress changes keep applying on top of the good globals
// until the ConfigMap changes again. A ConfigMap with which the Ingresses
// nginx took do not render is blamed the same way (isolateRenderFailure).

// snapshotOptions are the options of every snapshot the loop builds.
func (o Options) snapshotOptions() snapshot.Options {
	return snapshot.Options{
		IngressClass:          o.IngressClass,
		WatchWithoutClass:     o.WatchWithoutClass,
		DefaultCertificate:    o.DefaultCertificate,
		GatewayController:     o.GatewayController,
		GatewayAddresses:      o.GatewayAddresses,
		GatewayServices:       o.GatewayServices,
		SnippetAnnotationsOff: o.SnippetAnnotationsOff,
		Render:                o.Render,
		ConfigMap:             o.ConfigMap,
		Targets:               o.Targets,
	}
}

// buildSnapshot assembles the snapshot of what the source holds, with the
// ConfigMap's globals and without the quarantined Ingresses. When the
// render settings changed, the next config is rendered again; whether
// nginx reloads is then up to the bytes (the plan compares hashes), so a
// change of load-balance alone is a push.
func (s *Syncer) buildSnapshot(held model.Snapshot) snapshot.Built {
	built := snapshot.Build(held, s.opts.snapshotOptions(), s.configMap, s.guard.Filter)
	if built.SettingsChanged {
		s.lastConfig = render.Config{}
	}
	return built
}

// globalsChanged says whether the globals differ from those of the last
// full build nginx confirmed (before the first: from the flags' alone).
func (s *Syncer) globalsChanged() bool {
	return s.configMap.Changed()
}

// judgeGlobals is the first word on a config nginx refused, saying reason:
// it returns true when the refusal is the globals' matter, and the guard
// has nothing to do with it.
func (s *Syncer) judgeGlobals(reason string) bool {
	switch {
	case s.configMap.Trial():
		s.blameConfigMap(quarantine.NginxRefused, reason)
	case s.configMap.Changed():
		s.configMap.StartTrial()
		s.guard.OnlyGood = true
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
	s.guard.OnlyGood = false
	s.configMap.Blame(refused+" with this version of it ("+quarantine.ClipReason(reason)+")", refused+": "+reason)
	s.lastConfig = render.Config{}
	s.logger.Error("the ConfigMap is refused: its last version nginx took keeps serving until it changes; no Ingress is quarantined",
		"configmap", s.opts.ConfigMap, "refused", refused, "reason", reason)
}

// confirmGlobals records that nginx runs a config of the globals: they are
// good. After a trial, the changed Ingresses are tried on top of them.
func (s *Syncer) confirmGlobals() {
	if s.configMap.Confirm() {
		s.guard.OnlyGood = false
		s.rerender = true
		s.markDirty()
	}
}
