package kube

// Reconnecting after an API server outage.
//
// A client-go reflector that fails to list or watch sleeps before it tries
// again, and the sleep doubles on each failure: from 0.8 s to a 30 s cap,
// each with up to 100 % jitter, so after a minute of outage a reflector may
// sleep up to a minute after the API server is back. client-go v0.37 has no
// way to set that backoff for shared informers (ReflectorOptions.Backoff is
// not reachable through a SharedIndexInformer or its factory).
//
// So the reflectors are kept from failing in the first place: the informer
// factories get a client whose List and Watch, for the kinds the source
// reads, wait out an outage instead of returning its error. The first call
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
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	typeddiscoveryv1 "k8s.io/client-go/kubernetes/typed/discovery/v1"
	typednetworkingv1 "k8s.io/client-go/kubernetes/typed/networking/v1"
	"k8s.io/client-go/rest"
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

func newReconnector(client kubernetes.Interface, logger *slog.Logger) *reconnector {
	return &reconnector{probe: readyzProbe(client), logger: logger, interval: probeInterval, retry: outageRetry}
}

// readyzProbe returns a function that asks the API server's /readyz, or nil
// if the client has no REST client to ask with.
func readyzProbe(client kubernetes.Interface) func(context.Context) bool {
	d := client.Discovery()
	if d == nil {
		return nil
	}
	rc := d.RESTClient()
	if rc == nil {
		return nil
	}
	if r, ok := rc.(*rest.RESTClient); ok && r == nil {
		return nil
	}
	return func(ctx context.Context) bool {
		ctx, cancel := context.WithTimeout(ctx, probeTimeout)
		defer cancel()
		var code int
		rc.Get().AbsPath("/readyz").Do(ctx).StatusCode(&code)
		return code == http.StatusOK
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

// informerClient returns s.client with List and Watch of the kinds the
// source reads going through s's reconnector.
// Each call has its own reconnector: call it once for all the factories.
func (s *Source) informerClient() kubernetes.Interface {
	return reconnectingClient{Interface: s.client, r: newReconnector(s.client, s.logger)}
}

// reconnectingClient is a kubernetes.Interface whose CoreV1, DiscoveryV1 and
// NetworkingV1 resources used by the informers wait out outages. Everything
// else is the wrapped client's.
type reconnectingClient struct {
	kubernetes.Interface
	r *reconnector
}

// IsWatchListSemanticsUnSupported is the wrapped client's answer (a fake
// clientset says true), which the generated informers ask the client for.
func (c reconnectingClient) IsWatchListSemanticsUnSupported() bool {
	u, ok := c.Interface.(interface{ IsWatchListSemanticsUnSupported() bool })
	return ok && u.IsWatchListSemanticsUnSupported()
}

func (c reconnectingClient) CoreV1() typedcorev1.CoreV1Interface {
	return reconnectingCoreV1{c.Interface.CoreV1(), c.r}
}

func (c reconnectingClient) DiscoveryV1() typeddiscoveryv1.DiscoveryV1Interface {
	return reconnectingDiscoveryV1{c.Interface.DiscoveryV1(), c.r}
}

func (c reconnectingClient) NetworkingV1() typednetworkingv1.NetworkingV1Interface {
	return reconnectingNetworkingV1{c.Interface.NetworkingV1(), c.r}
}

type reconnectingCoreV1 struct {
	typedcorev1.CoreV1Interface
	r *reconnector
}

func (c reconnectingCoreV1) Services(namespace string) typedcorev1.ServiceInterface {
	return services{c.CoreV1Interface.Services(namespace), c.r}
}

func (c reconnectingCoreV1) Secrets(namespace string) typedcorev1.SecretInterface {
	return secrets{c.CoreV1Interface.Secrets(namespace), c.r}
}

func (c reconnectingCoreV1) ConfigMaps(namespace string) typedcorev1.ConfigMapInterface {
	return configMaps{c.CoreV1Interface.ConfigMaps(namespace), c.r}
}

type reconnectingDiscoveryV1 struct {
	typeddiscoveryv1.DiscoveryV1Interface
	r *reconnector
}

func (c reconnectingDiscoveryV1) EndpointSlices(namespace string) typeddiscoveryv1.EndpointSliceInterface {
	return endpointSlices{c.DiscoveryV1Interface.EndpointSlices(namespace), c.r}
}

type reconnectingNetworkingV1 struct {
	typednetworkingv1.NetworkingV1Interface
	r *reconnector
}

func (c reconnectingNetworkingV1) Ingresses(namespace string) typednetworkingv1.IngressInterface {
	return ingresses{c.NetworkingV1Interface.Ingresses(namespace), c.r}
}

func (c reconnectingNetworkingV1) IngressClasses() typednetworkingv1.IngressClassInterface {
	return ingressClasses{c.NetworkingV1Interface.IngressClasses(), c.r}
}

type services struct {
	typedcorev1.ServiceInterface
	r *reconnector
}

func (c services) List(ctx context.Context, opts metav1.ListOptions) (*corev1.ServiceList, error) {
	return call(ctx, c.r, func() (*corev1.ServiceList, error) { return c.ServiceInterface.List(ctx, opts) })
}

func (c services) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return call(ctx, c.r, func() (watch.Interface, error) { return c.ServiceInterface.Watch(ctx, opts) })
}

type secrets struct {
	typedcorev1.SecretInterface
	r *reconnector
}

func (c secrets) List(ctx context.Context, opts metav1.ListOptions) (*corev1.SecretList, error) {
	return call(ctx, c.r, func() (*corev1.SecretList, error) { return c.SecretInterface.List(ctx, opts) })
}

func (c secrets) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return call(ctx, c.r, func() (watch.Interface, error) { return c.SecretInterface.Watch(ctx, opts) })
}

type configMaps struct {
	typedcorev1.ConfigMapInterface
	r *reconnector
}

func (c configMaps) List(ctx context.Context, opts metav1.ListOptions) (*corev1.ConfigMapList, error) {
	return call(ctx, c.r, func() (*corev1.ConfigMapList, error) { return c.ConfigMapInterface.List(ctx, opts) })
}

func (c configMaps) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return call(ctx, c.r, func() (watch.Interface, error) { return c.ConfigMapInterface.Watch(ctx, opts) })
}

type endpointSlices struct {
	typeddiscoveryv1.EndpointSliceInterface
	r *reconnector
}

func (c endpointSlices) List(ctx context.Context, opts metav1.ListOptions) (*discoveryv1.EndpointSliceList, error) {
	return call(ctx, c.r, func() (*discoveryv1.EndpointSliceList, error) { return c.EndpointSliceInterface.List(ctx, opts) })
}

func (c endpointSlices) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return call(ctx, c.r, func() (watch.Interface, error) { return c.EndpointSliceInterface.Watch(ctx, opts) })
}

type ingresses struct {
	typednetworkingv1.IngressInterface
	r *reconnector
}

func (c ingresses) List(ctx context.Context, opts metav1.ListOptions) (*networkingv1.IngressList, error) {
	return call(ctx, c.r, func() (*networkingv1.IngressList, error) { return c.IngressInterface.List(ctx, opts) })
}

func (c ingresses) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return call(ctx, c.r, func() (watch.Interface, error) { return c.IngressInterface.Watch(ctx, opts) })
}

type ingressClasses struct {
	typednetworkingv1.IngressClassInterface
	r *reconnector
}

func (c ingressClasses) List(ctx context.Context, opts metav1.ListOptions) (*networkingv1.IngressClassList, error) {
	return call(ctx, c.r, func() (*networkingv1.IngressClassList, error) { return c.IngressClassInterface.List(ctx, opts) })
}

func (c ingressClasses) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return call(ctx, c.r, func() (watch.Interface, error) { return c.IngressClassInterface.Watch(ctx, opts) })
}
