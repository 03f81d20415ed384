package syncer

import (
	"time"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
)

// Options configure a Syncer. Zero durations take the defaults noted.
type Options struct {
	// IngressClass and WatchWithoutClass decide which Ingresses are ours.
	IngressClass      string
	WatchWithoutClass bool
	// DefaultCertificate is model.Snapshot.DefaultCertificate.
	DefaultCertificate string
	// GatewayController and GatewayAddresses are model.Snapshot's
	// (--gateway-controller-name, --gateway-addresses).
	GatewayController string
	GatewayAddresses  []string
	// GatewayServices is model.Snapshot.GatewayServices
	// (--gateway-services).
	GatewayServices bool
	// SnippetAnnotationsOff refuses every snippet annotation
	// (--allow-snippet-annotations=false; default false: they are read).
	// The ConfigMap's allow-snippet-annotations "false" does too.
	SnippetAnnotationsOff bool
	// Render settings for nginx.conf, from the flags: the defaults the
	// agent's ConfigMap overrides.
	Render render.Settings
	// ConfigMap is the agent's ConfigMap, "namespace/name" (default "":
	// none). The source puts it in the Snapshot; its keys change Render
	// and the default balancing algorithm (package configmap).
	ConfigMap string
	// Coalesce is how long the loop waits for more events after the last
	// one before it syncs (default 5ms). StructureCoalesce replaces it when
	// more than EndpointSlices changed while changes keep coming — the last
	// sync ended less than MaxDelay ago (default 25ms): a change of
	// structure may cost a reload, so a stream of them (a deploy of many
	// objects) is worth a longer wait, while a lone change goes at once.
	// MaxDelay caps the wait under a constant stream of events (default
	// 100ms).
	Coalesce          time.Duration
	StructureCoalesce time.Duration
	MaxDelay          time.Duration
	// CheckInterval is how often nginx's status is read to notice a cold
	// start or a config that is not running (default 250ms).
	CheckInterval time.Duration
	// StartBound is how long nginx may stay down with a config it never
	// confirmed left for its start before the agent leaves it the last
	// confirmed one (or the bootstrap) instead (default 5 s; see
	// apply.ConfigRecord.ForStart).
	StartBound time.Duration
	// FullPush sends every backend to Lua whenever any changed, as the
	// classic controller does. It exists only as the benchmark's baseline.
	FullPush bool
	// OnSync, if set, is called by the loop after every sync. It must not
	// block: status writers and event recorders hand the work to their own
	// goroutines.
	OnSync func(Report)
	// OnListed, if set, is called once the source has listed its objects,
	// before the first sync.
	OnListed func()
	// LeanFullSync, if set, is called before a sync builds the whole
	// model (its first, or settings that may change every Ingress:
	// model.Incremental.FullReason), and what it returns once that
	// sync's render ended (before its push). The agent lowers Go's GC
	// percent between the two: the new model and views live beside the
	// old ones, and the garbage a whole build and render make would
	// otherwise let the heap grow to twice that (issue 31: a full sync
	// must not double the agent's memory).
	LeanFullSync func() (restore func())
	// Metrics, if set, is told what every sync, reload and push did
	// (default: nothing is recorded).
	Metrics Metrics
	// Targets decide where nginx may connect (model.Snapshot.Targets):
	// the pod's addresses and ports, the networks the platform allows,
	// and whether the source is a local folder (loopback allowed). The
	// zero value refuses loopback.
	Targets model.Targets
}

// Metrics is told what the loop does, for Prometheus. Its methods are
// called from the loop goroutine and must be cheap and never block.
type Metrics interface {
	// Synced is called at the end of every sync with the path that computed
	// the model ("fast" or "full"), its outcome (the action of the log
	// line, or "error") and how long it took.
	Synced(path, outcome string, d time.Duration)
	// Reloaded is called after every reload attempt: signal and confirmation.
	Reloaded(d time.Duration, err error)
	// Pushed is called after every POST to Lua: kind is "backends" or
	// "certificates", bytes the size of the body sent.
	Pushed(kind string, bytes int, d time.Duration, err error)
	// Propagated is called when a sync applied a change by a reload or a
	// push: d runs from the first source event it applied to the end of
	// that sync.
	Propagated(d time.Duration)
	// ReloadUnconfirmed is called for a reload nginx neither took nor
	// refused within the confirmation timeout; the agent waits for it.
	ReloadUnconfirmed()
	// ValidationFailed is called when validation rejected something:
	// validator "agent" for each new Problem (a part of an object left
	// out), "nginx" for each config nginx did not take on a reload.
	ValidationFailed(validator string)
}

type noMetrics struct{}

func (noMetrics) Synced(string, string, time.Duration)     {}
func (noMetrics) Reloaded(time.Duration, error)            {}
func (noMetrics) ReloadUnconfirmed()                       {}
func (noMetrics) Pushed(string, int, time.Duration, error) {}
func (noMetrics) Propagated(time.Duration)                 {}
func (noMetrics) ValidationFailed(string)                  {}
