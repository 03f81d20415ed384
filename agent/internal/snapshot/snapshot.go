// Package snapshot is part of the build stage of the pipeline (source →
// model → render → plan → apply): it turns what a source holds, the
// agent's options and its ConfigMap into the model.Snapshot that
// model.Build takes, the one way the agent, restysync check and restysync
// inspect --source do it.
//
// It is a package of its own, and not part of configmap or model, because
// the snapshot joins three things none of them owns: the source's objects,
// the agent's flags and the ConfigMap's globals, with the bookkeeping of the
// ConfigMap nginx last took (configmap.go). Package configmap stays a pure
// reader of keys, and model.Build stays a pure function of its Snapshot.
package snapshot

import (
	"cmp"
	"slices"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
)

// Options are the agent's flags that go into a snapshot.
type Options struct {
	// IngressClass and WatchWithoutClass decide which Ingresses are ours.
	IngressClass      string
	WatchWithoutClass bool
	// EveryIngressOurs builds every Ingress as ours whatever class it
	// names, with IngressClass the one class there is (restysync check,
	// which judges Ingresses before they move; default false: the agent's
	// choice of Ingresses).
	EveryIngressOurs bool
	// DefaultCertificate is model.Snapshot.DefaultCertificate.
	DefaultCertificate string
	// GatewayController and GatewayAddresses are model.Snapshot's: the
	// controllerName of the GatewayClasses we serve ("":
	// model.GatewayControllerName) and the pool of Gateway addresses.
	GatewayController string
	GatewayAddresses  []string
	// GatewayServices is model.Snapshot.GatewayServices.
	GatewayServices bool
	// SnippetAnnotationsOff refuses every snippet annotation
	// (--allow-snippet-annotations=false); the ConfigMap's
	// allow-snippet-annotations "false" does too.
	SnippetAnnotationsOff bool
	// Render are the flags' settings of nginx.conf: the defaults the
	// ConfigMap overrides. With the ConfigMap's keys they also give the
	// snapshot ssl-passthrough, whether nginx has the ModSecurity module,
	// the ports nginx listens on (ReservedPorts) and the Limits.
	Render render.Settings
	// ConfigMap is the agent's ConfigMap, "namespace/name" ("": none).
	ConfigMap string
	// Targets is model.Snapshot.Targets.
	Targets model.Targets
	// Now is the clock certificates are checked against (nil: time.Now).
	Now func() time.Time
}

// Built is what Build made.
type Built struct {
	// Snapshot is what model.Build takes.
	Snapshot model.Snapshot
	// Problems are the ConfigMap's (ConfigMap.Read), then those of the
	// Ingresses leaveOut left out.
	Problems []model.Problem
	// Settings render nginx.conf: Options.Render with the ConfigMap's
	// keys applied (or the last ones nginx took: ConfigMap.Blame).
	Settings render.Settings
	// SettingsChanged says that Settings differ from those of the
	// ConfigMap's last read.
	SettingsChanged bool
}

// LeaveOut returns the Ingresses to build of those given, and a Problem for
// each it left out (the syncer's quarantine).
type LeaveOut func(model.List[*networkingv1.Ingress]) (model.List[*networkingv1.Ingress], []model.Problem)

// Build assembles the snapshot of held, what the source holds, with opts
// and the globals of cm, which reads held.ConfigMap when it changed (nil:
// a ConfigMap read once, as check and inspect do). leaveOut, if not nil,
// takes Ingresses out before the build.
func Build(held model.Snapshot, opts Options, cm *ConfigMap, leaveOut LeaveOut) Built {
	if cm == nil {
		cm = NewConfigMap(opts, nil)
	}
	cmProblems, changed := cm.Read(held.ConfigMap)
	g := cm.values
	snap := held
	snap.LoadBalance = g.loadBalance
	snap.ServiceUpstream = g.serviceUpstream
	snap.GlobalAuth, snap.GlobalAuthDenied = g.globalAuth, g.globalAuthDenied
	snap.SnippetAnnotationsOff = opts.SnippetAnnotationsOff || g.snippetsOff
	snap.GlobalSnippets = g.globalSnippets
	snap.SSLPassthrough = g.settings.SSLPassthrough
	snap.ModSecurity = g.settings.ModSecurityGlobal()
	snap.ReservedPorts = reservedPorts(g.settings)
	snap.IngressPorts = model.IngressPorts{Address: g.settings.ListenAddress,
		HTTP: int32(g.settings.HTTPPort), HTTPS: int32(g.settings.HTTPSPort), Status: int32(g.settings.StatusPort)}
	snap.Targets = opts.Targets
	snap.Limits = g.settings.Limits
	snap.HeadersMore = g.settings.HeadersMore()
	problems := slices.Clone(cmProblems)
	if leaveOut != nil {
		var left []model.Problem
		snap.Ingresses, left = leaveOut(snap.Ingresses)
		problems = append(problems, left...)
	}
	snap.IngressClass = opts.IngressClass
	snap.WatchWithoutClass = opts.WatchWithoutClass
	if opts.EveryIngressOurs {
		snap.Ingresses, snap.IngressClasses = everyIngressOurs(snap.Ingresses, opts.IngressClass)
	}
	snap.DefaultCertificate = opts.DefaultCertificate
	snap.GatewayController = cmp.Or(opts.GatewayController, model.GatewayControllerName)
	snap.GatewayAddresses = opts.GatewayAddresses
	snap.GatewayServices = opts.GatewayServices
	snap.Now = time.Now()
	if opts.Now != nil {
		snap.Now = opts.Now()
	}
	if e2eBuilt != nil {
		e2eBuilt(snap)
	}
	return Built{Snapshot: snap, Problems: problems, Settings: g.settings, SettingsChanged: changed}
}

// e2eBuilt, if set, is told of every snapshot Build makes (e2ehooks.go).
var e2eBuilt func(model.Snapshot)

// everyIngressOurs returns copies of ingresses that name class, and class
// as the only IngressClass, of our controller. The copies lose the legacy
// class annotation, which would otherwise name a second class.
func everyIngressOurs(ingresses model.List[*networkingv1.Ingress], class string) (model.List[*networkingv1.Ingress], model.List[*networkingv1.IngressClass]) {
	ours := make([]*networkingv1.Ingress, 0, ingresses.Len())
	for ing := range ingresses.All() {
		copied := ing.DeepCopy()
		copied.Spec.IngressClassName = &class
		delete(copied.Annotations, "kubernetes.io/ingress.class")
		ours = append(ours, copied)
	}
	classes := model.ListOf(&networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: class},
		Spec: networkingv1.IngressClassSpec{Controller: model.ControllerName}})
	return model.ListOf(ours...), classes
}

// reservedPorts are the ports nginx listens on for HTTP: a TCP service
// cannot have them.
func reservedPorts(s render.Settings) []int32 {
	ports := []int32{int32(s.HTTPPort), int32(s.HTTPSPort)}
	if s.StatusPort != 0 {
		ports = append(ports, int32(s.StatusPort))
	}
	return ports
}
