package status

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/restysync/restysync/agent/internal/kubeclient/kubeclienttest"
)

const waitTimeout = 10 * time.Second

// eventually polls cond every 20ms until it holds, and fails t after
// waitTimeout.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true within %s", what, waitTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// equalAddrs compares in order.
func equalAddrs(a, b []networkingv1.IngressLoadBalancerIngress) bool {
	return slices.EqualFunc(a, b, func(x, y networkingv1.IngressLoadBalancerIngress) bool {
		return compareAddress(x, y) == 0 && samePorts(x.Ports, y.Ports)
	})
}

func ip(a string) networkingv1.IngressLoadBalancerIngress {
	return networkingv1.IngressLoadBalancerIngress{IP: a}
}

func host(h string) networkingv1.IngressLoadBalancerIngress {
	return networkingv1.IngressLoadBalancerIngress{Hostname: h}
}

func TestNewPublisher(t *testing.T) {
	client := kubeclienttest.Wrap(fake.NewClientset())
	for _, c := range []struct {
		name      string
		service   string
		addresses []string
		want      []networkingv1.IngressLoadBalancerIngress // for an address publisher
		wantErr   bool
	}{
		{name: "service", service: "restysync/restysync"},
		{name: "addresses", addresses: []string{"lb.example.com", "10.0.0.2", " 10.0.0.1 ", "2001:db8::1", "10.0.0.2"},
			want: []networkingv1.IngressLoadBalancerIngress{ip("10.0.0.1"), ip("10.0.0.2"), ip("2001:db8::1"), host("lb.example.com")}},
		{name: "neither", wantErr: true},
		{name: "both", service: "a/b", addresses: []string{"10.0.0.1"}, wantErr: true},
		{name: "service without namespace", service: "restysync", wantErr: true},
		{name: "bad address", addresses: []string{"Not A Host"}, wantErr: true},
		{name: "upper case host", addresses: []string{"LB.example.com"}, wantErr: true},
		{name: "empty address", addresses: []string{""}, wantErr: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := NewPublisher(client, c.service, c.addresses)
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v, want error %v", err, c.wantErr)
			}
			if err != nil || c.want == nil {
				return
			}
			if got := p.Addresses(); !equalAddrs(got, c.want) {
				t.Errorf("Addresses = %v, want %v", got, c.want)
			}
			if err := p.Start(context.Background(), func() {}); err != nil {
				t.Errorf("Start of an address publisher: %v", err)
			}
		})
	}
}

func TestServiceAddresses(t *testing.T) {
	for _, c := range []struct {
		name string
		svc  corev1.Service
		want []networkingv1.IngressLoadBalancerIngress
	}{
		{"cluster IP", corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10"}},
			[]networkingv1.IngressLoadBalancerIngress{ip("10.96.0.10")}},
		{"headless", corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone}}, nil},
		{"load balancer", corev1.Service{
			Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10"},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{
				{Hostname: "lb.example.com"}, {IP: "203.0.113.7"}, {},
			}}},
		}, []networkingv1.IngressLoadBalancerIngress{ip("203.0.113.7"), host("lb.example.com")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := serviceAddresses(&c.svc); !equalAddrs(got, c.want) {
				t.Errorf("serviceAddresses = %v, want %v", got, c.want)
			}
		})
	}
}

func TestSameAddresses(t *testing.T) {
	a := []networkingv1.IngressLoadBalancerIngress{ip("10.0.0.1"), host("lb.example.com")}
	b := []networkingv1.IngressLoadBalancerIngress{host("lb.example.com"), ip("10.0.0.1")}
	if !sameAddresses(a, b) {
		t.Error("same addresses in another order: not same")
	}
	if sameAddresses(a, a[:1]) || sameAddresses(a, []networkingv1.IngressLoadBalancerIngress{ip("10.0.0.1"), host("x.example.com")}) {
		t.Error("different addresses: same")
	}
	if !sameAddresses(nil, []networkingv1.IngressLoadBalancerIngress{}) {
		t.Error("nil and empty: not same")
	}
	withPort := []networkingv1.IngressLoadBalancerIngress{{IP: "10.0.0.1", Ports: []networkingv1.IngressPortStatus{{Port: 80}}}}
	if sameAddresses(withPort, a[:1]) {
		t.Error("ports differ: same")
	}
}

func TestNewWriterErrors(t *testing.T) {
	client := kubeclienttest.Wrap(fake.NewClientset())
	pub, err := NewAddressPublisher([]string{"10.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		pub  *Publisher
		opts Options
	}{
		"no publisher":      {nil, Options{Namespace: "ns"}},
		"no namespace":      {pub, Options{}},
		"renew above lease": {pub, Options{Namespace: "ns", LeaseDuration: time.Second, RenewDeadline: 2 * time.Second}},
		"retry above renew": {pub, Options{Namespace: "ns", RenewDeadline: time.Second, RetryPeriod: time.Second}},
		"renew too close to retry": {pub, Options{Namespace: "ns", LeaseDuration: 2 * time.Second,
			RenewDeadline: 1200 * time.Millisecond, RetryPeriod: time.Second}},
		"negative retry": {pub, Options{Namespace: "ns", RetryPeriod: -time.Second}},
	} {
		if _, err := NewWriter(client, c.pub, c.opts); err == nil {
			t.Errorf("%s: NewWriter succeeded, want an error", name)
		}
	}
	w, err := NewWriter(client, pub, Options{Namespace: "ns"})
	if err != nil {
		t.Fatal(err)
	}
	if w.opts.Identity == "" || w.opts.LeaseName != DefaultLeaseName {
		t.Errorf("defaults: identity %q, lease %q", w.opts.Identity, w.opts.LeaseName)
	}
}

// TestWriterFake checks a pass with the fake clientset: status written,
// cleared when no longer served, and a status another controller wrote
// left alone.
func TestWriterFake(t *testing.T) {
	objs := []*networkingv1.Ingress{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "a"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "b"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "other"},
			Status: networkingv1.IngressStatus{LoadBalancer: networkingv1.IngressLoadBalancerStatus{
				Ingress: []networkingv1.IngressLoadBalancerIngress{ip("192.0.2.1")},
			}}},
	}
	client := fake.NewClientset(objs[0], objs[1], objs[2])
	pub, err := NewAddressPublisher([]string{"10.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWriter(kubeclienttest.Wrap(client), pub, Options{Namespace: "restysync", Identity: "me",
		LeaseDuration: time.Second, RenewDeadline: 800 * time.Millisecond, RetryPeriod: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(waitTimeout):
			t.Errorf("Run did not return within %s", waitTimeout)
		}
	})

	status := func(name string) []networkingv1.IngressLoadBalancerIngress {
		ing, err := client.NetworkingV1().Ingresses("web").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return ing.Status.LoadBalancer.Ingress
	}
	want := []networkingv1.IngressLoadBalancerIngress{ip("10.0.0.1")}
	key := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "web", Name: name} }

	eventually(t, "leading", w.IsLeader)
	w.Update([]types.NamespacedName{key("a"), key("b"), key("other"), key("missing")})
	eventually(t, "a, b and other published", func() bool {
		return equalAddrs(status("a"), want) && equalAddrs(status("b"), want) && equalAddrs(status("other"), want)
	})

	// "other" is taken over by another controller before it leaves our set.
	other, _ := client.NetworkingV1().Ingresses("web").Get(context.Background(), "other", metav1.GetOptions{})
	other.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{ip("192.0.2.1")}
	if _, err := client.NetworkingV1().Ingresses("web").UpdateStatus(context.Background(), other, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.Update([]types.NamespacedName{key("b")})
	eventually(t, "a cleared", func() bool { return len(status("a")) == 0 })
	eventually(t, "nothing left to clear", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.known) == 1
	})
	if got := status("other"); !equalAddrs(got, []networkingv1.IngressLoadBalancerIngress{ip("192.0.2.1")}) {
		t.Errorf("status of an Ingress another controller wrote = %v, want it left alone", got)
	}
	if got := status("b"); !equalAddrs(got, want) {
		t.Errorf("status of b = %v, want %v", got, want)
	}
}
