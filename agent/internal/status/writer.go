// Package status reports, beside the pipeline (source → model → render → plan → apply), what apply
// served: it writes .status.loadBalancer.ingress of the Ingresses that nginx
// serves, and the status of our GatewayClasses, Gateways and HTTPRoutes
// (gatewayapi.go), from one elected replica.
//
// Replicas elect a leader with a coordination.k8s.io Lease (lease.go); only
// the leader writes, so replicas never fight over a status, and a leader that
// loses the Lease stops at once because every write runs under the
// leadership context. The Lease is released only once no write is in flight.
// Writes happen on the Writer's own goroutine: Update (and UpdateGatewayAPI)
// only records the latest set of served Ingresses (the latest Gateway API
// status), so the sync loop never waits on the API server, and a burst of
// syncs costs one pass. Both kinds of status share the Lease and the
// pass: one leader writes all of it. A pass compares each status
// with the one wanted (from the informer cache when Options.Lookup is set)
// and writes only those that differ; of the routes, it looks only at those
// whose wanted status changed since (gatewayapi.go).
//
// Every replica remembers each Ingress it was told is served until, as
// leader, it has dealt with its status, so a new leader also clears the
// Ingresses that left the set under the previous one. What a replica was
// told before it started is not known: an Ingress that stopped being served
// while no agent ran keeps its status.
package status

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/restysync/restysync/agent/internal/kubeclient"
)

// Defaults of Options.
const (
	DefaultLeaseName      = "restysync-leader"
	DefaultLeaseDuration  = 15 * time.Second
	DefaultRenewDeadline  = 10 * time.Second
	DefaultRetryPeriod    = 2 * time.Second
	DefaultRequestTimeout = 10 * time.Second
)

// FieldManager is the manager name of the status writes.
const FieldManager = "restysync"

// Backoff after a pass that failed to write some status.
const (
	minBackoff = 500 * time.Millisecond
	maxBackoff = 30 * time.Second
)

// Options configures a Writer. Zero values take the defaults noted.
type Options struct {
	// Namespace of the Lease; required (the agent's own namespace).
	Namespace string
	// LeaseName is the name of the Lease (default DefaultLeaseName,
	// "restysync-leader"). Replicas with the same Lease elect one leader.
	LeaseName string
	// Identity of this replica in the Lease, unique among replicas (default:
	// the host name, which is the pod name in a pod).
	Identity string
	// Lookup returns the cached Ingress namespace/name, or nil if there is
	// none (default: nil, and each Ingress is read from the API server with
	// a GET). With the kube source's cache, a pass that changes nothing
	// sends no request.
	Lookup func(namespace, name string) *networkingv1.Ingress
	// LeaseDuration, RenewDeadline and RetryPeriod tune the election
	// (defaults 15s, 10s and 2s, as in Kubernetes' own components; they
	// must be LeaseDuration > RenewDeadline > 1.2*RetryPeriod > 0). A new
	// leader takes over within LeaseDuration of a crash, and at once after a
	// clean stop, which releases the Lease. A leader that cannot renew the
	// Lease within RenewDeadline stops writing.
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	// RequestTimeout bounds each status read or write, and each Lease
	// request, which RenewDeadline bounds too (default 10s).
	RequestTimeout time.Duration
	// Logger receives leadership changes and failed writes (default: discarded).
	Logger *slog.Logger
	// GatewayAPI, when set, has the Writer write the Gateway API status
	// given to UpdateGatewayAPI as well (default: nil, none).
	GatewayAPI *GatewayAPIOptions
}

// Writer keeps the status of served Ingresses, and of our Gateway API
// objects, while this replica leads.
type Writer struct {
	client   kubeclient.Interface
	pub      *Publisher     // nil: no Ingress status
	gateway  *gatewayWriter // nil: no Gateway API status
	opts     Options
	logger   *slog.Logger
	poke     chan struct{}
	election *election

	passing sync.Mutex // held by the loop during a pass

	started atomic.Bool

	mu        sync.Mutex
	served    map[types.NamespacedName]bool // from the last Update
	known     map[types.NamespacedName]bool // ever served and maybe still carrying our status
	leaderCtx context.Context               // nil unless leading

	// Owned by the loop goroutine: what each served Ingress is known to
	// carry because we wrote or saw it.
	written map[types.NamespacedName]record
}

// record is the status an Ingress was last given or seen with.
type record struct {
	addrs []networkingv1.IngressLoadBalancerIngress
	// replaced is the resourceVersion our write replaced: while a cache
	// still shows it, the cache is behind, not the status wrong.
	replaced string
}

// NewWriter returns a Writer that publishes pub's addresses in the
// Ingresses' status (none when pub is nil), and the Gateway API status when
// opts.GatewayAPI is set; it needs one of the two. Run starts it.
func NewWriter(client kubeclient.Interface, pub *Publisher, opts Options) (*Writer, error) {
	if pub == nil && opts.GatewayAPI == nil {
		return nil, errors.New("status writer: no publisher and no Gateway API options")
	}
	if opts.Namespace == "" {
		return nil, errors.New("status writer: no namespace for the Lease")
	}
	opts.LeaseName = cmp.Or(opts.LeaseName, DefaultLeaseName)
	if opts.Identity == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			return nil, fmt.Errorf("status writer: no identity given and no host name: %v", err)
		}
		opts.Identity = host
	}
	opts.LeaseDuration = cmp.Or(opts.LeaseDuration, DefaultLeaseDuration)
	opts.RenewDeadline = cmp.Or(opts.RenewDeadline, DefaultRenewDeadline)
	opts.RetryPeriod = cmp.Or(opts.RetryPeriod, DefaultRetryPeriod)
	opts.RequestTimeout = cmp.Or(opts.RequestTimeout, DefaultRequestTimeout)
	if err := checkTimings(opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod); err != nil {
		return nil, fmt.Errorf("status writer: %w", err)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	w := &Writer{
		client:  client,
		pub:     pub,
		opts:    opts,
		logger:  logger.With("lease", opts.Namespace+"/"+opts.LeaseName, "identity", opts.Identity),
		poke:    make(chan struct{}, 1),
		served:  map[types.NamespacedName]bool{},
		known:   map[types.NamespacedName]bool{},
		written: map[types.NamespacedName]record{},
	}
	if opts.GatewayAPI != nil {
		w.gateway = newGatewayWriter(client, opts.GatewayAPI, opts.RequestTimeout)
	}
	w.election = &election{
		leases:         client.Leases(opts.Namespace),
		namespace:      opts.Namespace,
		name:           opts.LeaseName,
		identity:       opts.Identity,
		leaseDuration:  opts.LeaseDuration,
		renewDeadline:  opts.RenewDeadline,
		retryPeriod:    opts.RetryPeriod,
		requestTimeout: min(opts.RequestTimeout, opts.RenewDeadline),
		logger:         w.logger,
		started:        w.startedLeading,
		stopped:        w.stoppedLeading,
		newLeader: func(identity string) {
			w.logger.Info("status leader", "leader", identity)
		},
		now: time.Now,
	}
	return w, nil
}

// Update records the Ingresses nginx now serves. It never blocks: the
// leader writes their status, and clears the status of those that left the
// set, on its own goroutine; calls in quick succession are merged.
func (w *Writer) Update(served []types.NamespacedName) {
	next := make(map[types.NamespacedName]bool, len(served))
	for _, key := range served {
		next[key] = true
	}
	w.mu.Lock()
	w.served = next
	for key := range next {
		w.known[key] = true
	}
	w.mu.Unlock()
	w.notify()
}

// IsLeader reports whether this replica holds the Lease.
func (w *Writer) IsLeader() bool { return w.leading() != nil }

// Run starts the publisher (if any), then takes part in the election and
// writes status while leading, until ctx is done. A replica that loses the
// Lease stands for election again. On return the Lease is released if held
// and no write is in flight. Run fails if the publisher's Service cannot be
// read before ctx ends.
func (w *Writer) Run(ctx context.Context) error {
	if !w.started.CompareAndSwap(false, true) {
		return errors.New("status writer: Run called twice")
	}
	if w.pub != nil {
		if err := w.pub.Start(ctx, w.notify); err != nil {
			return err
		}
		w.logger.Info("publishing Ingress status", "from", w.pub.String())
	}
	if w.gateway != nil {
		w.logger.Info("writing Gateway API status", "controller", w.gateway.controller)
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { w.loop(ctx) })
	for ctx.Err() == nil {
		w.election.run(ctx)
	}
	return nil
}

// startedLeading begins a term: passes run under ctx until it ends.
func (w *Writer) startedLeading(ctx context.Context) {
	w.mu.Lock()
	if ctx.Err() == nil {
		w.leaderCtx = ctx
	}
	w.mu.Unlock()
	for _, what := range w.kinds() {
		w.logger.Info("leading: writing " + what)
	}
	w.notify()
}

// stoppedLeading is called once the term's context has ended; it returns
// when the pass in flight, if any, has, so that the Lease is released only
// after the last write.
func (w *Writer) stoppedLeading() {
	w.mu.Lock()
	wasLeading := w.leaderCtx != nil
	w.leaderCtx = nil
	w.mu.Unlock()
	// Wait out the pass in flight: its context is done, so it ends soon.
	w.passing.Lock()
	w.passing.Unlock()
	if wasLeading {
		for _, what := range w.kinds() {
			w.logger.Info("stopped leading: no longer writing " + what)
		}
	}
}

// kinds names the status w writes, for logs.
func (w *Writer) kinds() []string {
	var kinds []string
	if w.pub != nil {
		kinds = append(kinds, "Ingress status")
	}
	if w.gateway != nil {
		kinds = append(kinds, "Gateway API status")
	}
	return kinds
}

// leading returns the context of the current term, or nil.
func (w *Writer) leading() context.Context {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.leaderCtx == nil || w.leaderCtx.Err() != nil {
		return nil
	}
	return w.leaderCtx
}

func (w *Writer) notify() {
	select {
	case w.poke <- struct{}{}:
	default:
	}
}

// loop runs a pass after each notification while leading, and again after
// a backoff when a pass failed.
func (w *Writer) loop(ctx context.Context) {
	backoff := minBackoff
	var retryTimer *time.Timer
	var retryC <-chan time.Time
	defer func() {
		if retryTimer != nil {
			retryTimer.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.poke:
		case <-retryC:
			retryC = nil
		}
		w.passing.Lock()
		lctx := w.leading()
		if lctx == nil {
			w.passing.Unlock()
			continue
		}
		err := w.pass(lctx)
		w.passing.Unlock()
		switch {
		case err == nil:
			backoff = minBackoff
		case lctx.Err() != nil:
			// Leadership ended mid-pass; the next leader takes over.
		default:
			w.logger.Warn("writing status", "retry_in", backoff, "error", err)
			if retryC == nil {
				retryTimer = time.NewTimer(backoff)
				retryC = retryTimer.C
			}
			backoff = min(2*backoff, maxBackoff)
		}
	}
}

// pass writes the Ingress status and the Gateway API status.
func (w *Writer) pass(ctx context.Context) error {
	var errs []error
	if w.pub != nil {
		errs = append(errs, w.ingressPass(ctx))
	}
	if w.gateway != nil {
		errs = append(errs, w.gateway.pass(ctx, w))
	}
	return errors.Join(errs...)
}

// ingressPass sets the status of every served Ingress and clears it on
// every Ingress that left the set.
func (w *Writer) ingressPass(ctx context.Context) error {
	addrs := w.pub.Addresses()
	w.mu.Lock()
	var served, stale []types.NamespacedName
	for key := range w.known {
		if w.served[key] {
			served = append(served, key)
		} else {
			stale = append(stale, key)
		}
	}
	w.mu.Unlock()
	slices.SortFunc(served, compareKeys)
	slices.SortFunc(stale, compareKeys)

	var errs []error
	var set, cleared int
	for _, key := range served {
		wrote, err := w.ensure(ctx, key, addrs)
		if err != nil {
			errs = append(errs, fmt.Errorf("ingress %s: %w", key, err))
		}
		if wrote {
			set++
		}
	}
	for _, key := range stale {
		wrote, err := w.clear(ctx, key, addrs)
		if err != nil {
			errs = append(errs, fmt.Errorf("ingress %s: clearing: %w", key, err))
			continue
		}
		if wrote {
			cleared++
		}
		delete(w.written, key)
		w.mu.Lock()
		if !w.served[key] { // not served again meanwhile
			delete(w.known, key)
		}
		w.mu.Unlock()
	}
	if set+cleared > 0 {
		w.logger.Info("wrote Ingress status", "set", set, "cleared", cleared, "addresses", describe(addrs))
	}
	return errors.Join(errs...)
}

// ensure sets the status of a served Ingress to addrs, and reports
// whether it had to write.
func (w *Writer) ensure(ctx context.Context, key types.NamespacedName, addrs []networkingv1.IngressLoadBalancerIngress) (bool, error) {
	prev, known := w.written[key]
	known = known && sameAddresses(prev.addrs, addrs)
	if known && w.opts.Lookup == nil {
		// Without a cache, trust what was written rather than GET every
		// Ingress on every pass.
		return false, nil
	}
	ing, err := w.current(ctx, key, false)
	if err != nil || ing == nil {
		return false, err // a missing Ingress has no status to set
	}
	if known && prev.replaced != "" && ing.ResourceVersion == prev.replaced {
		return false, nil // the cache has not seen our write yet
	}
	differs := func(ing *networkingv1.Ingress) bool {
		return !sameAddresses(ing.Status.LoadBalancer.Ingress, addrs)
	}
	replaced, err := w.write(ctx, ing, addrs, differs)
	if err != nil {
		return false, err
	}
	w.written[key] = record{addrs: addrs, replaced: replaced}
	return replaced != "", nil
}

// clear empties the status of an Ingress no longer served, if it still
// holds what this agent wrote (or would write): a status set by another
// controller that took the Ingress over is left alone. It reports whether
// it had to write.
func (w *Writer) clear(ctx context.Context, key types.NamespacedName, addrs []networkingv1.IngressLoadBalancerIngress) (bool, error) {
	prev, wrote := w.written[key]
	ours := func(ing *networkingv1.Ingress) bool {
		status := ing.Status.LoadBalancer.Ingress
		return len(status) > 0 && (sameAddresses(status, addrs) || (wrote && sameAddresses(status, prev.addrs)))
	}
	ing, err := w.current(ctx, key, false)
	if err != nil || ing == nil {
		return false, err
	}
	replaced, err := w.write(ctx, ing, nil, ours)
	return replaced != "", err
}

// write sets the status of ing to addrs if cond holds, and returns the
// resourceVersion it replaced ("" if it wrote nothing). On a conflict it
// reads the Ingress again from the API server and checks cond again.
func (w *Writer) write(ctx context.Context, ing *networkingv1.Ingress, addrs []networkingv1.IngressLoadBalancerIngress, cond func(*networkingv1.Ingress) bool) (replaced string, err error) {
	key := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if ing == nil || !cond(ing) {
			return nil
		}
		next := ing.DeepCopy()
		next.Status.LoadBalancer.Ingress = slices.Clone(addrs)
		rctx, cancel := context.WithTimeout(ctx, w.opts.RequestTimeout)
		defer cancel()
		_, err := w.client.Ingresses(key.Namespace).UpdateStatus(rctx, next, metav1.UpdateOptions{FieldManager: FieldManager})
		switch {
		case err == nil:
			replaced = ing.ResourceVersion
			w.logger.Debug("wrote Ingress status", "ingress", key.String(), "addresses", describe(addrs))
			return nil
		case apierrors.IsNotFound(err):
			return nil
		case apierrors.IsConflict(err):
			fresh, gerr := w.current(ctx, key, true)
			if gerr != nil {
				return gerr
			}
			ing = fresh
		}
		return err
	})
	return replaced, err
}

// current returns the Ingress from Lookup, or from the API server when
// there is no Lookup or fresh is set; nil if it does not exist.
func (w *Writer) current(ctx context.Context, key types.NamespacedName, fresh bool) (*networkingv1.Ingress, error) {
	if w.opts.Lookup != nil && !fresh {
		return w.opts.Lookup(key.Namespace, key.Name), nil
	}
	rctx, cancel := context.WithTimeout(ctx, w.opts.RequestTimeout)
	defer cancel()
	ing, err := w.client.Ingresses(key.Namespace).Get(rctx, key.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading: %w", err)
	}
	return ing, nil
}

func compareKeys(a, b types.NamespacedName) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}
