package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/restysync/restysync/agent/internal/admin"
	"github.com/restysync/restysync/agent/internal/apply"
	"github.com/restysync/restysync/agent/internal/metrics"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
	"github.com/restysync/restysync/agent/internal/source"
	"github.com/restysync/restysync/agent/internal/syncer"
)

// defaultMetricsAddress is loopback: nothing outside the pod should reach
// the admin server, whose /debug/state lists every tenant's hosts,
// backends and endpoints. The kubelet's probes and Prometheus reach
// /metrics, /healthz and /readyz on --metrics-probes-address, which the
// chart sets to 0.0.0.0:10254 (its admin server then listens on
// 127.0.0.1:10255).
const defaultMetricsAddress = "127.0.0.1:10254"

func adminFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "metrics-address", Value: defaultMetricsAddress, EnvVars: env("METRICS_ADDRESS"),
			Usage: "`HOST:PORT` of the admin server: /metrics, /healthz, /readyz, /debug/state (empty: no server); keep it on loopback, /debug/state shows every tenant's configuration"},
		&cli.StringFlag{Name: "metrics-probes-address", EnvVars: env("METRICS_PROBES_ADDRESS"),
			Usage: "`HOST:PORT` of a second listener that serves only /metrics, /healthz and /readyz, for the kubelet's probes and Prometheus on the pod network (default empty: none)"},
		&cli.BoolFlag{Name: "ingress-nginx-metrics", Value: true, EnvVars: env("INGRESS_NGINX_METRICS"),
			Usage: "export the series under ingress-nginx's names (nginx_ingress_controller_*: requests per Ingress, latency and size histograms, nginx's processes, reloads, certificates), which nginx records per request; false: none of them, and nginx records nothing"},
		&cli.BoolFlag{Name: "metrics-per-host", Value: true, EnvVars: env("METRICS_PER_HOST"),
			Usage: "label the request series with the host (ingress-nginx's flag); requests for no route's host are then left out unless --metrics-per-undefined-host"},
		&cli.BoolFlag{Name: "metrics-per-undefined-host", EnvVars: env("METRICS_PER_UNDEFINED_HOST"),
			Usage: "with --metrics-per-host, also count requests for hosts no route names, labelled with their Host header (any client can make series up: each nginx worker keeps at most 4096)"},
		&cli.BoolFlag{Name: "report-status-classes", EnvVars: env("REPORT_STATUS_CLASSES"),
			Usage: "label the request series with status classes (2xx, 3xx, 4xx, 5xx) instead of status codes"},
		&cli.StringSliceFlag{Name: "exclude-socket-metrics", EnvVars: env("EXCLUDE_SOCKET_METRICS"),
			Usage: "request series not to export, by `NAME` (comma-separated or repeated; with or without nginx_ingress_controller_), e.g. bytes_sent,ingress_upstream_latency_seconds; nginx then no longer reads, per request, the variables only they need"},
		&cli.Float64SliceFlag{Name: "time-buckets", Value: cli.NewFloat64Slice(render.DefaultRequestMetrics().Time...), EnvVars: env("TIME_BUCKETS"),
			Usage: "bucket bounds (seconds) of the request, response, connect and header duration histograms"},
		&cli.Float64SliceFlag{Name: "length-buckets", Value: cli.NewFloat64Slice(render.DefaultRequestMetrics().Length...), EnvVars: env("LENGTH_BUCKETS"),
			Usage: "bucket bounds (bytes) of the request_size and response_size histograms"},
		&cli.Float64SliceFlag{Name: "size-buckets", Value: cli.NewFloat64Slice(render.DefaultRequestMetrics().Size...), EnvVars: env("SIZE_BUCKETS"),
			Usage: "bucket bounds (bytes) of the bytes_sent histogram"},
		&cli.BoolFlag{Name: "profiling", EnvVars: env("PROFILING"),
			Usage: "serve Go's profiles under /debug/pprof/ on --metrics-address (never on --metrics-probes-address); off by default, unlike ingress-nginx"},
	}
}

// parseIngressNginxMetrics reads the flags of the series under
// ingress-nginx's names: what nginx records (nil: nothing) and how the
// agent exports it. podName and namespace are controller_pod and
// controller_namespace.
func parseIngressNginxMetrics(c *cli.Context, podName, namespace string) (*render.RequestMetrics, *metrics.IngressNginx, error) {
	if !c.Bool("ingress-nginx-metrics") {
		return nil, nil, nil
	}
	if c.Bool("metrics-per-undefined-host") && !c.Bool("metrics-per-host") {
		return nil, nil, fmt.Errorf("--metrics-per-undefined-host needs --metrics-per-host")
	}
	rm := &render.RequestMetrics{
		Time:          c.Float64Slice("time-buckets"),
		Length:        c.Float64Slice("length-buckets"),
		Size:          c.Float64Slice("size-buckets"),
		UndefinedHost: c.Bool("metrics-per-undefined-host"),
	}
	for flag, b := range map[string][]float64{"time-buckets": rm.Time, "length-buckets": rm.Length, "size-buckets": rm.Size} {
		if err := render.CheckBuckets(b); err != nil {
			return nil, nil, fmt.Errorf("--%s: %w", flag, err)
		}
	}
	in := &metrics.IngressNginx{
		Class:               model.ControllerName,
		Namespace:           namespace,
		Pod:                 podName,
		PerHost:             c.Bool("metrics-per-host"),
		PerUndefinedHost:    c.Bool("metrics-per-undefined-host"),
		ReportStatusClasses: c.Bool("report-status-classes"),
		Exclude:             c.StringSlice("exclude-socket-metrics"),
	}
	rm.Unrecorded = in.Unrecorded()
	return rm, in, nil
}

// parseMetricsAddress validates an address flag; "" turns its listener
// off.
func parseMetricsAddress(c *cli.Context, flag string) (string, error) {
	addr := c.String(flag)
	if addr == "" {
		return "", nil
	}
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
		return "", fmt.Errorf("--%s %q: want HOST:PORT", flag, addr)
	}
	return addr, nil
}

// observability is the agent's metrics and admin server. listenAdmin binds
// the address at start, so that a port in use stops the agent at once.
type observability struct {
	ln net.Listener // nil when there is no admin server
	// probes is the listener of /metrics, /healthz and /readyz alone
	// (--metrics-probes-address), nil when there is none.
	probes net.Listener
	// profiling serves /debug/pprof/ on ln (--profiling).
	profiling bool
	metrics   *metrics.Metrics
	// objects is the source before any wrapper, counted at scrape time.
	objects source.Source
	// leader says whether this replica writes Ingress status (nil: never).
	leader func() bool
	state  func() syncer.State
	// ingressNginx are the options of the series under ingress-nginx's
	// names (nil: off).
	ingressNginx *metrics.IngressNginx
}

func listenAdmin(address, probesAddress string) (*observability, error) {
	obs := &observability{}
	if address != "" {
		ln, err := net.Listen("tcp", address)
		if err != nil {
			return nil, fmt.Errorf("--metrics-address %s: %w", address, err)
		}
		obs.ln = ln
	}
	if probesAddress != "" {
		ln, err := net.Listen("tcp", probesAddress)
		if err != nil {
			if obs.ln != nil {
				obs.ln.Close()
			}
			return nil, fmt.Errorf("--metrics-probes-address %s: %w", probesAddress, err)
		}
		obs.probes = ln
	}
	return obs, nil
}

// ports are the TCP ports the admin listeners took.
func (o *observability) ports() []int32 {
	var out []int32
	for _, ln := range []net.Listener{o.ln, o.probes} {
		if addr, ok := ln.(*net.TCPListener); ok {
			out = append(out, int32(addr.Addr().(*net.TCPAddr).Port))
		}
	}
	return out
}

// syncerMetrics builds the registry and returns what the syncer reports to
// (nil without an admin server). Call it once the source is known.
func (o *observability) syncerMetrics(lua *apply.LuaClient) syncer.Metrics {
	if o.ln == nil && o.probes == nil {
		return nil
	}
	opts := metrics.Options{
		Version: version,
		Commit:  commitString(),
		State:   func() syncer.State { return o.state() },
		Objects: func() map[string]int {
			snap, _ := o.objects.Snapshot()
			return metrics.CountObjects(snap)
		},
		Leader: func() bool { return o.leader != nil && o.leader() },
		Lua:    lua,
	}
	if o.ingressNginx != nil {
		in := *o.ingressNginx
		in.Lua = lua
		opts.IngressNginx = &in
	}
	o.metrics = metrics.New(opts)
	return o.metrics
}

// serve runs the admin server until ctx is done.
func (o *observability) serve(ctx context.Context, s *syncer.Syncer, lua *apply.LuaClient, reloadTimeout time.Duration, logger *slog.Logger) {
	if o.ln == nil && o.probes == nil {
		return
	}
	o.state = s.State
	srv := admin.New(admin.Options{
		Metrics: o.metrics.Handler(),
		State:   s.State,
		Lua:     lua,
		// A sync may wait a whole reload timeout for nginx, and then again
		// for the restored config; only well past that is the loop stuck.
		StuckAfter: max(30*time.Second, 2*reloadTimeout+10*time.Second),
		Logger:     logger.With("component", "admin"),
		Profiling:  o.profiling,
	})
	if o.ln != nil {
		logger.Info("admin server listening", "address", o.ln.Addr().String(),
			"paths", "/metrics /healthz /readyz /debug/state")
		go func() {
			if err := srv.Serve(ctx, o.ln); err != nil {
				logger.Error("admin server stopped", "error", err)
			}
		}()
	}
	if o.probes != nil {
		logger.Info("metrics and probes listening", "address", o.probes.Addr().String(),
			"paths", "/metrics /healthz /readyz")
		go func() {
			if err := srv.ServeProbes(ctx, o.probes); err != nil {
				logger.Error("metrics and probes listener stopped", "error", err)
			}
		}()
	}
}

// podName is --pod-name, or the host name (the pod's name in a pod).
func podName(c *cli.Context) string {
	if name := c.String("pod-name"); name != "" {
		return name
	}
	name, _ := os.Hostname()
	return name
}
