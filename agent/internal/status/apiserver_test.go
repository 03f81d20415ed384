//go:build linux

package status

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/restysync/restysync/agent/internal/kubeclient"
	"github.com/restysync/restysync/agent/internal/testenv/kubeapi"
)

// Short election timings for tests.
var testElection = Options{
	LeaseDuration: 2 * time.Second,
	RenewDeadline: 1500 * time.Millisecond,
	RetryPeriod:   200 * time.Millisecond,
}

// roundTripFunc counts requests.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// adminClientset returns a clientset for the test's own reads and writes.
func adminClientset(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// newClient returns a kubeclient for the code under test.
func newClient(t *testing.T, cfg *rest.Config) kubeclient.Interface {
	t.Helper()
	client, err := kubeclient.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// countingClient returns an admin client and the number of Ingress status
// writes it has sent.
func countingClient(t *testing.T, cfg *rest.Config) (kubeclient.Interface, *atomic.Int64) {
	t.Helper()
	cfg, writes := countStatusWrites(cfg, "/ingresses/", nil)
	return newClient(t, cfg), writes
}

// countStatusWrites returns a copy of cfg that counts the status writes
// (PUTs of a status subresource) whose path contains within; before, when
// set, runs before each is sent.
func countStatusWrites(cfg *rest.Config, within string, before func()) (*rest.Config, *atomic.Int64) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 1000, 1000
	writes := new(atomic.Int64)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodPut && strings.Contains(r.URL.Path, within) && strings.HasSuffix(r.URL.Path, "/status") {
				writes.Add(1)
				if before != nil {
					before()
				}
			}
			return rt.RoundTrip(r)
		})
	})
	return cfg, writes
}

// runWriter runs w until the returned stop is called or the test ends.
func runWriter(t *testing.T, w *Writer) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(waitTimeout):
			t.Errorf("Run did not return within %s", waitTimeout)
		}
	}
	t.Cleanup(stop)
	return stop
}

func TestWriterAPIServer(t *testing.T) {
	srv := kubeapi.Start(t, kubeapi.Options{})
	admin := adminClientset(t, srv.Config())
	ctx := context.Background()
	for _, ns := range []string{"restysync", "web"} {
		if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"a", "b", "c", "d", "e", "f"} {
		if _, err := admin.NetworkingV1().Ingresses("web").Create(ctx, &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{
				Service: &networkingv1.IngressServiceBackend{Name: "app", Port: networkingv1.ServiceBackendPort{Number: 80}},
			}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	status := func(name string) []networkingv1.IngressLoadBalancerIngress {
		ing, err := admin.NetworkingV1().Ingresses("web").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return ing.Status.LoadBalancer.Ingress
	}
	key := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "web", Name: name} }
	update := func(names []string, writers ...*Writer) {
		var served []types.NamespacedName
		for _, n := range names {
			served = append(served, key(n))
		}
		for _, w := range writers {
			w.Update(served)
		}
	}

	t.Run("leader only", func(t *testing.T) {
		pub, err := NewAddressPublisher([]string{"10.0.0.1", "lb.example.com"})
		if err != nil {
			t.Fatal(err)
		}
		want := []networkingv1.IngressLoadBalancerIngress{ip("10.0.0.1"), host("lb.example.com")}
		newWriter := func(identity string) (*Writer, *atomic.Int64) {
			client, writes := countingClient(t, srv.Config())
			opts := testElection
			opts.Namespace, opts.Identity = "restysync", identity
			w, err := NewWriter(client, pub, opts)
			if err != nil {
				t.Fatal(err)
			}
			return w, writes
		}
		wa, writesA := newWriter("replica-a")
		wb, writesB := newWriter("replica-b")
		stopA, stopB := runWriter(t, wa), runWriter(t, wb)

		eventually(t, "a leader", func() bool { return wa.IsLeader() || wb.IsLeader() })
		leader, follower, leaderWrites, followerWrites, stopLeader := wa, wb, writesA, writesB, stopA
		if wb.IsLeader() {
			leader, follower, leaderWrites, followerWrites, stopLeader = wb, wa, writesB, writesA, stopB
		}
		if follower.IsLeader() {
			t.Fatal("both replicas lead")
		}

		update([]string{"a", "b"}, leader, follower)
		eventually(t, "a and b published", func() bool {
			return equalAddrs(status("a"), want) && equalAddrs(status("b"), want)
		})
		if got := status("c"); len(got) != 0 {
			t.Errorf("status of c (not served) = %v, want none", got)
		}
		if n := followerWrites.Load(); n != 0 {
			t.Errorf("the follower wrote %d statuses, want 0", n)
		}
		if n := leaderWrites.Load(); n != 2 {
			t.Errorf("the leader wrote %d statuses, want 2", n)
		}

		// The same set again, many times: nothing to write.
		for range 50 {
			update([]string{"a", "b"}, leader, follower)
		}
		// a leaves the set: its status is cleared.
		update([]string{"b"}, leader, follower)
		eventually(t, "a cleared", func() bool { return len(status("a")) == 0 })
		if got := status("b"); !equalAddrs(got, want) {
			t.Errorf("status of b = %v, want %v", got, want)
		}
		if n := leaderWrites.Load(); n != 3 {
			t.Errorf("the leader wrote %d statuses, want 3 (a, b, then clearing a)", n)
		}

		// The leader stops and releases the Lease; the other replica takes
		// over, and clears b, which left the set after the handover.
		stopLeader()
		eventually(t, "the follower leads", follower.IsLeader)
		update([]string{"c"}, follower)
		eventually(t, "b cleared and c published", func() bool {
			return len(status("b")) == 0 && equalAddrs(status("c"), want)
		})
		if got := status("a"); len(got) != 0 {
			t.Errorf("status of a = %v, want none", got)
		}
		if n := followerWrites.Load(); n != 2 {
			t.Errorf("the new leader wrote %d statuses, want 2 (c, then clearing b)", n)
		}
	})

	t.Run("with a cache", func(t *testing.T) {
		factory := informers.NewSharedInformerFactory(admin, 0)
		lister := factory.Networking().V1().Ingresses().Lister()
		cacheCtx, stopCache := context.WithCancel(ctx)
		defer func() {
			stopCache()
			factory.Shutdown()
		}()
		factory.StartWithContext(cacheCtx)
		for typ, ok := range factory.WaitForCacheSync(cacheCtx.Done()) {
			if !ok {
				t.Fatalf("cache of %v did not sync", typ)
			}
		}
		pub, err := NewAddressPublisher([]string{"10.0.0.9"})
		if err != nil {
			t.Fatal(err)
		}
		client, writes := countingClient(t, srv.Config())
		opts := testElection
		opts.Namespace, opts.LeaseName, opts.Identity = "restysync", "cache-test", "replica"
		opts.Lookup = func(namespace, name string) *networkingv1.Ingress {
			ing, err := lister.Ingresses(namespace).Get(name)
			if err != nil {
				return nil
			}
			return ing
		}
		w, err := NewWriter(client, pub, opts)
		if err != nil {
			t.Fatal(err)
		}
		runWriter(t, w)
		want := []networkingv1.IngressLoadBalancerIngress{ip("10.0.0.9")}

		update([]string{"e"}, w)
		eventually(t, "e published", func() bool { return equalAddrs(status("e"), want) })
		// A burst of syncs right after the write, while the cache may still
		// show the old status: no second write, and no conflict.
		for range 100 {
			update([]string{"e"}, w)
		}
		update([]string{"e", "f"}, w) // passes run in order: once f is written, the burst is done
		eventually(t, "f published", func() bool { return equalAddrs(status("f"), want) })
		if n := writes.Load(); n != 2 {
			t.Errorf("%d status writes, want 2 (e and f)", n)
		}
	})

	t.Run("publish service", func(t *testing.T) {
		svc, err := admin.CoreV1().Services("restysync").Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "restysync"},
			Spec: corev1.ServiceSpec{
				Type:  corev1.ServiceTypeLoadBalancer,
				Ports: []corev1.ServicePort{{Name: "http", Port: 80}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pub, err := NewServicePublisher(newClient(t, srv.Config()), "restysync/restysync")
		if err != nil {
			t.Fatal(err)
		}
		client, _ := countingClient(t, srv.Config())
		opts := testElection
		opts.Namespace, opts.LeaseName, opts.Identity = "restysync", "service-test", "replica"
		w, err := NewWriter(client, pub, opts)
		if err != nil {
			t.Fatal(err)
		}
		runWriter(t, w)
		update([]string{"d"}, w)

		// No load balancer yet: the cluster IP.
		eventually(t, "cluster IP published", func() bool {
			return equalAddrs(status("d"), []networkingv1.IngressLoadBalancerIngress{ip(svc.Spec.ClusterIP)})
		})
		// The load balancer gets addresses: they replace the cluster IP
		// without another Update.
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.7"}, {Hostname: "lb.example.com"}}
		if _, err := admin.CoreV1().Services("restysync").UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "load balancer addresses published", func() bool {
			return equalAddrs(status("d"), []networkingv1.IngressLoadBalancerIngress{ip("203.0.113.7"), host("lb.example.com")})
		})
	})
}
