package kube

// Reconnecting after an API server outage.
//
// A client-go reflector that fails to list or watch sleeps before it tries
// again, and the sleep doubles on each failure: from 0.8 s to a 30 s cap,
// each with up to 100 % jitter, so after a minute of outage a reflector may
// sleep up to a minute after the API server is back. client-go v0.37 has no
// way to set that backoff for shared informers (ReflectorOptions.Backoff is
// not reachable through a SharedIndexInformer).
//
// So the reflectors are kept from failing in the first place: every
// informer lists and watches through a reconnectingListWatcher, whose List
// and Watch wait out an outage instead of returning its error. The first call
// that meets one (connection refused or reset, a dropped connection, a
// timeout, 503) probes the API server's /readyz every probeInterval; every
// call that meets the outage meanwhile waits for that one probe, so the
// probe rate is the same whatever the number of informers. When /readyz
// answers 200 every waiting call is made again at once, and the reflectors
// carry on from where they were, without having slept. A call is also made
// again every outageRetry whatever /readyz says (a server that forbids
// /readyz), so the real requests are bounded too.
//
// The caches are never replaced or emptied meanwhile: the informers keep
// what they have and the source keeps serving it. Only the reflectors' own
// answer to the end of the outage (a relist, or a watch from the last
// resource version) is left to client-go, and costs at most one first step
// of its backoff. The client is only used for what the informers already
// do; /readyz is readable by every authenticated user
// (system:public-info-viewer), so no permission is added.

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/restysync/restysync/agent/internal/kubeclient"
)

// Variables for the tests.
var (
	// probeInterval is how often /readyz is asked during an outage.
	probeInterval = 500 * time.Millisecond
	// probeTimeout bounds one /readyz request.
	probeTimeout = 2 * time.Second
	// outageRetry is how often a waiting call is made again anyway.
	outageRetry = 10 * time.Second
)

// reconnector is shared by the informers of one Source: it holds the one
// wait for the API server to come back.
type reconnector struct {
	// probe says whether the API server is ready; nil when the client has
	// no REST client (a fake), and then only outageRetry ends a wait.
	probe    func(context.Context) bool
	logger   *slog.Logger
	interval time.Duration
	retry    time.Duration

	mu        sync.Mutex
	back      chan struct{} // closed when the current wait ends; nil when none
	down      bool          // an outage was met and no call has got through since
	downSince time.Time
}

func newReconnector(client kubeclient.Interface, logger *slog.Logger) *reconnector {
	return &reconnector{probe: readyzProbe(client), logger: logger, interval: probeInterval, retry: outageRetry}
}

// readyzProbe returns a function that asks the API server's /readyz, or nil
// if the client cannot ask (a fake).
func readyzProbe(client kubeclient.Interface) func(context.Context) bool {
	prober, ok := client.(kubeclient.ReadyzProber)
	if !ok {
		return nil
	}
	return func(ctx context.Context) bool {
		ctx, cancel := context.WithTimeout(ctx, probeTimeout)
		defer cancel()
		return prober.Readyz(ctx)
	}
}

// isOutage says whether err means that the API server could not be reached
// or is not serving yet, rather than an answer about the request (a
// Forbidden, a Gone resource version: client-go handles those itself).
func isOutage(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	if apierrors.IsServiceUnavailable(err) {
		return true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return false
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var netErr net.Error
	return errors.As(err, &netErr) || utilnet.IsConnectionRefused(err) ||
		utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err)
}

// wait returns when the API server answers /readyz again, when outageRetry
// has passed, or (with ctx's error) when ctx is done. The first caller of an
// outage probes; the others wait for it.
func (r *reconnector) wait(ctx context.Context, cause error) error {
	r.mu.Lock()
	if !r.down {
		r.down, r.downSince = true, time.Now()
		r.logger.Warn("API server unreachable: waiting for it to answer /readyz", "error", cause, "probe_every", r.interval)
	}
	if back := r.back; back != nil {
		r.mu.Unlock()
		timer := time.NewTimer(r.retry)
		defer timer.Stop()
		select {
		case <-back:
			return nil
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	back := make(chan struct{})
	r.back = back
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.back = nil
		r.mu.Unlock()
		close(back)
	}()

	tick := time.NewTicker(r.interval)
	defer tick.Stop()
	timer := time.NewTimer(r.retry)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return nil
		case <-tick.C:
			if r.probe != nil && r.probe(ctx) {
				return nil
			}
		}
	}
}

// up notes that a call got an answer from the API server after waiting.
func (r *reconnector) up() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		r.down = false
		r.logger.Info("API server reachable again", "outage", time.Since(r.downSince).Round(time.Millisecond))
	}
}

// call runs f, and again each time the API server comes back, for as long
// as f fails with an outage. It returns f's first other answer, or its last
// error once ctx is done.
func call[T any](ctx context.Context, r *reconnector, f func() (T, error)) (T, error) {
	waited := false
	for {
		v, err := f()
		if !isOutage(ctx, err) {
			if waited {
				r.up()
			}
			return v, err
		}
		if r.wait(ctx, err) != nil {
			return v, err
		}
		waited = true
	}
}

// reconnectingListWatcher is a ListWatcher whose List and Watch wait out
// outages through r.
type reconnectingListWatcher[L runtime.Object] struct {
	lw kubeclient.ListWatcher[L]
	r  *reconnector
}

func reconnecting[L runtime.Object](lw kubeclient.ListWatcher[L], r *reconnector) kubeclient.ListWatcher[L] {
	return reconnectingListWatcher[L]{lw, r}
}

func (c reconnectingListWatcher[L]) List(ctx context.Context, opts metav1.ListOptions) (L, error) {
	return call(ctx, c.r, func() (L, error) { return c.lw.List(ctx, opts) })
}

func (c reconnectingListWatcher[L]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return call(ctx, c.r, func() (watch.Interface, error) { return c.lw.Watch(ctx, opts) })
}
