package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/restysync/restysync/agent/internal/admin"
	"github.com/restysync/restysync/agent/internal/apply"
	"github.com/restysync/restysync/agent/internal/metrics"
	"github.com/restysync/restysync/agent/internal/source"
	"github.com/restysync/restysync/agent/internal/syncer"
)

// defaultMetricsAddress is loopback: outside a pod nothing else should
// reach the admin server. In a pod the chart sets 0.0.0.0:10254 so that the
// kubelet's probes and Prometheus reach it.
const defaultMetricsAddress = "127.0.0.1:10254"

func adminFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "metrics-address", Value: defaultMetricsAddress, EnvVars: env("METRICS_ADDRESS"),
			Usage: "`HOST:PORT` of the admin server: /metrics, /healthz, /readyz, /debug/state (empty: no server)"},
	}
}

// parseMetricsAddress validates --metrics-address; "" turns the server off.
func parseMetricsAddress(c *cli.Context) (string, error) {
	addr := c.String("metrics-address")
	if addr == "" {
		return "", nil
	}
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
		return "", fmt.Errorf("--metrics-address %q: want HOST:PORT", addr)
	}
	return addr, nil
}

// observability is the agent's metrics and admin server. listenAdmin binds
// the address at start, so that a port in use stops the agent at once.
type observability struct {
	ln      net.Listener // nil when there is no admin server
	metrics *metrics.Metrics
	// objects is the source before any wrapper, counted at scrape time.
	objects source.Source
	// leader says whether this replica writes Ingress status (nil: never).
	leader func() bool
	state  func() syncer.State
}

func listenAdmin(address string) (*observability, error) {
	obs := &observability{}
	if address == "" {
		return obs, nil
	}
	ln, err := net.Listen("tcp", address)
	if err != nil {
		return nil, fmt.Errorf("--metrics-address %s: %w", address, err)
	}
	obs.ln = ln
	return obs, nil
}

// syncerMetrics builds the registry and returns what the syncer reports to
// (nil without an admin server). Call it once the source is known.
func (o *observability) syncerMetrics(lua *apply.LuaClient) syncer.Metrics {
	if o.ln == nil {
		return nil
	}
	o.metrics = metrics.New(metrics.Options{
		Version: version,
		Commit:  commitString(),
		State:   func() syncer.State { return o.state() },
		Objects: func() map[string]int {
			snap, _ := o.objects.Snapshot()
			return metrics.CountObjects(snap)
		},
		Leader: func() bool { return o.leader != nil && o.leader() },
		Lua:    lua,
	})
	return o.metrics
}

// serve runs the admin server until ctx is done.
func (o *observability) serve(ctx context.Context, s *syncer.Syncer, lua *apply.LuaClient, reloadTimeout time.Duration, logger *slog.Logger) {
	if o.ln == nil {
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
	})
	logger.Info("admin server listening", "address", o.ln.Addr().String(),
		"paths", "/metrics /healthz /readyz /debug/state")
	go func() {
		if err := srv.Serve(ctx, o.ln); err != nil {
			logger.Error("admin server stopped", "error", err)
		}
	}()
}
