//go:build linux

package status

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/restysync/restysync/agent/internal/kubeclient"
	"github.com/restysync/restysync/agent/internal/testenv/kubeapi"
)

// within polls cond every 5ms until it holds and returns how long that
// took; it fails t if that is not within d.
func within(t *testing.T, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

// never fails t if cond holds at any time in the next d.
func never(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if cond() {
			t.Fatalf("%s", what)
		}
	}
}

// exclusive checks, until the returned stop is called, that no two of ws
// lead at once.
func exclusive(t *testing.T, ws ...*Writer) (stop func()) {
	t.Helper()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			n := 0
			for _, w := range ws {
				if w.IsLeader() {
					n++
				}
			}
			if n > 1 {
				t.Errorf("%d replicas lead at once", n)
				return
			}
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	})
	var once sync.Once
	stop = func() { once.Do(func() { close(done); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// switchableClient returns a client whose requests fail while *down is set:
// at once (refused), or when their context ends (hanging).
func switchableClient(t *testing.T, cfg *rest.Config, hang bool) (kubeclient.Interface, *atomic.Bool) {
	t.Helper()
	down := new(atomic.Bool)
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if !down.Load() {
				return rt.RoundTrip(r)
			}
			if hang {
				<-r.Context().Done()
				return nil, r.Context().Err()
			}
			return nil, errors.New("test: the API server is unreachable")
		})
	})
	return newClient(t, cfg), down
}

// TestElectionAPIServer runs the election against a real API server.
func TestElectionAPIServer(t *testing.T) {
	srv := kubeapi.Start(t, kubeapi.Options{})
	admin := adminClientset(t, srv.Config())
	ctx := context.Background()
	const ns = "restysync"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pub, err := NewAddressPublisher([]string{"10.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	newWriter := func(t *testing.T, client kubeclient.Interface, lease, identity string, timings Options) *Writer {
		t.Helper()
		if client == nil {
			client = newClient(t, srv.Config())
		}
		opts := timings
		opts.Namespace, opts.LeaseName, opts.Identity = ns, lease, identity
		w, err := NewWriter(client, pub, opts)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	getLease := func(t *testing.T, name string) *coordinationv1.Lease {
		t.Helper()
		l, err := admin.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	checkLease := func(t *testing.T, name, wantHolder string, wantTransitions int32) {
		t.Helper()
		l := getLease(t, name)
		if got := holder(l); got != wantHolder {
			t.Errorf("Lease holder = %q, want %q", got, wantHolder)
		}
		if got := transitions(l); got != wantTransitions {
			t.Errorf("Lease transitions = %d, want %d", got, wantTransitions)
		}
	}
	// stoppedLeading ran: the Writer holds no term.
	noTerm := func(w *Writer) bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.leaderCtx == nil
	}

	// Two replicas: one leads. When it stops, it releases the Lease and
	// the other takes over at once, long before the Lease would expire.
	t.Run("one leader, released on cancel", func(t *testing.T) {
		t.Parallel()
		timings := Options{LeaseDuration: 20 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 200 * time.Millisecond}
		wa := newWriter(t, nil, "one-leader", "replica-a", timings)
		wb := newWriter(t, nil, "one-leader", "replica-b", timings)
		checkExclusive := exclusive(t, wa, wb)
		stopA, stopB := runWriter(t, wa), runWriter(t, wb)
		within(t, waitTimeout, "a leader", func() bool { return wa.IsLeader() || wb.IsLeader() })
		leader, follower, stopLeader := wa, wb, stopA
		if wb.IsLeader() {
			leader, follower, stopLeader = wb, wa, stopB
		}
		// Several renewals, and the follower's attempts, later: still one.
		never(t, time.Second, "the leader lost the Lease", func() bool { return !leader.IsLeader() })
		checkLease(t, "one-leader", leader.opts.Identity, 0)

		start := time.Now()
		stopLeader()
		within(t, 3*time.Second, "the follower leads after the leader stopped", follower.IsLeader)
		t.Logf("the follower took over %s after the leader was told to stop (LeaseDuration %s)",
			time.Since(start).Round(time.Millisecond), timings.LeaseDuration)
		checkLease(t, "one-leader", follower.opts.Identity, 1)
		checkExclusive()
	})

	// A leader that cannot reach the API server ends its term within
	// RenewDeadline of its last renewal; the other replica takes over once
	// the Lease expires, and the first, back, stands again and follows.
	for _, mode := range []struct {
		name string
		hang bool
	}{{"refused", false}, {"hanging", true}} {
		t.Run("unreachable API server, "+mode.name, func(t *testing.T) {
			t.Parallel()
			timings := Options{LeaseDuration: 3 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 200 * time.Millisecond}
			lease := "unreachable-" + mode.name
			client, down := switchableClient(t, srv.Config(), mode.hang)
			wa := newWriter(t, client, lease, "replica-a", timings)
			wb := newWriter(t, nil, lease, "replica-b", timings)
			checkExclusive := exclusive(t, wa, wb)
			runWriter(t, wa)
			within(t, waitTimeout, "a leads", wa.IsLeader)
			runWriter(t, wb)
			never(t, 500*time.Millisecond, "a lost the Lease", func() bool { return !wa.IsLeader() })

			down.Store(true)
			flip := time.Now()
			took := within(t, timings.RenewDeadline+500*time.Millisecond, "a stops leading", func() bool { return !wa.IsLeader() })
			t.Logf("a stopped leading %s after its API server went away (RenewDeadline %s)", took.Round(time.Millisecond), timings.RenewDeadline)
			within(t, time.Second, "a's stoppedLeading ran", func() bool { return noTerm(wa) })
			// b waits for the Lease to expire: LeaseDuration after it saw
			// a's last renewal.
			within(t, timings.LeaseDuration+2*time.Second, "b leads", wb.IsLeader)
			// a's last renewal was sent at most a RetryPeriod and a request
			// before the switch.
			took = time.Since(flip)
			t.Logf("b took over %s after a's API server went away (LeaseDuration %s)", took.Round(time.Millisecond), timings.LeaseDuration)
			if took < timings.LeaseDuration-2*timings.RetryPeriod {
				t.Errorf("b took over %s after a went away, before the Lease could expire", took)
			}
			checkLease(t, lease, "replica-b", 1)

			down.Store(false)
			never(t, 1500*time.Millisecond, "a, back, took the Lease that b renews", wa.IsLeader)
			if !wb.IsLeader() {
				t.Error("b no longer leads")
			}
			checkExclusive()
		})
	}

	// A Lease held by another identity that renews it is not taken, even
	// though its renewTime is 30 years old; once it stops renewing, it is
	// taken LeaseDuration later.
	t.Run("renewed by another", func(t *testing.T) {
		t.Parallel()
		const name = "renewed"
		ancient := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
		if _, err := admin.CoordinationV1().Leases(ns).Create(ctx, named(heldLease("other", new(int32(2)), ancient, 5), ns, name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		renewCtx, stopRenewing := context.WithCancel(ctx)
		var renewer sync.WaitGroup
		var lastRenewal atomic.Int64 // unix nanoseconds, when the last renewal returned
		renewer.Go(func() {
			for i := 1; renewCtx.Err() == nil; i++ {
				l, err := admin.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					t.Errorf("renewing: %v", err)
					return
				}
				l.Spec.RenewTime = &metav1.MicroTime{Time: ancient.Add(time.Duration(i) * time.Second)}
				if _, err := admin.CoordinationV1().Leases(ns).Update(ctx, l, metav1.UpdateOptions{}); err != nil {
					t.Errorf("renewing: %v", err)
					return
				}
				lastRenewal.Store(time.Now().UnixNano())
				sleep(renewCtx, 300*time.Millisecond)
			}
		})
		defer stopRenewing()

		w := newWriter(t, nil, name, "replica", testElection)
		runWriter(t, w)
		never(t, 5*time.Second, "a renewed Lease was taken", w.IsLeader)
		stopRenewing()
		renewer.Wait()
		within(t, waitTimeout, "the Lease is taken once not renewed", w.IsLeader)
		// Less the time the answer to the last renewal took to come back.
		if since := time.Since(time.Unix(0, lastRenewal.Load())); since < testElection.LeaseDuration-100*time.Millisecond {
			t.Errorf("taken %s after the last renewal, before LeaseDuration %s", since, testElection.LeaseDuration)
		}
		checkLease(t, name, "replica", 6)
	})

	// A Lease whose renewTime is ahead of the local clock, but that nobody
	// renews, is taken LeaseDuration after it was first seen.
	t.Run("renewTime in the future", func(t *testing.T) {
		t.Parallel()
		const name = "future"
		if _, err := admin.CoordinationV1().Leases(ns).Create(ctx, named(heldLease("ghost", new(int32(2)), time.Now().Add(time.Hour), 0), ns, name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		w := newWriter(t, nil, name, "replica", testElection)
		runWriter(t, w)
		took := within(t, waitTimeout, "the Lease is taken", w.IsLeader)
		if took < 2*time.Second {
			t.Errorf("taken %s after start, before its 2s lease duration", took)
		}
		checkLease(t, name, "replica", 1)
	})

	// Another identity writes itself into the Lease: the leader's next
	// renewal conflicts, its term ends, and it waits for that holder's
	// Lease to expire before taking it back.
	t.Run("taken by another", func(t *testing.T) {
		t.Parallel()
		const name = "taken"
		w := newWriter(t, nil, name, "replica", testElection)
		runWriter(t, w)
		within(t, waitTimeout, "leads", w.IsLeader)
		// Retried when the leader's renewal comes first.
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			l := getLease(t, name)
			now := metav1.NewMicroTime(time.Now())
			l.Spec.HolderIdentity, l.Spec.AcquireTime, l.Spec.RenewTime = new("intruder"), &now, &now
			l.Spec.LeaseTransitions = new(transitions(l) + 1)
			_, err := admin.CoordinationV1().Leases(ns).Update(ctx, l, metav1.UpdateOptions{})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		took := within(t, time.Second, "the leader stops", func() bool { return !w.IsLeader() })
		t.Logf("stopped leading %s after another took the Lease", took.Round(time.Millisecond))
		within(t, time.Second, "stoppedLeading ran", func() bool { return noTerm(w) })
		never(t, testElection.LeaseDuration-took-500*time.Millisecond, "took the Lease back before it expired", w.IsLeader)
		within(t, waitTimeout, "takes the Lease back once expired", w.IsLeader)
		checkLease(t, name, "replica", 2)
	})
}

// named returns l with the namespace and name given.
func named(l *coordinationv1.Lease, namespace, name string) *coordinationv1.Lease {
	l.Namespace, l.Name = namespace, name
	return l
}
