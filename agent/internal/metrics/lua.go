package metrics

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/restysync/restysync/agent/internal/luaapi"
)

// luaGatherer asks Lua for its counters on every scrape and builds the
// restysync_lua_* families itself, outside the registry.
//
// Three of them have a series per backend: 150,000 series at 50,000
// Ingresses. Through a collector each series was a const metric (its
// labels checked and sorted, a dto written, a hash for duplicates), some
// ten allocations, and a scrape took over a second of CPU. Here a family's
// series are a few arrays, filled in one pass over Lua's list, which is
// sorted by name already (sorted here only if not) and has its
// duplicates, which the registry would have refused, dropped. Metrics.Gather
// merges these families with the registry's.
type luaGatherer struct {
	lua     LuaReader
	timeout time.Duration
	errors  atomic.Uint64 // restysync_lua_scrape_errors_total
}

func newLuaGatherer(lua LuaReader, timeout time.Duration) *luaGatherer {
	return &luaGatherer{lua: lua, timeout: timeout}
}

// luaName is restysync_lua_<n>.
func luaName(n string) string { return prometheus.BuildFQName(Namespace, "lua", n) }

// The Lua families: names, help and types.
var (
	luaUp = luaFamily("up", dto.MetricType_GAUGE,
		"1 when the Lua config API answered this scrape, else 0 (nginx down, or slower than the scrape timeout).")
	luaScrapeErrors = luaFamily("scrape_errors_total", dto.MetricType_COUNTER,
		"Scrapes for which the Lua config API did not answer.")
	luaEndpoints = luaFamily("backend_endpoints", dto.MetricType_GAUGE,
		"Endpoints Lua holds for each backend.")
	luaRequests = luaFamily("backend_requests_total", dto.MetricType_COUNTER,
		"Requests nginx proxied to each backend (any status), counted by the Lua balancer.")
	luaFailures = luaFamily("backend_failures_total", dto.MetricType_COUNTER,
		"Requests to each backend that ended in 502, 503 or 504: no endpoint, none reachable, or a timeout.")
	luaRebuilds = luaFamily("balancer_rebuilds_total", dto.MetricType_COUNTER,
		"Times an nginx worker rebuilt its copy of a backend after a push.")
	luaRegexes = luaFamily("regex_failures_total", dto.MetricType_COUNTER,
		"Regexes that could not decide a request (a use-regex path, which then answers 500, or a canary-by-header-pattern): "+
			"PCRE's match limit or JIT stack, or the request's regex budget spent.")
	luaCertificates = luaFamily("certificates", dto.MetricType_GAUGE,
		"Certificates Lua holds and serves by SNI.")
	luaAPIDenied = luaFamily("api_denied_total", dto.MetricType_COUNTER,
		"Requests the Lua config API refused (403): without the agent's secret, or sent by nginx itself (a mirror, an auth request).")
	luaLoopRefused = luaFamily("loop_refused_total", dto.MetricType_COUNTER,
		"Requests answered 508 Loop Detected: they came back into nginx through its own auth or mirror request "+
			"(a tenant's auth-url, global-auth-url or mirror-target resolving to nginx) and would have sent another.")
)

// backendLabel is the label of the per-backend series.
const backendLabel = "backend"

// family is a family's name, help and type, from which each scrape makes
// a new dto.MetricFamily (the encoders must not see one change).
type family struct {
	name, help string
	typ        dto.MetricType
}

func luaFamily(n string, typ dto.MetricType, help string) family {
	return family{name: luaName(n), help: help, typ: typ}
}

func (f family) with(metrics []*dto.Metric) *dto.MetricFamily {
	return &dto.MetricFamily{Name: proto.String(f.name), Help: proto.String(f.help), Type: f.typ.Enum(), Metric: metrics}
}

// single is f with one series without labels.
func (f family) single(v float64) *dto.MetricFamily {
	m := &dto.Metric{}
	if f.typ == dto.MetricType_COUNTER {
		m.Counter = &dto.Counter{Value: proto.Float64(v)}
	} else {
		m.Gauge = &dto.Gauge{Value: proto.Float64(v)}
	}
	return f.with([]*dto.Metric{m})
}

// luaScrape is one scrape's read of Lua, before it is encoded: as dto
// families (families, for protobuf and Gather) or as text straight from
// backends (textWriter.backendFamily), which at 50,000 backends spares a
// scrape the 150,000 dto series.
type luaScrape struct {
	up     bool
	errors uint64 // restysync_lua_scrape_errors_total
	m      luaapi.LuaMetrics
	// backends are m.Backends sorted by name, a name's first entry only,
	// in valid UTF-8 (uniqueBackends).
	backends luaapi.BackendList
}

// read asks Lua; when Lua does not answer, lua_up 0 and the error counted.
func (g *luaGatherer) read() luaScrape {
	ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
	defer cancel()
	lm, err := g.lua.Metrics(ctx)
	if err != nil {
		return luaScrape{errors: g.errors.Add(1)}
	}
	return luaScrape{up: true, errors: g.errors.Load(), m: lm, backends: uniqueBackends(lm.Backends)}
}

// families are every Lua family as dto: the single ones and, with
// backends, the three per-backend ones.
func (s luaScrape) families() []*dto.MetricFamily {
	return append(s.singleFamilies(), backendFamilies(s.backends)...)
}

// singleFamilies are the Lua families of one series each: only lua_up 0
// and the error count when Lua did not answer.
func (s luaScrape) singleFamilies() []*dto.MetricFamily {
	if !s.up {
		return []*dto.MetricFamily{luaUp.single(0), luaScrapeErrors.single(float64(s.errors))}
	}
	return []*dto.MetricFamily{
		luaUp.single(1),
		luaScrapeErrors.single(float64(s.errors)),
		luaRebuilds.single(float64(s.m.BalancerRebuilds)),
		luaRegexes.single(float64(s.m.RegexFailures)),
		luaCertificates.single(float64(s.m.Certificates)),
		luaAPIDenied.single(float64(s.m.APIDenied)),
		luaLoopRefused.single(float64(s.m.LoopRefused)),
	}
}

// perBackend are the three per-backend families, sorted by name, with
// the number of a backend each reports.
var perBackend = [...]struct {
	family
	value func(luaapi.BackendMetrics) float64
}{
	{luaEndpoints, func(b luaapi.BackendMetrics) float64 { return float64(b.Endpoints) }},
	{luaFailures, func(b luaapi.BackendMetrics) float64 { return float64(b.Failures) }},
	{luaRequests, func(b luaapi.BackendMetrics) float64 { return float64(b.Requests) }},
}

// uniqueBackends are backends sorted by name, a name's first entry only
// (the registry would have refused a duplicate, failing the whole
// scrape), each name valid UTF-8 as encoding/json would have read it:
// backends itself when it is so (as Lua writes it), else a new list.
func uniqueBackends(backends luaapi.BackendList) luaapi.BackendList {
	previous, first := "", true
	for b := range backends.All() {
		if !utf8.ValidString(b.Name) || (!first && b.Name <= previous) {
			return luaapi.BackendListOf(uniqueBackendSlice(slices.Collect(backends.All()))...)
		}
		previous, first = b.Name, false
	}
	return backends
}

// uniqueBackendSlice is uniqueBackends of a slice, sorted in place.
func uniqueBackendSlice(backends []luaapi.BackendMetrics) []luaapi.BackendMetrics {
	for i, b := range backends {
		if !utf8.ValidString(b.Name) {
			backends[i].Name = strings.ToValidUTF8(b.Name, string(utf8.RuneError))
		}
	}
	byName := func(a, b luaapi.BackendMetrics) int { return cmp.Compare(a.Name, b.Name) }
	slices.SortStableFunc(backends, byName)
	return slices.CompactFunc(backends, func(a, b luaapi.BackendMetrics) bool { return a.Name == b.Name })
}

// backendFamilies are the three per-backend families of backends
// (uniqueBackends), as dto; none without backends (as the registry leaves
// out a family without series).
func backendFamilies(backends luaapi.BackendList) []*dto.MetricFamily {
	n := backends.Len()
	if n == 0 {
		return nil
	}
	// One array per kind of thing for all three families: a scrape at
	// 50,000 backends makes a dozen allocations here, not 150,000 series'.
	var (
		metrics  = make([]dto.Metric, 3*n)
		pointers = make([]*dto.Metric, 3*n)
		values   = make([]float64, 3*n)
		gauges   = make([]dto.Gauge, n)
		counters = make([]dto.Counter, 2*n)
		pairs    = make([]dto.LabelPair, n)
		labels   = make([]*dto.LabelPair, n)
		names    = make([]string, n)
	)
	label, j := backendLabel, 0
	for b := range backends.All() {
		names[j] = b.Name
		pairs[j] = dto.LabelPair{Name: &label, Value: &names[j]}
		labels[j] = &pairs[j]
		l := labels[j : j+1 : j+1]
		values[j], values[n+j], values[2*n+j] = float64(b.Endpoints), float64(b.Requests), float64(b.Failures)
		gauges[j].Value = &values[j]
		counters[j].Value = &values[n+j]
		counters[n+j].Value = &values[2*n+j]
		metrics[j].Label, metrics[j].Gauge = l, &gauges[j]
		metrics[n+j].Label, metrics[n+j].Counter = l, &counters[j]
		metrics[2*n+j].Label, metrics[2*n+j].Counter = l, &counters[n+j]
		j++
	}
	for i := range metrics {
		pointers[i] = &metrics[i]
	}
	return []*dto.MetricFamily{
		luaEndpoints.with(pointers[:n:n]),
		luaRequests.with(pointers[n : 2*n : 2*n]),
		luaFailures.with(pointers[2*n:]),
	}
}
