// Package metrics exports what the pipeline does as Prometheus metrics.
//
// It watches every stage from the outside: the syncer reports each sync,
// reload and push through the syncer.Metrics interface, which *Metrics
// implements; the state of the loop, the objects the source holds and the
// Lua side (per-backend endpoints and request counters, certificates) are
// read at scrape time by collectors, so nothing is computed between scrapes.
// Every series lives in the agent's own registry, never the global one,
// but the Lua series and the ingress-nginx request series, which are read
// beside it at each scrape and, for a text scrape, written without being
// made into Prometheus's objects first (text.go): at 50,000 backends or
// thousands of request series those objects were most of a scrape's cost.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/restysync/restysync/agent/internal/apply"
	"github.com/restysync/restysync/agent/internal/luaapi"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/syncer"
)

// Namespace prefixes every series name.
const Namespace = "restysync"

// LuaReader reads Lua's counters; *apply.LuaClient is one.
type LuaReader interface {
	Metrics(ctx context.Context) (luaapi.LuaMetrics, error)
}

var _ LuaReader = (*apply.LuaClient)(nil)

// Options say where the scrape-time series come from. A nil func leaves
// its series out (Leader: reported as 0).
type Options struct {
	// Version and Commit of the agent, for restysync_build_info.
	Version, Commit string
	// State is the syncer's state: config hash, problems.
	State func() syncer.State
	// Objects counts the objects the source holds by kind (see CountObjects).
	Objects func() map[string]int
	// Leader says whether this replica holds the status writer's Lease.
	Leader func() bool
	// Lua is asked for its counters on every scrape, within LuaTimeout
	// (default 2s). A failed read is counted, never fatal.
	Lua        LuaReader
	LuaTimeout time.Duration
	// IngressNginx, when not nil, adds the series under ingress-nginx's
	// names (ingressnginx.go).
	IngressNginx *IngressNginx
}

// Metrics holds the agent's registry and the series the syncer moves.
type Metrics struct {
	reg *prometheus.Registry

	syncDuration       *prometheus.HistogramVec
	syncs              *prometheus.CounterVec
	reloads            prometheus.Counter
	reloadFailures     prometheus.Counter
	reloadsUnconfirmed prometheus.Counter
	reloadDuration     prometheus.Histogram
	lastReload         prometheus.Gauge
	pushes             *prometheus.CounterVec
	pushFailures       *prometheus.CounterVec
	pushBytes          *prometheus.CounterVec
	pushDuration       *prometheus.HistogramVec
	eventToPush        prometheus.Histogram
	validationFailures *prometheus.CounterVec

	ingressNginx *ingressNginxCollector // nil when off
	lua          *luaGatherer           // nil without Options.Lua
	// shared reads Lua once per Gather for lua and ingressNginx, which
	// then hold gatherMu; nil when they do not read the same Lua.
	shared   *sharedLua
	gatherMu sync.Mutex

	// scrapeTimeout bounds a scrape's gathering (Handler).
	scrapeTimeout time.Duration
	// inflight is the gather the scrapes under way wait for, nil when none
	// (gatherWithin).
	inflightMu sync.Mutex
	inflight   *inflightGather
}

var (
	_ syncer.Metrics      = (*Metrics)(nil)
	_ prometheus.Gatherer = (*Metrics)(nil)
)

// Sync outcomes, as the sync log line's action names them, plus "error".
var outcomes = []string{"nothing", "push", "reload", "reload+push", "wait-for-nginx", "error"}

// pushKinds are the kinds of POST to Lua.
var pushKinds = []string{"backends", "certificates", "routes"}

// latencyBuckets span a fast-path push (~1 ms) to a slow reload (10 s).
var latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// New registers every series in a new registry, with the Go and process
// collectors.
func New(opts Options) *Metrics {
	if opts.LuaTimeout <= 0 {
		opts.LuaTimeout = 2 * time.Second
	}
	m := &Metrics{
		reg:           prometheus.NewRegistry(),
		scrapeTimeout: 10 * time.Second,
		syncDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "sync_duration_seconds",
			Help:    "Duration of one sync, from taking the source's changes to the end of the reload or push; path is fast (only endpoints) or full (model built).",
			Buckets: latencyBuckets,
		}, []string{"path"}),
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "syncs_total",
			Help: "Syncs by outcome: nothing, push, reload, reload+push, wait-for-nginx or error.",
		}, []string{"outcome"}),
		reloads: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "reloads_total",
			Help: "nginx reloads attempted (SIGHUP, then waiting for the new config hash).",
		}),
		reloadFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "reload_failures_total",
			Help: "nginx reloads that failed: nginx rejected the config (or the signal failed); the previous nginx.conf was put back.",
		}),
		reloadsUnconfirmed: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "reloads_unconfirmed_total",
			Help: "nginx reloads neither confirmed nor rejected within the confirmation timeout (a slow or stopped nginx); the agent waits for them and blames no Ingress.",
		}),
		reloadDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "reload_duration_seconds",
			Help:    "Duration of a reload, from the signal to nginx reporting the new config hash.",
			Buckets: latencyBuckets,
		}),
		lastReload: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "last_reload_success_timestamp_seconds",
			Help: "Unix time of the last confirmed reload; 0 before the first.",
		}),
		pushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "lua_pushes_total",
			Help: "POSTs to the Lua config API, by kind (backends, certificates or routes).",
		}, []string{"kind"}),
		pushFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "lua_push_failures_total",
			Help: "POSTs to the Lua config API that failed (after retries) or that Lua rejected.",
		}, []string{"kind"}),
		pushBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "lua_push_bytes_total",
			Help: "Bytes of JSON sent to the Lua config API.",
		}, []string{"kind"}),
		pushDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "lua_push_duration_seconds",
			Help:    "Duration of one POST to the Lua config API, retries included.",
			Buckets: latencyBuckets,
		}, []string{"kind"}),
		validationFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "validation_failures_total",
			Help: "Things validation rejected: validator agent counts each new Problem once (that part of the object is left out), nginx each config nginx did not take on a reload (the last good one keeps serving).",
		}, []string{"validator"}),
		eventToPush: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "event_to_push_seconds",
			Help:    "Time from the first source event of a batch to the end of the sync whose reload or push applied it.",
			Buckets: latencyBuckets,
		}),
	}
	for _, o := range outcomes {
		m.syncs.WithLabelValues(o)
	}
	for _, p := range []string{"fast", "full"} {
		m.syncDuration.WithLabelValues(p)
	}
	for _, v := range []string{"agent", "nginx"} {
		m.validationFailures.WithLabelValues(v)
	}
	for _, k := range pushKinds {
		m.pushes.WithLabelValues(k)
		m.pushFailures.WithLabelValues(k)
		m.pushBytes.WithLabelValues(k)
		m.pushDuration.WithLabelValues(k)
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.syncDuration, m.syncs, m.reloads, m.reloadFailures, m.reloadsUnconfirmed, m.reloadDuration, m.lastReload,
		m.pushes, m.pushFailures, m.pushBytes, m.pushDuration, m.eventToPush, m.validationFailures,
		newStateCollector(opts),
	)
	lua := opts.Lua
	if in := opts.IngressNginx; in != nil && sameLua(opts.Lua, in.Lua) {
		m.shared = &sharedLua{lua: opts.Lua}
		lua = m.shared
	}
	if lua != nil {
		m.lua = newLuaGatherer(lua, opts.LuaTimeout)
	}
	if opts.IngressNginx != nil && opts.IngressNginx.Lua != nil {
		m.ingressNginx = newIngressNginxCollector(*opts.IngressNginx, opts.LuaTimeout, opts.State)
		if m.shared != nil {
			m.ingressNginx.metricsLua = m.shared
		}
		m.reg.MustRegister(m.ingressNginx)
	}
	return m
}

// Registry is the agent's registry, for more collectors. The Lua series
// are not in it (luaGatherer): Gather has every series.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Gather gathers the registry's series and the Lua series, sorted by
// name as the registry sorts its own. The registry's error, if any, is
// returned with what it gathered.
func (m *Metrics) Gather() ([]*dto.MetricFamily, error) {
	return m.gather().allFamilies()
}

// gathered is one scrape's series: the registry's as dto, Lua's as read.
type gathered struct {
	families []*dto.MetricFamily // the registry's, sorted by name
	err      error               // the registry's
	lua      *luaScrape          // nil without Options.Lua
	// requests are the ingress-nginx request metrics, nil when off.
	requests     *requestScrape
	ingressNginx *ingressNginxCollector
}

// gather reads the registry and Lua.
func (m *Metrics) gather() gathered {
	if m.shared != nil || m.ingressNginx != nil {
		m.gatherMu.Lock()
		defer m.gatherMu.Unlock()
	}
	if m.shared != nil {
		m.shared.cur.Store(&luaRead{})
		defer m.shared.cur.Store(nil)
	}
	var g gathered
	if in := m.ingressNginx; in != nil {
		ctx, cancel := context.WithTimeout(context.Background(), in.timeout)
		rs := in.readRequests(ctx)
		cancel()
		g.requests, g.ingressNginx = &rs, in
		in.requestsRead.Store(&rs)
		defer in.requestsRead.Store(nil)
	}
	g.families, g.err = m.reg.Gather()
	if m.lua != nil {
		lua := m.lua.read()
		g.lua = &lua
	}
	return g
}

// allFamilies are every family as dto, sorted by name, and the error
// gathering them.
func (g gathered) allFamilies() ([]*dto.MetricFamily, error) {
	families, err := slices.Clone(g.families), g.err // g is shared: sorted in a copy
	if g.lua != nil {
		families = append(families, g.lua.families()...)
	}
	if g.requests != nil {
		requests, rerr := g.ingressNginx.requestFamilies(g.requests, true)
		families, err = append(families, requests...), errors.Join(err, rerr)
	}
	slices.SortFunc(families, byFamilyName)
	return families, err
}

func byFamilyName(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) }

// Handler serves every series (Gather) in the Prometheus exposition
// formats, negotiated by promhttp. A scrape in the text format with no
// compression or gzip, what Prometheus asks for when it does not ask for
// protobuf, is written by serveText, which writes the per-backend Lua
// series without making them dto series first (text.go); every other
// scrape is promhttp's. A collector that fails leaves its series out; the
// rest are still served. A gather that takes longer than scrapeTimeout
// answers 503, as promhttp's Timeout option would; that option is not
// used because the http.TimeoutHandler it wraps holds the whole body in
// memory before sending it (12 MB at 50,000 backends, grown by doubling,
// every scrape).
func (m *Metrics) Handler() http.Handler {
	opts := promhttp.HandlerOpts{
		ErrorHandling:     promhttp.ContinueOnError,
		Registry:          m.reg, // promhttp_metric_handler_errors_total
		EnableOpenMetrics: false,
	}
	// promhttp registers its error counter, finds this one and counts
	// in it: serveText counts in the same series.
	handlerErrors := registerHandlerErrors(m.reg)
	promhttp.HandlerFor(m, opts)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g, err := m.gatherWithin(m.scrapeTimeout)
		if err != nil {
			http.Error(w, fmt.Sprintf("Exceeded configured timeout of %v.", m.scrapeTimeout), http.StatusServiceUnavailable)
			return
		}
		// Nothing gathered and an error: promhttp answers 500.
		if format, gz, ok := plainTextScrape(r); ok && (g.err == nil || g.lua != nil || len(g.families) > 0) {
			m.serveText(w, g, gz, format, handlerErrors)
			return
		}
		families, err := g.allFamilies()
		gatherer := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return families, err })
		promhttp.HandlerFor(gatherer, opts).ServeHTTP(w, r)
	})
}

// errGatherTimeout is gatherWithin's error when Gather took too long.
var errGatherTimeout = errors.New("gathering took longer than the scrape timeout")

// gatherWithin is gather, or errGatherTimeout if it takes longer than
// timeout (it then goes on in the background, its result thrown away).
// Scrapes that arrive while a gather is under way wait for that one and
// share what it gathered, as promhttp's CoalesceGather option does: two
// Prometheus servers scraping together cost one read of Lua (4 MB at
// 50,000 backends), and scrapes that time out leave one gather running,
// not one each. What is gathered is only read from then on.
func (m *Metrics) gatherWithin(timeout time.Duration) (gathered, error) {
	m.inflightMu.Lock()
	c := m.inflight
	if c == nil {
		c = &inflightGather{done: make(chan struct{})}
		m.inflight = c
		go func() {
			defer func() {
				if p := recover(); p != nil {
					c.g = gathered{err: fmt.Errorf("gathering panicked: %v", p)}
				}
				m.inflightMu.Lock()
				m.inflight = nil
				m.inflightMu.Unlock()
				close(c.done)
			}()
			c.g = m.gather()
		}()
	}
	c.scrapes++
	m.inflightMu.Unlock()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-c.done:
		return c.g, nil
	case <-timer.C:
		return gathered{}, errGatherTimeout
	}
}

// inflightGather is the gather under way; g is set when done is closed.
type inflightGather struct {
	done    chan struct{}
	g       gathered
	scrapes int // that came for it (tests)
}

// Synced records one sync.
func (m *Metrics) Synced(path, outcome string, d time.Duration) {
	m.syncDuration.WithLabelValues(path).Observe(d.Seconds())
	m.syncs.WithLabelValues(outcome).Inc()
}

// Reloaded records one reload attempt.
func (m *Metrics) Reloaded(d time.Duration, err error) {
	// The timestamp first: a scrape that sees the new count sees it too.
	if err == nil {
		m.lastReload.SetToCurrentTime()
	} else {
		m.reloadFailures.Inc()
	}
	m.reloadDuration.Observe(d.Seconds())
	m.reloads.Inc()
	if m.ingressNginx != nil {
		m.ingressNginx.reloaded(err)
	}
}

// ReloadUnconfirmed records a reload nginx did not confirm in time.
func (m *Metrics) ReloadUnconfirmed() { m.reloadsUnconfirmed.Inc() }

// Pushed records one POST to Lua.
func (m *Metrics) Pushed(kind string, bytes int, d time.Duration, err error) {
	m.pushes.WithLabelValues(kind).Inc()
	m.pushBytes.WithLabelValues(kind).Add(float64(bytes))
	m.pushDuration.WithLabelValues(kind).Observe(d.Seconds())
	if err != nil {
		m.pushFailures.WithLabelValues(kind).Inc()
	}
}

// ValidationFailed records one thing validation rejected.
func (m *Metrics) ValidationFailed(validator string) {
	m.validationFailures.WithLabelValues(validator).Inc()
}

// Propagated records the time from a source event to its application.
func (m *Metrics) Propagated(d time.Duration) {
	m.eventToPush.Observe(d.Seconds())
}

// ObjectKinds are the kinds restysync_objects reports, always, 0 or not.
var ObjectKinds = []string{"Ingress", "IngressClass", "Service", "EndpointSlice", "Secret"}

// CountObjects counts the objects of a source's snapshot by kind.
func CountObjects(snap model.Snapshot) map[string]int {
	return map[string]int{
		"Ingress":       snap.Ingresses.Len(),
		"IngressClass":  snap.IngressClasses.Len(),
		"Service":       snap.Services.Len(),
		"EndpointSlice": snap.EndpointSlices.Len(),
		"Secret":        snap.Secrets.Len(),
	}
}

// problemKinds are reported by restysync_problems even at 0, so that a
// dashboard has a series to draw.
var problemKinds = []string{"Ingress", "Service", "EndpointSlice", "Secret", "File"}

// stateCollector reads the syncer's state, the source's object counts and
// the leader flag at scrape time.
type stateCollector struct {
	opts        Options
	buildInfo   *prometheus.Desc
	configInfo  *prometheus.Desc
	problems    *prometheus.Desc
	reasons     *prometheus.Desc
	quarantined *prometheus.Desc
	cmRefused   *prometheus.Desc
	objects     *prometheus.Desc
	leader      *prometheus.Desc
	expiry      *prometheus.Desc
}

func newStateCollector(opts Options) *stateCollector {
	name := func(n string) string { return prometheus.BuildFQName(Namespace, "", n) }
	return &stateCollector{
		opts: opts,
		buildInfo: prometheus.NewDesc(name("build_info"),
			"The agent's version, commit and Go version; always 1.", []string{"version", "commit", "goversion"}, nil),
		configInfo: prometheus.NewDesc(name("config_info"),
			"The hash of the nginx.conf nginx is confirmed to run; always 1, absent before the first.", []string{"hash"}, nil),
		problems: prometheus.NewDesc(name("problems"),
			"Problems of the last sync (invalid input left out), by the kind of the object they name.", []string{"kind"}, nil),
		reasons: prometheus.NewDesc(name("problems_by_reason"),
			"Problems of the last sync by class of reason: "+strings.Join(ProblemReasons, ", ")+".", []string{"reason"}, nil),
		quarantined: prometheus.NewDesc(name("quarantined_ingresses"),
			"Ingresses quarantined because nginx rejected a config with them: their last good version serves until they change.", nil, nil),
		cmRefused: prometheus.NewDesc(name("configmap_refused"),
			"1 while the agent's ConfigMap is refused as it is, by nginx or by render (the last version nginx took serves until it changes), else 0.", nil, nil),
		objects: prometheus.NewDesc(name("objects"),
			"Objects the source holds, by kind.", []string{"kind"}, nil),
		leader: prometheus.NewDesc(name("leader"),
			"1 when this replica holds the Lease and writes Ingress status, else 0.", nil, nil),
		expiry: prometheus.NewDesc(name("certificate_nearest_expiry_timestamp_seconds"),
			"Unix time at which the first leaf of the certificates Lua serves expires (the agent parsed each); absent with none.", nil, nil),
	}
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.buildInfo, c.configInfo, c.problems, c.reasons, c.quarantined, c.cmRefused, c.objects, c.leader, c.expiry} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.buildInfo, prometheus.GaugeValue, 1, c.opts.Version, c.opts.Commit, runtime.Version())
	leader := 0.0
	if c.opts.Leader != nil && c.opts.Leader() {
		leader = 1
	}
	ch <- prometheus.MustNewConstMetric(c.leader, prometheus.GaugeValue, leader)
	if c.opts.State == nil {
		ch <- prometheus.MustNewConstMetric(c.quarantined, prometheus.GaugeValue, 0)
		ch <- prometheus.MustNewConstMetric(c.cmRefused, prometheus.GaugeValue, 0)
	}
	if c.opts.State != nil {
		st := c.opts.State()
		ch <- prometheus.MustNewConstMetric(c.quarantined, prometheus.GaugeValue, float64(len(st.Quarantined)))
		cmRefused := 0.0
		if st.ConfigMapRefused != "" {
			cmRefused = 1
		}
		ch <- prometheus.MustNewConstMetric(c.cmRefused, prometheus.GaugeValue, cmRefused)
		if st.ConfigHash != "" {
			ch <- prometheus.MustNewConstMetric(c.configInfo, prometheus.GaugeValue, 1, st.ConfigHash)
		}
		if !st.CertificateNearestExpiry.IsZero() {
			ch <- prometheus.MustNewConstMetric(c.expiry, prometheus.GaugeValue, float64(st.CertificateNearestExpiry.Unix()))
		}
		byKind := map[string]int{}
		for _, k := range problemKinds {
			byKind[k] = 0
		}
		for _, p := range st.Problems {
			byKind[p.Kind]++
		}
		for kind, n := range byKind {
			ch <- prometheus.MustNewConstMetric(c.problems, prometheus.GaugeValue, float64(n), kind)
		}
		byReason := map[string]int{}
		for _, r := range ProblemReasons {
			byReason[r] = 0
		}
		for _, p := range st.Problems {
			byReason[ProblemReason(p)]++
		}
		for reason, n := range byReason {
			ch <- prometheus.MustNewConstMetric(c.reasons, prometheus.GaugeValue, float64(n), reason)
		}
	}
	if c.opts.Objects != nil {
		counts := c.opts.Objects()
		for _, kind := range ObjectKinds {
			ch <- prometheus.MustNewConstMetric(c.objects, prometheus.GaugeValue, float64(counts[kind]), kind)
		}
	}
}

// ProblemReasons are the classes ProblemReason sorts problems into.
var ProblemReasons = []string{"manifest", "tls", "missing_reference", "conflict", "dns", "unsupported", "quarantined", "invalid"}

// ProblemReason classes a problem by its reason, for alerting: a manifest
// that did not decode, a TLS Secret or certificate, a reference to an object
// that is not there, two Ingresses claiming one path or host, a name that
// does not resolve, something not supported, an Ingress nginx rejected, or
// any other invalid value.
func ProblemReason(p model.Problem) string {
	r := strings.ToLower(p.Reason)
	switch {
	case p.Kind == "File":
		return "manifest"
	case strings.HasPrefix(r, "quarantined:"):
		return "quarantined"
	case strings.Contains(r, "spec.tls") || strings.Contains(r, "certificate") || strings.Contains(r, "tls."):
		return "tls"
	case strings.Contains(r, "already served"):
		return "conflict"
	case strings.Contains(r, "does not resolve"):
		return "dns"
	case strings.Contains(r, "not supported") || strings.Contains(r, "refused by design"):
		return "unsupported"
	case strings.Contains(r, "not found") || strings.Contains(r, "is missing") || strings.Contains(r, " has no "):
		return "missing_reference"
	}
	return "invalid"
}
