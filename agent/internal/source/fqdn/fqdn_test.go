package fqdn

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/source"
)

type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][]string
}

func (r *fakeResolver) set(name string, addrs ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answers[name] = addrs
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	raw, ok := r.answers[host]
	if !ok {
		return nil, errors.New("no such host")
	}
	var out []netip.Addr
	for _, a := range raw {
		out = append(out, netip.MustParseAddr(a))
	}
	return out, nil
}

type staticSource struct{ snap model.Snapshot }

func (s *staticSource) Start(context.Context, func(source.Change)) error { return nil }
func (s *staticSource) Snapshot() (model.Snapshot, []model.Problem)      { return s.snap, nil }

func fqdnSlice(names ...string) *discoveryv1.EndpointSlice {
	ready := true
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "demo-1", Labels: map[string]string{discoveryv1.LabelServiceName: "demo"}},
		AddressType: discoveryv1.AddressTypeFQDN,
	}
	for _, n := range names {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{n}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
	}
	return s
}

func addresses(snap model.Snapshot) []string {
	var out []string
	for s := range snap.EndpointSlices.All() {
		for _, ep := range s.Endpoints {
			out = append(out, string(s.AddressType)+" "+ep.Addresses[0])
		}
	}
	slices.Sort(out)
	return out
}

func TestResolvesAndFollowsDNS(t *testing.T) {
	r := &fakeResolver{answers: map[string][]string{}}
	r.set("backend-1", "10.1.0.1")
	r.set("backend-2", "10.1.0.2", "fd00::2")
	inner := &staticSource{snap: model.Snapshot{EndpointSlices: model.ListOf(fqdnSlice("backend-1", "backend-2", "missing"))}}
	s := Wrap(inner, Options{Resolver: r, Interval: 20 * time.Millisecond})

	snap, problems := s.Snapshot()
	want := []string{"IPv4 10.1.0.1", "IPv4 10.1.0.2", "IPv6 fd00::2"}
	if got := addresses(snap); !slices.Equal(got, want) {
		t.Errorf("addresses %v, want %v", got, want)
	}
	if len(problems) != 1 || problems[0].Object() != "EndpointSlice default/demo-1" {
		t.Errorf("problems %v, want one for the missing name", problems)
	}
	if inner.snap.EndpointSlices.At(0).AddressType != discoveryv1.AddressTypeFQDN {
		t.Error("the inner source's slice was modified")
	}

	changes := make(chan source.Change, 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := s.Start(ctx, func(c source.Change) { changes <- c }); err != nil {
		t.Fatal(err)
	}
	r.set("backend-1", "10.1.0.9")
	select {
	case c := <-changes:
		if c.Kind != source.KindEndpointSlice || c.Name == "" {
			t.Errorf("change %s, want the EndpointSlice whose name resolved differently", c)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a DNS change was not reported within 5s")
	}
	snap, _ = s.Snapshot()
	if got := addresses(snap); !slices.Contains(got, "IPv4 10.1.0.9") || slices.Contains(got, "IPv4 10.1.0.1") {
		t.Errorf("after the DNS change: %v", got)
	}
}

// Resolved addresses go through the model's endpoint check like any
// other (issue 25, point 7): the API server validates FQDN slices as
// names, so "127.0.0.1" and "169.254.169.254" pass it, and the resolver
// returns IP literals as they are; a name may resolve to the pod's own
// address. Each is a Problem on the slice, the rest of the slice served.
func TestResolvedAddressesAreChecked(t *testing.T) {
	r := &fakeResolver{answers: map[string][]string{}}
	r.set("good.test", "10.1.0.1")
	r.set("pod.test", "10.244.1.7")
	r.set("metadata.test", "169.254.169.254")
	r.set("127.0.0.1", "127.0.0.1") // what the system resolver answers for a literal
	r.set("0.0.0.0", "0.0.0.0")
	slice := fqdnSlice("good.test", "127.0.0.1", "0.0.0.0", "metadata.test", "pod.test")
	port, name := int32(8080), "http"
	slice.Ports = []discoveryv1.EndpointPort{{Name: &name, Port: &port}}
	inner := &staticSource{snap: model.Snapshot{EndpointSlices: model.ListOf(slice)}}
	snap, _ := Wrap(inner, Options{Resolver: r}).Snapshot()

	svc := model.ServiceOf(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "demo"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}})
	targets := model.Targets{PodAddresses: []netip.Addr{netip.MustParseAddr("10.244.1.7")}, PodPorts: []int32{80, 443, 10254}}
	b, problems := model.ResolveBackend("default/demo:80", svc, snap.EndpointSlices.Slice(), targets)
	if len(b.Endpoints) != 1 || b.Endpoints[0].Address != "10.1.0.1" {
		t.Errorf("endpoints %v, want 10.1.0.1 alone", b.Endpoints)
	}
	var reasons []string
	for _, p := range problems {
		if p.Object() != "EndpointSlice default/demo-1" {
			t.Errorf("problem %v does not name the slice", p)
		}
		reasons = append(reasons, p.Reason)
	}
	for _, want := range []string{"127.0.0.1, a loopback address", `"0.0.0.0"`,
		"169.254.169.254, a link-local address", "10.244.1.7, an address of the ingress pod itself"} {
		if !slices.ContainsFunc(reasons, func(r string) bool { return strings.Contains(r, want) }) {
			t.Errorf("no problem mentioning %q in %q", want, reasons)
		}
	}
}

// An FQDN slice whose source dropped its label (the file source's, its
// Service in the snapshot's SliceServices) resolves into slices of the
// same Service: the copies are new objects SliceServices does not know,
// so they carry the label; the model gives the Service their addresses.
func TestResolvedSlicesKeepTheServiceOfAnUnlabelledSlice(t *testing.T) {
	r := &fakeResolver{answers: map[string][]string{}}
	r.set("backend-1", "10.1.0.1")
	slice := fqdnSlice("backend-1")
	slice.Labels = nil
	port, name := int32(8080), "http"
	slice.Ports = []discoveryv1.EndpointPort{{Name: &name, Port: &port}}
	inner := &staticSource{snap: model.Snapshot{EndpointSlices: model.ListOf(slice),
		SliceServices: func(s *discoveryv1.EndpointSlice) string {
			if s == slice {
				return "demo"
			}
			return ""
		}}}
	snap, _ := Wrap(inner, Options{Resolver: r}).Snapshot()
	for s := range snap.EndpointSlices.All() {
		if got := snap.ServiceOfSlice(s); got != "demo" {
			t.Errorf("resolved %s slice of Service %q, want demo", s.AddressType, got)
		}
	}
	if slice.Labels != nil {
		t.Error("the inner source's slice was modified")
	}
	svc := model.ServiceOf(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "demo"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}})
	m, problems := model.Build(model.Snapshot{Services: model.ListOf(svc), EndpointSlices: snap.EndpointSlices, SliceServices: snap.SliceServices,
		Ingresses: model.ListOf(&networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "demo"},
			Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
				Name: "demo", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}),
		WatchWithoutClass: true})
	if m.Backends.Len() != 1 || len(m.Backends.At(0).Endpoints) != 1 || m.Backends.At(0).Endpoints[0].Address != "10.1.0.1" {
		t.Errorf("backends %+v (problems %v), want demo's with 10.1.0.1", m.Backends, problems)
	}
}

// A list of EndpointSlices Snapshot found no FQDN slice in is not walked
// again when the inner source hands the very same list (it never changes
// one it handed out): a new Ingress's sync beside 50,000 slices read every
// slice. A new list is walked, and its FQDN slices resolved.
func TestSameListWithoutFQDNIsNotWalked(t *testing.T) {
	r := &fakeResolver{answers: map[string][]string{}}
	r.set("backend-1", "10.1.0.1")
	ip := fqdnSlice()
	ip.AddressType, ip.Name = discoveryv1.AddressTypeIPv4, "ip-1"
	ip.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}}
	plain := model.ListOf(ip)
	inner := &staticSource{snap: model.Snapshot{EndpointSlices: plain}}
	s := Wrap(inner, Options{Resolver: r})
	if snap, _ := s.Snapshot(); !snap.EndpointSlices.Same(plain) {
		t.Fatal("a list without FQDN slices was copied")
	}
	// The same list again: white-box, its slice is made FQDN in place
	// (what a source never does) to see that it is not looked at.
	ip.AddressType = discoveryv1.AddressTypeFQDN
	if snap, _ := s.Snapshot(); snap.EndpointSlices.Len() != 1 || snap.EndpointSlices.At(0) != ip {
		t.Fatalf("the same list was walked again: %v", addresses(snap))
	}
	ip.AddressType = discoveryv1.AddressTypeIPv4
	// Another list, with an FQDN slice: walked and resolved, and the
	// same list again still is (its names may resolve anew).
	inner.snap.EndpointSlices = model.ListOf(ip, fqdnSlice("backend-1"))
	for range 2 {
		snap, _ := s.Snapshot()
		if got, want := addresses(snap), []string{"IPv4 10.0.0.1", "IPv4 10.1.0.1"}; !slices.Equal(got, want) {
			t.Errorf("addresses %v, want %v", got, want)
		}
	}
}
