package status

// The election is hand-written rather than client-go's
// tools/leaderelection because that package imports the whole clientset
// (k8s.io/client-go/kubernetes), which registers every API group. The agent
// links only the five API groups that kubeclient knows.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restysync/restysync/agent/internal/kubeclient"
)

// retryJitter: a replica that does not lead tries to take the Lease every
// RetryPeriod plus up to this much more of it, so replicas started together
// do not ask in step. RenewDeadline must exceed RetryPeriod times
// 1+retryJitter (client-go asks the same).
const retryJitter = 0.2

// errNotRenewed ends a term whose Lease was not renewed in time.
var errNotRenewed = errors.New("the Lease was not renewed within the renew deadline")

// election is one replica's part in the election on a coordination.k8s.io
// Lease, with the semantics of client-go's leaderelection:
//
//   - The Lease names its holder, how long a renewal holds
//     (leaseDurationSeconds), and when it was taken and renewed.
//   - A replica takes the Lease when it does not exist, when its holder is
//     empty (released), or when this replica has seen the same record,
//     unchanged, for the record's lease duration on its own clock. The
//     holder's renewTime is never compared with the local clock: the two
//     clocks may differ. Taking it from another holder counts a transition.
//   - Every write is an Update of the version read (optimistic
//     concurrency): of two replicas that try at once, one gets a Conflict
//     and does not lead.
//   - The leader renews every RetryPeriod. Its term ends at the latest
//     RenewDeadline after the last renewal that succeeded was sent; the
//     others saw that renewal later and wait LeaseDuration, which is
//     longer, so terms do not overlap (as long as clocks run at the same
//     rate).
//   - When a term ends, the leader writes the Lease with no holder, so
//     another replica takes over at once rather than after LeaseDuration.
type election struct {
	leases         kubeclient.Leases
	namespace      string
	name           string
	identity       string
	leaseDuration  time.Duration
	renewDeadline  time.Duration
	retryPeriod    time.Duration
	requestTimeout time.Duration // bounds each API call
	logger         *slog.Logger

	// started is called when a term begins, with the term's context, which
	// ends with the term. stopped is called once it ended, before the
	// Lease is released. newLeader is called when the Lease names a new
	// holder.
	started   func(term context.Context)
	stopped   func()
	newLeader func(identity string)

	now func() time.Time // the local clock; tests set it

	// Owned by the goroutine that calls run.
	lease      *coordinationv1.Lease // as last read or written; nil before
	observedAt time.Time             // when lease.Spec was first seen as it is
	reported   string                // the holder last given to newLeader
	lastErr    string                // the last error logged while not leading
}

// checkTimings returns an error unless LeaseDuration > RenewDeadline >
// RetryPeriod*(1+retryJitter) > 0.
func checkTimings(leaseDuration, renewDeadline, retryPeriod time.Duration) error {
	switch {
	case leaseDuration <= 0 || renewDeadline <= 0 || retryPeriod <= 0:
		return fmt.Errorf("lease duration (%s), renew deadline (%s) and retry period (%s) must be positive",
			leaseDuration, renewDeadline, retryPeriod)
	case leaseDuration <= renewDeadline:
		return fmt.Errorf("lease duration (%s) must be longer than the renew deadline (%s)", leaseDuration, renewDeadline)
	case renewDeadline <= time.Duration((1+retryJitter)*float64(retryPeriod)):
		return fmt.Errorf("renew deadline (%s) must be longer than %g times the retry period (%s)",
			renewDeadline, 1+retryJitter, retryPeriod)
	}
	return nil
}

// run stands for election until this replica leads or ctx ends, then
// leads until ctx ends or the Lease is lost or not renewed in time, and
// releases it. The caller runs it again to stand again.
func (e *election) run(ctx context.Context) {
	sent, ok := e.acquire(ctx)
	if !ok {
		return
	}
	e.lead(ctx, sent)
	e.stopped()
	e.release()
}

// acquire tries to take the Lease every RetryPeriod (with jitter) until it
// does, and returns a time no later than the write that took it was sent;
// false if ctx ended first.
func (e *election) acquire(ctx context.Context) (time.Time, bool) {
	for {
		sent := e.now()
		held, err := e.try(ctx)
		if held {
			e.lastErr = ""
			return sent, true
		}
		if err != nil && ctx.Err() == nil && err.Error() != e.lastErr {
			e.lastErr = err.Error() // logged once until it changes
			e.logger.Warn("standing for status leader", "error", err)
		}
		wait := e.retryPeriod + rand.N(time.Duration(retryJitter*float64(e.retryPeriod))+1)
		if !sleep(ctx, wait) {
			return time.Time{}, false
		}
	}
}

// lead runs one term that began with a write sent at sent: it renews the
// Lease every RetryPeriod, and ends the term (cancels its context) when ctx
// ends, when another replica holds the Lease, or RenewDeadline after the
// last renewal that succeeded was sent.
func (e *election) lead(ctx context.Context, sent time.Time) {
	term, end := context.WithCancelCause(ctx)
	defer end(nil)
	lapse := time.AfterFunc(time.Until(sent.Add(e.renewDeadline)), func() { end(errNotRenewed) })
	defer lapse.Stop()
	e.started(term)

	tick := time.NewTicker(e.retryPeriod)
	defer tick.Stop()
	for {
		select {
		case <-term.Done():
			if cause := context.Cause(term); errors.Is(cause, errNotRenewed) {
				e.logger.Warn("lost status leadership", "error", cause)
			}
			return
		case <-tick.C:
		}
		sent := e.now()
		held, err := e.try(term)
		switch {
		case held:
			// If the lapse fired meanwhile, the term is over all the same.
			lapse.Reset(time.Until(sent.Add(e.renewDeadline)))
		case !e.holding():
			e.logger.Info("lost status leadership", "holder", holder(e.lease))
			return
		case err != nil && term.Err() == nil:
			e.logger.Warn("renewing the Lease", "error", err)
		}
	}
}

// try takes or renews the Lease once, and reports whether this replica
// holds it now.
func (e *election) try(ctx context.Context) (bool, error) {
	if e.holding() {
		// Renew over the version last written: if it is still current,
		// nobody wrote the Lease since and it is still ours. If not (or
		// it is gone, or the request failed), read it and decide again.
		if err := e.update(ctx, e.lease, e.identity); err == nil {
			return true, nil
		}
	}
	lease, err := e.get(ctx)
	if apierrors.IsNotFound(err) {
		return e.create(ctx)
	}
	if err != nil {
		return false, err
	}
	if h := holder(lease); h != e.identity && h != "" && !e.expired(e.now()) {
		return false, nil
	}
	err = e.update(ctx, lease, e.identity)
	if apierrors.IsConflict(err) {
		return false, nil // another replica wrote it first
	}
	return err == nil, err
}

// expired reports whether the holder of the Lease has let it lapse: the
// record has not changed for as long as it says a renewal holds (its
// leaseDurationSeconds, or LeaseDuration if it says nothing), measured on
// the local clock from when this replica first saw it.
func (e *election) expired(now time.Time) bool {
	d := e.leaseDuration
	if s := e.lease.Spec.LeaseDurationSeconds; s != nil && *s > 0 {
		d = time.Duration(*s) * time.Second
	}
	return !now.Before(e.observedAt.Add(d))
}

// holding reports whether the Lease, as last seen, names this replica.
func (e *election) holding() bool {
	return e.lease != nil && holder(e.lease) == e.identity
}

// observe records lease as read or written at now. The expiry clock
// restarts only when the record changed.
func (e *election) observe(lease *coordinationv1.Lease, now time.Time) {
	if e.lease == nil || !apiequality.Semantic.DeepEqual(e.lease.Spec, lease.Spec) {
		e.observedAt = now
	}
	e.lease = lease
	if h := holder(lease); h != e.reported {
		e.reported = h
		if h != "" {
			e.newLeader(h)
		}
	}
}

func (e *election) get(ctx context.Context) (*coordinationv1.Lease, error) {
	rctx, cancel := context.WithTimeout(ctx, e.requestTimeout)
	defer cancel()
	lease, err := e.leases.Get(rctx, e.name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	// The time after the answer: the record may have been written while
	// the request was on its way.
	e.observe(lease, e.now())
	return lease, nil
}

// create makes the Lease, held by this replica; false if another replica
// made it first.
func (e *election) create(ctx context.Context) (bool, error) {
	now := metav1.NewMicroTime(e.now())
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.namespace, Name: e.name},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       new(e.identity),
			LeaseDurationSeconds: new(e.leaseSeconds()),
			AcquireTime:          &now,
			RenewTime:            &now,
			LeaseTransitions:     new(int32(0)),
		},
	}
	rctx, cancel := context.WithTimeout(ctx, e.requestTimeout)
	defer cancel()
	created, err := e.leases.Create(rctx, lease, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	e.observe(created, e.now())
	return true, nil
}

// update writes base, the Lease as read, as held by to ("" releases it);
// it fails with a Conflict if the Lease changed since base was read.
func (e *election) update(ctx context.Context, base *coordinationv1.Lease, to string) error {
	now := metav1.NewMicroTime(e.now())
	next := base.DeepCopy()
	spec := &next.Spec
	switch {
	case to == "":
		spec.HolderIdentity = new("")
		spec.LeaseDurationSeconds = new(int32(1))
	case holder(base) != to:
		spec.HolderIdentity = new(to)
		spec.AcquireTime = &now
		spec.LeaseTransitions = new(transitions(base) + 1)
		fallthrough
	default:
		spec.LeaseDurationSeconds = new(e.leaseSeconds())
	}
	spec.RenewTime = &now
	rctx, cancel := context.WithTimeout(ctx, e.requestTimeout)
	defer cancel()
	updated, err := e.leases.Update(rctx, next, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	e.observe(updated, e.now())
	return nil
}

// release writes the Lease with no holder if it still names this replica,
// within RenewDeadline.
func (e *election) release() {
	ctx, cancel := context.WithTimeout(context.Background(), e.renewDeadline)
	defer cancel()
	for e.holding() {
		err := e.update(ctx, e.lease, "")
		if !apierrors.IsConflict(err) {
			if err != nil {
				e.logger.Warn("releasing the Lease", "error", err)
			}
			return
		}
		// Written since: read it and release it if it is still ours.
		if _, err := e.get(ctx); err != nil {
			e.logger.Warn("releasing the Lease", "error", err)
			return
		}
	}
}

// leaseSeconds is LeaseDuration in whole seconds, rounded up.
func (e *election) leaseSeconds() int32 {
	return int32(max(1, math.Ceil(e.leaseDuration.Seconds())))
}

func holder(lease *coordinationv1.Lease) string {
	if lease == nil || lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

func transitions(lease *coordinationv1.Lease) int32 {
	if lease.Spec.LeaseTransitions == nil {
		return 0
	}
	return *lease.Spec.LeaseTransitions
}

// sleep waits d, and reports false if ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
