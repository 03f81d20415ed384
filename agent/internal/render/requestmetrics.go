package render

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/restysync/restysync/agent/internal/model"
)

// RequestMetrics turns on the request metrics per Ingress
// (lua/restysync/requests.lua): each worker records every request into its
// own memory and flushes to the restysync_requests dict about once a
// second; the agent exports them under ingress-nginx's names. The bounds
// are the histograms' buckets (--time-buckets, --length-buckets,
// --size-buckets).
type RequestMetrics struct {
	Time, Length, Size []float64
	// UndefinedHost labels a request no route's host served with its Host
	// header (--metrics-per-undefined-host), else with "".
	UndefinedHost bool
	// Unrecorded are histograms (RequestHistograms) nginx does not record,
	// because no exported series reads them (--exclude-socket-metrics):
	// each but request_duration costs a read of an nginx variable per
	// request.
	Unrecorded []string
}

// RequestHistograms are the histograms nginx records per series, in the
// order of lua/restysync/requests.lua's HISTOGRAMS.
var RequestHistograms = []string{"request_duration", "response_duration", "connect_duration", "header_duration",
	"request_size", "response_size", "bytes_sent"}

// DefaultRequestMetrics are ingress-nginx's default buckets: Prometheus's
// default for times, 10 to 100 by 10 for lengths, 10 to 10⁷ by ×10 for
// sizes.
func DefaultRequestMetrics() RequestMetrics {
	return RequestMetrics{
		Time:   []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		Length: []float64{10, 20, 30, 40, 50, 60, 70, 80, 90, 100},
		Size:   []float64{10, 100, 1000, 10000, 100000, 1e6, 1e7},
	}
}

// requestMetricsDict is the size of the restysync_requests dict: about
// 6000 series at ~35 non-zero fields each.
const requestMetricsDict = "32m"

// MaxBuckets bounds each list of bucket bounds (Lua refuses more).
const MaxBuckets = 64

// CheckBuckets accepts 1 to MaxBuckets finite, increasing bounds.
func CheckBuckets(b []float64) error {
	if len(b) == 0 || len(b) > MaxBuckets {
		return fmt.Errorf("want 1 to %d bounds, got %d", MaxBuckets, len(b))
	}
	for i, v := range b {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("bound %d is not a finite number", i+1)
		}
		if i > 0 && v <= b[i-1] {
			return fmt.Errorf("bounds must increase: %g after %g", v, b[i-1])
		}
	}
	return nil
}

// requestMetricsView is RequestMetrics as the template prints it.
type requestMetricsView struct {
	DictSize           string
	Time, Length, Size string
	UndefinedHost      bool
	// Skip is a Lua table's fields: "name = true" for each histogram of
	// Unrecorded, one of RequestHistograms.
	Skip string
}

func newRequestMetricsView(r *RequestMetrics) (*requestMetricsView, error) {
	if r == nil {
		return nil, nil
	}
	view := &requestMetricsView{DictSize: requestMetricsDict, UndefinedHost: r.UndefinedHost}
	for _, b := range []struct {
		name   string
		bounds []float64
		out    *string
	}{{"time", r.Time, &view.Time}, {"length", r.Length, &view.Length}, {"size", r.Size, &view.Size}} {
		if err := CheckBuckets(b.bounds); err != nil {
			return nil, fmt.Errorf("request metrics: %s buckets: %w", b.name, err)
		}
		parts := make([]string, len(b.bounds))
		for i, v := range b.bounds {
			parts[i] = strconv.FormatFloat(v, 'g', -1, 64)
		}
		*b.out = strings.Join(parts, ", ")
	}
	var skip []string
	for _, h := range r.Unrecorded {
		if !slices.Contains(RequestHistograms, h) {
			return nil, fmt.Errorf("request metrics: no histogram %q", h)
		}
		skip = append(skip, h+" = true")
	}
	view.Skip = strings.Join(skip, ", ")
	return view, nil
}

// metricSeparator joins a location's labels in RouteLocation.Metric.
const metricSeparator = "\x01"

// metricLabels is RouteLocation.Metric: the namespace and name of the
// owner (an Ingress "namespace/name", or a route "HTTPRoute
// namespace/name"), the service of backend ("namespace/service:port"),
// the path and the host ("" for the default server's, which the agent
// then leaves out unless --metrics-per-undefined-host). Control
// characters are dropped: they separate the labels.
func metricLabels(owner, backend, path, host string) string {
	if _, name, ok := strings.Cut(owner, " "); ok {
		owner = name // "HTTPRoute namespace/name"
	}
	namespace, name, _ := strings.Cut(owner, "/")
	service := ""
	if _, rest, ok := strings.Cut(backend, "/"); ok {
		service, _, _ = strings.Cut(rest, ":")
	}
	if host == DefaultRoute {
		host = ""
	}
	labels := []string{namespace, name, service, path, host}
	for i, l := range labels {
		labels[i] = strings.Map(func(r rune) rune {
			if r < 0x20 || r == 0x7f {
				return -1
			}
			return r
		}, l)
	}
	out := strings.Join(labels, metricSeparator)
	if len(out) > maxMetricBytes {
		// Lua refuses longer: the path, last but one, is cut.
		cut := len(out) - maxMetricBytes
		labels[3] = labels[3][:max(0, len(labels[3])-cut)]
		out = strings.Join(labels, metricSeparator)
	}
	return out
}

// maxMetricBytes is Lua's bound on a location's metric labels.
const maxMetricBytes = 1024

// gatewayMetricLabels returns the Gateway routes with each location's
// Metric set from its rule's owner and first backend, in new slices (the
// model's stay as they are).
func gatewayMetricLabels(routes []model.Route) []model.Route {
	out := make([]model.Route, len(routes))
	for i, r := range routes {
		out[i] = gatewayRouteLabels(r)
	}
	return out
}

// withMetric is l with metric as its Metric.
func withMetric(l model.RouteLocation, metric string) model.RouteLocation {
	l.Metric = metric
	return l
}

// gatewayRouteLabels is r with each location's Metric set, as
// gatewayMetricLabels does.
func gatewayRouteLabels(r model.Route) model.Route {
	locations := make([]model.RouteLocation, len(r.Locations))
	_, host, _ := strings.Cut(r.Host, " ") // FrontKey(front, host)
	for j, l := range r.Locations {
		owner, backend := "", l.Backend
		if l.Rule != nil {
			owner = l.Rule.Route
			if backend == "" && len(l.Rule.Backends) > 0 {
				backend = l.Rule.Backends[0].Backend
			}
		}
		locations[j] = withMetric(l, metricLabels(owner, backend, l.Path, host))
	}
	r.Locations = locations
	return r
}
