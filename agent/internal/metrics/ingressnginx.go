package metrics

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/restysync/restysync/agent/internal/apply"
	"github.com/restysync/restysync/agent/internal/luaapi"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/syncer"
)

// IngressNginxNamespace prefixes the series named as ingress-nginx names
// them, so that its dashboards and alerts work unchanged.
const IngressNginxNamespace = "nginx_ingress_controller"

// IngressNginxLua is what the ingress-nginx series read from Lua;
// *apply.LuaClient is one.
type IngressNginxLua interface {
	LuaReader
	RequestMetrics(ctx context.Context) (luaapi.RequestMetrics, error)
}

var _ IngressNginxLua = (*apply.LuaClient)(nil)

// IngressNginx are the options of the series under ingress-nginx's names
// (README: "Metrics"). Their labels and flags are ingress-nginx's:
//
//   - request metrics per Ingress (nginx records them,
//     lua/restysync/requests.lua), with the labels status, method, path,
//     namespace, ingress, service, canary and, with PerHost, host; a
//     route of an HTTPRoute puts its name where the Ingress's would be;
//   - nginx's processes and connections (nginx_process_*);
//   - the reloads and the certificates (config_*, success, errors,
//     ssl_expire_time_seconds).
//
// Every series has the constant labels controller_class, controller_namespace
// and controller_pod but ssl_expire_time_seconds, whose labels are
// namespace, class and host, as ingress-nginx's.
type IngressNginx struct {
	// Class, Namespace and Pod are controller_class (the IngressClass's
	// controller), controller_namespace and controller_pod.
	Class, Namespace, Pod string
	// PerHost adds the host label (--metrics-per-host). A request no
	// route's host served is then left out unless PerUndefinedHost
	// (--metrics-per-undefined-host), which labels it with its Host
	// header (nginx records that only with the flag).
	PerHost, PerUndefinedHost bool
	// ReportStatusClasses turns status codes into classes: 2xx, 3xx, ...
	// (--report-status-classes).
	ReportStatusClasses bool
	// Exclude are request series not exported (--exclude-socket-metrics):
	// names with or without the nginx_ingress_controller_ prefix.
	Exclude []string
	// Lua is asked for the request metrics and nginx's processes on every
	// scrape.
	Lua IngressNginxLua
}

// requestHistograms are the histograms nginx records per series, in the
// order of its values (lua/restysync/requests.lua's HISTOGRAMS), with
// their names, help and which bounds they take. The help texts are
// ingress-nginx's, word for word, so that a migrated estate reads the same.
var requestHistograms = []struct {
	lua, name, help, bounds string
}{
	{"request_duration", "request_duration_seconds", "The request processing time in milliseconds", "time"},
	{"response_duration", "response_duration_seconds", "The time spent on receiving the response from the upstream server", "time"},
	{"connect_duration", "connect_duration_seconds", "The time spent on establishing a connection with the upstream server", "time"},
	{"header_duration", "header_duration_seconds", "The time spent on receiving first header from the upstream server", "time"},
	{"request_size", "request_size", "The request length (including request line, header, and request body)", "length"},
	{"response_size", "response_size", "The response length (including request line, header, and request body)", "length"},
	{"bytes_sent", "bytes_sent", "DEPRECATED The number of bytes sent to a client", "size"},
}

// The help of the requests counter and of the latency summary.
const (
	requestsHelp = "The total number of client requests"
	latencyHelp  = "DEPRECATED Upstream service latency per Ingress"
)

// connectHistogram is the index of connect_duration, which the deprecated
// ingress_upstream_latency_seconds summary also reads.
const connectHistogram = 2

// requestLabels are the labels of a request series, in the order nginx
// joins them; host is dropped without PerHost. (One string: the last
// label quoted alone is an annotation key, which the model names.)
var requestLabels = strings.Fields("namespace ingress service path host status method canary")

// latencyLabels are those of ingress_upstream_latency_seconds.
var latencyLabels = strings.Fields("namespace ingress service canary")

type ingressNginxCollector struct {
	opts    IngressNginx
	timeout time.Duration
	state   func() syncer.State
	// metricsLua reads GET /metrics: opts.Lua, or the read Metrics.Gather
	// shares with the Lua families (sharedLua).
	metricsLua LuaReader
	// requestsRead is the request metrics Metrics.gather read for the
	// gather under way, which it exports itself (written as text by a text
	// scrape: at 4,096 series, dto series were 120 MB a scrape); nil
	// outside one, when Collect reads and exports them.
	requestsRead atomic.Pointer[requestScrape]

	requests   *prometheus.Desc
	histograms []*prometheus.Desc // nil where excluded
	latency    *prometheus.Desc
	dropped    *prometheus.Desc

	connections *prometheus.Desc
	cpu         *prometheus.Desc
	memory      *prometheus.Desc
	procs       *prometheus.Desc

	configHash *prometheus.Desc
	sslExpire  *prometheus.Desc

	reloadOK   prometheus.Gauge
	reloadTime prometheus.Gauge
	success    prometheus.Counter
	errors     prometheus.Counter
	scrapeErrs prometheus.Counter
}

func newIngressNginxCollector(opts IngressNginx, timeout time.Duration, state func() syncer.State) *ingressNginxCollector {
	constLabels := prometheus.Labels{
		"controller_class":     opts.Class,
		"controller_namespace": opts.Namespace,
		"controller_pod":       opts.Pod,
	}
	excluded := opts.excluded()
	labels := requestLabelNames(opts.PerHost)
	name := func(n string) string { return prometheus.BuildFQName(IngressNginxNamespace, "", n) }
	desc := func(n, help string, labels []string) *prometheus.Desc {
		if excluded[n] {
			return nil
		}
		return prometheus.NewDesc(name(n), help, labels, constLabels)
	}
	c := &ingressNginxCollector{
		opts: opts, timeout: timeout, state: state, metricsLua: opts.Lua,
		requests: desc("requests", requestsHelp, labels),
		latency:  desc("ingress_upstream_latency_seconds", latencyHelp, latencyLabels),
		dropped: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "lua", "request_series_dropped_total"),
			"Requests not recorded in the request metrics because the nginx worker that served them held its maximum of series (4096); read from the worker that answered the scrape.", nil, nil),
		connections: prometheus.NewDesc(name("nginx_process_connections"),
			"current number of client connections with state {active, reading, writing, waiting}", []string{"state"}, constLabels),
		cpu: prometheus.NewDesc(name("nginx_process_cpu_seconds_total"),
			"Cpu usage in seconds", nil, constLabels),
		memory: prometheus.NewDesc(name("nginx_process_resident_memory_bytes"),
			"number of bytes of memory in use", nil, constLabels),
		procs: prometheus.NewDesc(name("nginx_process_num_procs"),
			"number of processes", nil, constLabels),
		configHash: prometheus.NewDesc(name("config_hash"),
			"Running configuration hash actually running", nil, constLabels),
		sslExpire: prometheus.NewDesc(name("ssl_expire_time_seconds"),
			"Number of seconds since 1970 to the SSL Certificate expire.\n An example to check if this certificate will expire in 10 days is: \"nginx_ingress_controller_ssl_expire_time_seconds < (time() + (10 * 24 * 3600))\"",
			[]string{"namespace", "class", "host"}, nil),
		reloadOK: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: IngressNginxNamespace, Name: "config_last_reload_successful",
			Help: "Whether the last configuration reload attempt was successful", ConstLabels: constLabels}),
		reloadTime: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: IngressNginxNamespace, Name: "config_last_reload_successful_timestamp_seconds",
			Help: "Timestamp of the last successful configuration reload.", ConstLabels: constLabels}),
		success: prometheus.NewCounter(prometheus.CounterOpts{Namespace: IngressNginxNamespace, Name: "success",
			Help: "Cumulative number of Ingress controller reload operations", ConstLabels: constLabels}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: IngressNginxNamespace, Name: "errors",
			Help: "Cumulative number of Ingress controller errors during reload operations", ConstLabels: constLabels}),
		scrapeErrs: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "lua", Name: "request_metrics_scrape_errors_total",
			Help: "Scrapes for which the Lua config API did not report the request metrics or nginx's processes."}),
	}
	// No reload has failed yet.
	c.reloadOK.Set(1)
	for _, h := range requestHistograms {
		c.histograms = append(c.histograms, desc(h.name, h.help, labels))
	}
	return c
}

// Unrecorded are the histograms (requests.lua's names) no exported series
// reads, so that nginx need not record them (render.RequestMetrics): each
// excluded histogram, but connect_duration while the
// ingress_upstream_latency_seconds summary, which reads it, is exported.
func (in IngressNginx) Unrecorded() []string {
	excluded := in.excluded()
	var out []string
	for i, h := range requestHistograms {
		if excluded[h.name] && (i != connectHistogram || excluded["ingress_upstream_latency_seconds"]) {
			out = append(out, h.lua)
		}
	}
	return out
}

// excluded are the series of Exclude, without the namespace prefix.
func (in IngressNginx) excluded() map[string]bool {
	excluded := map[string]bool{}
	for _, e := range in.Exclude {
		excluded[strings.TrimPrefix(e, IngressNginxNamespace+"_")] = true
	}
	return excluded
}

// requestLabelNames are the labels of the request series as exported.
func requestLabelNames(perHost bool) []string {
	if perHost {
		return requestLabels
	}
	return slices.DeleteFunc(slices.Clone(requestLabels), func(l string) bool { return l == "host" })
}

// reloaded records one reload attempt, as ingress-nginx's ConfigSuccess
// and reload counters.
func (c *ingressNginxCollector) reloaded(err error) {
	if err != nil {
		c.reloadOK.Set(0)
		c.errors.Inc()
		return
	}
	c.reloadTime.SetToCurrentTime()
	c.reloadOK.Set(1)
	c.success.Inc()
}

func (c *ingressNginxCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range append([]*prometheus.Desc{c.requests, c.latency, c.dropped, c.connections, c.cpu, c.memory, c.procs, c.configHash, c.sslExpire}, c.histograms...) {
		if d != nil {
			ch <- d
		}
	}
	for _, m := range []prometheus.Collector{c.reloadOK, c.reloadTime, c.success, c.errors, c.scrapeErrs} {
		m.Describe(ch)
	}
}

func (c *ingressNginxCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range []prometheus.Collector{c.reloadOK, c.reloadTime, c.success, c.errors} {
		m.Collect(ch)
	}
	if c.state != nil {
		c.collectState(ch, c.state())
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	failed := false
	if lm, err := c.metricsLua.Metrics(ctx); err != nil {
		failed = true
	} else if p := lm.Nginx; p != nil {
		ch <- prometheus.MustNewConstMetric(c.procs, prometheus.GaugeValue, float64(p.Procs))
		ch <- prometheus.MustNewConstMetric(c.cpu, prometheus.CounterValue, p.CPUSeconds)
		ch <- prometheus.MustNewConstMetric(c.memory, prometheus.GaugeValue, p.ResidentBytes)
		for _, state := range []string{"active", "reading", "writing", "waiting"} {
			if v, ok := p.Connections[state]; ok {
				ch <- prometheus.MustNewConstMetric(c.connections, prometheus.GaugeValue, v, state)
			}
		}
	}
	if read := c.requestsRead.Load(); read != nil {
		failed = failed || read.err != nil // Metrics.gather exports them
	} else if rs := c.readRequests(ctx); rs.err != nil {
		failed = true
	} else {
		ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, rs.dropped)
		c.collectRequests(ch, rs)
	}
	if failed {
		c.scrapeErrs.Inc()
	}
	c.scrapeErrs.Collect(ch)
}

// collectState exports the config hash and each certificate host's
// expiry from the syncer's state.
func (c *ingressNginxCollector) collectState(ch chan<- prometheus.Metric, st syncer.State) {
	if st.ConfigHash != "" {
		ch <- prometheus.MustNewConstMetric(c.configHash, prometheus.GaugeValue, hashValue(st.ConfigHash))
	}
	seen := map[string]bool{}
	for cert := range st.Model.Certificates.All() {
		if cert.NotAfter.IsZero() {
			continue
		}
		for _, host := range cert.Hosts {
			if host == model.DefaultCertificateHost || seen[host] {
				continue
			}
			seen[host] = true
			ch <- prometheus.MustNewConstMetric(c.sslExpire, prometheus.GaugeValue, float64(cert.NotAfter.Unix()),
				c.opts.Namespace, c.opts.Class, host)
		}
	}
}

// hashValue is a config hash (hex) as a gauge value, as ingress-nginx's
// config_hash: its first 13 hex digits, which a float64 holds exactly.
func hashValue(hash string) float64 {
	n, err := strconv.ParseUint(hash[:min(13, len(hash))], 16, 64)
	if err != nil {
		return 0
	}
	return float64(n)
}

// requestSeries is one exported series: its label values and the sums of
// nginx's series that map to it.
type requestSeries struct {
	labels []string
	values []float64
}

// requestScrape is one scrape's read of the request metrics, aggregated
// into the exported series (aggregate).
type requestScrape struct {
	err     error // the read's; nothing else is set then
	dropped float64
	// bounds are each histogram's bucket bounds (requestHistograms' order);
	// nil when Lua's answer was of another shape: no series then.
	bounds [][]float64
	// series are the exported request series, sorted as the registry sorts
	// a family's series (by label value, labels by name); latency the
	// ingress_upstream_latency_seconds ones, sorted likewise.
	series, latency []*requestSeries
}

// readRequests asks Lua for the request metrics and aggregates them.
func (c *ingressNginxCollector) readRequests(ctx context.Context) requestScrape {
	rm, err := c.opts.Lua.RequestMetrics(ctx)
	if err != nil {
		return requestScrape{err: err}
	}
	return c.aggregate(rm)
}

// aggregate sums nginx's series into the exported ones (host left out
// without PerHost, status classes).
func (c *ingressNginxCollector) aggregate(rm luaapi.RequestMetrics) requestScrape {
	rs := requestScrape{dropped: rm.Dropped}
	byKind := map[string][]float64{"time": rm.Time, "length": rm.Length, "size": rm.Size}
	width := 1
	for _, h := range requestHistograms {
		width += 2 + len(byKind[h.bounds])
	}
	if len(rm.Histograms) != len(requestHistograms) {
		return rs // another Lua: nothing it reports can be read
	}
	for i, h := range requestHistograms {
		if rm.Histograms[i] != h.lua {
			return rs
		}
		rs.bounds = append(rs.bounds, byKind[h.bounds])
	}
	series := map[string]*requestSeries{}
	for _, s := range rm.Series {
		values := strings.Split(s.Labels, "\x01")
		if len(values) != len(requestLabels) || len(s.Values) != width {
			continue
		}
		host := values[4]
		if c.opts.PerHost && host == "" && !c.opts.PerUndefinedHost {
			continue // a request of no route's host, as ingress-nginx
		}
		if c.opts.ReportStatusClasses && values[5] != "" {
			values[5] = values[5][:1] + "xx"
		}
		if !c.opts.PerHost {
			values = slices.Delete(values, 4, 5)
		}
		key := strings.Join(values, "\x01")
		agg, ok := series[key]
		if !ok {
			agg = &requestSeries{labels: values, values: make([]float64, width)}
			series[key] = agg
			rs.series = append(rs.series, agg)
		}
		for i, v := range s.Values {
			agg.values[i] += v
		}
	}
	sortSeries(rs.series, requestLabelNames(c.opts.PerHost))
	latency := map[string]*requestSeries{}
	for _, s := range rs.series {
		at := 1
		for i, b := range rs.bounds {
			if count, sum := s.values[at], s.values[at+1]; i == connectHistogram && count > 0 {
				// namespace, ingress, service and canary (the last label).
				l := []string{s.labels[0], s.labels[1], s.labels[2], s.labels[len(s.labels)-1]}
				lkey := strings.Join(l, "\x01")
				agg, ok := latency[lkey]
				if !ok {
					agg = &requestSeries{labels: l, values: make([]float64, 2)}
					latency[lkey] = agg
					rs.latency = append(rs.latency, agg)
				}
				agg.values[0] += count
				agg.values[1] += sum
			}
			at += 2 + len(b)
		}
	}
	sortSeries(rs.latency, latencyLabels)
	return rs
}

// sortSeries sorts series as the registry sorts a family's: by their label
// values taken in the order of the labels' names (names are their labels').
func sortSeries(series []*requestSeries, names []string) {
	order := make([]int, len(names))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(names[a], names[b]) })
	slices.SortFunc(series, func(a, b *requestSeries) int {
		for _, i := range order {
			if c := strings.Compare(a.labels[i], b.labels[i]); c != 0 {
				return c
			}
		}
		return 0
	})
}

// collectRequests exports rs's series.
func (c *ingressNginxCollector) collectRequests(ch chan<- prometheus.Metric, rs requestScrape) {
	for _, s := range rs.series {
		if c.requests != nil {
			ch <- prometheus.MustNewConstMetric(c.requests, prometheus.CounterValue, s.values[0], s.labels...)
		}
		at := 1
		for i, b := range rs.bounds {
			count, sum := s.values[at], s.values[at+1]
			if d := c.histograms[i]; d != nil && count > 0 {
				buckets := make(map[float64]uint64, len(b))
				cumulative := 0.0
				for j, le := range b {
					cumulative += s.values[at+2+j]
					buckets[le] = uint64(cumulative)
				}
				ch <- prometheus.MustNewConstHistogram(d, uint64(count), sum, buckets, s.labels...)
			}
			at += 2 + len(b)
		}
	}
	if c.latency == nil {
		return
	}
	for _, l := range rs.latency {
		ch <- prometheus.MustNewConstSummary(c.latency, uint64(l.values[0]), l.values[1], map[float64]float64{}, l.labels...)
	}
}

// requestFamilies are rs's families as dto, as Collect would have exported
// them, through a registry of their own; only dropped's unless series.
func (c *ingressNginxCollector) requestFamilies(rs *requestScrape, series bool) ([]*dto.MetricFamily, error) {
	if rs.err != nil {
		return nil, nil
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(requestCollector{c, rs, series}); err != nil {
		return nil, err
	}
	return reg.Gather()
}

// requestCollector exports one requestScrape.
type requestCollector struct {
	c      *ingressNginxCollector
	rs     *requestScrape
	series bool
}

func (r requestCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- r.c.dropped
	if !r.series {
		return
	}
	for _, d := range append([]*prometheus.Desc{r.c.requests, r.c.latency}, r.c.histograms...) {
		if d != nil {
			ch <- d
		}
	}
}

func (r requestCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(r.c.dropped, prometheus.CounterValue, r.rs.dropped)
	if r.series {
		r.c.collectRequests(ch, *r.rs)
	}
}
