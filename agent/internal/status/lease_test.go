package status

import (
	"context"
	"log/slog"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/restysync/restysync/agent/internal/kubeclient/kubeclienttest"
)

func TestCheckTimings(t *testing.T) {
	s := time.Second
	for _, c := range []struct {
		lease, renew, retry time.Duration
		ok                  bool
	}{
		{15 * s, 10 * s, 2 * s, true},
		{2 * s, 1500 * time.Millisecond, 200 * time.Millisecond, true},
		{10 * s, 10 * s, 2 * s, false},              // lease not above renew
		{10 * s, 5 * s, 5 * s, false},               // renew not above retry
		{10 * s, 1200 * time.Millisecond, s, false}, // renew not above 1.2*retry
		{10 * s, 1201 * time.Millisecond, s, true},  // just above
		{0, 0, 0, false},                            // zero
		{10 * s, 5 * s, -s, false},                  // negative
		{-s, -2 * s, -3 * s, false},                 // negative, ordered
		{10 * s, 5 * s, 0, false},                   // zero retry
		{s, 500 * time.Millisecond, 100 * time.Millisecond, true},
	} {
		err := checkTimings(c.lease, c.renew, c.retry)
		if (err == nil) != c.ok {
			t.Errorf("checkTimings(%s, %s, %s) = %v, want ok %v", c.lease, c.renew, c.retry, err, c.ok)
		}
	}
}

// electionFixture is an election over a fake clientset, on a fake clock.
type electionFixture struct {
	t       *testing.T
	cs      kubernetes.Interface
	e       *election
	now     time.Time
	leaders []string // as reported to newLeader
}

// clockStart is where the fake clock starts.
var clockStart = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func newElectionFixture(t *testing.T, objs ...*coordinationv1.Lease) *electionFixture {
	cs := fake.NewClientset()
	for _, o := range objs {
		if _, err := cs.CoordinationV1().Leases(o.Namespace).Create(context.Background(), o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f := &electionFixture{t: t, cs: cs, now: clockStart}
	f.e = &election{
		leases:         kubeclienttest.Wrap(cs).Leases("ns"),
		namespace:      "ns",
		name:           "lease",
		identity:       "me",
		leaseDuration:  1500 * time.Millisecond, // written as 2 seconds
		renewDeadline:  time.Second,
		retryPeriod:    200 * time.Millisecond,
		requestTimeout: time.Second,
		logger:         slog.New(slog.DiscardHandler),
		started:        func(context.Context) {},
		stopped:        func() {},
		newLeader:      func(id string) { f.leaders = append(f.leaders, id) },
		now:            func() time.Time { return f.now },
	}
	return f
}

// try runs one attempt at the clock's time plus d.
func (f *electionFixture) try(d time.Duration) bool {
	f.t.Helper()
	f.now = f.now.Add(d)
	held, err := f.e.try(context.Background())
	if err != nil {
		f.t.Fatalf("try: %v", err)
	}
	return held
}

func (f *electionFixture) lease() *coordinationv1.Lease {
	f.t.Helper()
	l, err := f.cs.CoordinationV1().Leases("ns").Get(context.Background(), "lease", metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return l
}

// renew writes the Lease as its holder would, with renewTime at.
func (f *electionFixture) renew(at time.Time) {
	f.t.Helper()
	l := f.lease()
	l.Spec.RenewTime = &metav1.MicroTime{Time: at}
	if _, err := f.cs.CoordinationV1().Leases("ns").Update(context.Background(), l, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

func heldLease(holder string, duration *int32, renew time.Time, transitions int32) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lease"},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       &holder,
			LeaseDurationSeconds: duration,
			AcquireTime:          &metav1.MicroTime{Time: renew},
			RenewTime:            &metav1.MicroTime{Time: renew},
			LeaseTransitions:     &transitions,
		},
	}
}

// checkTaken checks that the Lease names this replica, taken at the
// clock's time with the given transitions.
func (f *electionFixture) checkTaken(transitions int32, acquired time.Time) {
	f.t.Helper()
	l := f.lease()
	if got := holder(l); got != "me" {
		f.t.Errorf("holder = %q, want me", got)
	}
	if got := *l.Spec.LeaseTransitions; got != transitions {
		f.t.Errorf("leaseTransitions = %d, want %d", got, transitions)
	}
	if got := *l.Spec.LeaseDurationSeconds; got != 2 {
		f.t.Errorf("leaseDurationSeconds = %d, want 2 (1.5s rounded up)", got)
	}
	if !l.Spec.AcquireTime.Time.Equal(acquired) || !l.Spec.RenewTime.Time.Equal(f.now) {
		f.t.Errorf("acquireTime %v, renewTime %v, want %v and %v", l.Spec.AcquireTime, l.Spec.RenewTime, acquired, f.now)
	}
}

func TestElectionCreateAndRenew(t *testing.T) {
	f := newElectionFixture(t)
	if !f.try(0) {
		t.Fatal("no Lease: not taken")
	}
	acquired := f.now
	f.checkTaken(0, acquired)
	if !f.try(time.Second) {
		t.Fatal("renewal failed")
	}
	f.checkTaken(0, acquired) // renewTime moved, acquireTime did not
	// Deleted under its holder: made again.
	if err := f.cs.CoordinationV1().Leases("ns").Delete(context.Background(), "lease", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if !f.try(time.Second) {
		t.Fatal("a deleted Lease was not made again")
	}
	f.checkTaken(0, f.now)
	if len(f.leaders) != 1 || f.leaders[0] != "me" {
		t.Errorf("leaders reported = %v, want [me]", f.leaders)
	}
}

// TestElectionExpiry: a Lease held by another is taken only once this
// replica has seen it unchanged for its lease duration on the local clock,
// whatever its renewTime says.
func TestElectionExpiry(t *testing.T) {
	ancient := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	f := newElectionFixture(t, heldLease("other", new(int32(10)), ancient, 5))
	// renewTime is 30 years old: not expired for that.
	if f.try(0) {
		t.Fatal("a Lease just seen was taken")
	}
	// The record's 10 seconds count, not this replica's 1.5.
	if f.try(9 * time.Second) {
		t.Fatal("taken after 9s of the holder's 10")
	}
	// The holder renews, its clock still 30 years behind: the wait starts
	// again from when the change is seen.
	f.renew(ancient.Add(time.Second))
	if f.try(500 * time.Millisecond) {
		t.Fatal("taken right after a renewal")
	}
	if f.try(9999 * time.Millisecond) {
		t.Fatal("taken 9.999s after the renewal was seen")
	}
	if !f.try(time.Millisecond) {
		t.Fatal("not taken 10s after the last change was seen")
	}
	f.checkTaken(6, f.now)
	if want := []string{"other", "me"}; len(f.leaders) != 2 || f.leaders[0] != want[0] || f.leaders[1] != want[1] {
		t.Errorf("leaders reported = %v, want %v", f.leaders, want)
	}
}

// TestElectionFutureRenewTime: a renewTime ahead of the local clock does
// not hold the Lease either; without leaseDurationSeconds, this replica's
// LeaseDuration counts.
func TestElectionFutureRenewTime(t *testing.T) {
	f := newElectionFixture(t, heldLease("ghost", nil, clockStart.Add(time.Hour), 0))
	if f.try(0) || f.try(1499*time.Millisecond) {
		t.Fatal("taken within LeaseDuration")
	}
	if !f.try(time.Millisecond) {
		t.Fatal("not taken after LeaseDuration unchanged")
	}
	f.checkTaken(1, f.now)
}

// TestElectionReleased: a Lease with no holder is taken at once, and
// releasing writes it with no holder.
func TestElectionReleased(t *testing.T) {
	f := newElectionFixture(t, heldLease("", new(int32(1)), time.Now(), 3))
	if !f.try(0) {
		t.Fatal("a released Lease was not taken at once")
	}
	f.checkTaken(4, f.now)
	f.e.release()
	l := f.lease()
	if got := holder(l); got != "" || *l.Spec.LeaseTransitions != 4 {
		t.Errorf("released: holder %q, transitions %d; want none, 4", got, *l.Spec.LeaseTransitions)
	}
	if f.e.holding() {
		t.Error("still holding after release")
	}
}
