package status

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/restysync/restysync/agent/internal/kubeclient"
)

// Publisher resolves the addresses written into .status.loadBalancer.ingress
// of every Ingress served: either those of a Service (--publish-service) or
// a fixed list (--publish-address).
type Publisher struct {
	static []networkingv1.IngressLoadBalancerIngress

	// With a Service.
	client          kubeclient.Interface
	namespace, name string
	services        corelisters.ServiceLister // set by Start
	started         atomic.Bool
	ready           atomic.Bool
}

// NewPublisher returns the Publisher the flags ask for: service
// (--publish-service, "namespace/name") or addresses (--publish-address);
// exactly one must be given.
func NewPublisher(client kubeclient.Interface, service string, addresses []string) (*Publisher, error) {
	switch {
	case service != "" && len(addresses) > 0:
		return nil, errors.New("publish service and publish addresses are exclusive: give one")
	case service != "":
		return NewServicePublisher(client, service)
	case len(addresses) > 0:
		return NewAddressPublisher(addresses)
	default:
		return nil, errors.New("no publish service or publish address given")
	}
}

// NewServicePublisher publishes the addresses of the Service "namespace/name":
// its status.loadBalancer.ingress when it has one, else its spec.clusterIP
// (none for a headless Service). Start watches that one Service, which needs
// list and watch on services in its namespace.
func NewServicePublisher(client kubeclient.Interface, service string) (*Publisher, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(service)
	if err != nil || ns == "" || name == "" {
		return nil, fmt.Errorf("publish service %q: want namespace/name", service)
	}
	return &Publisher{client: client, namespace: ns, name: name}, nil
}

// NewAddressPublisher publishes fixed addresses: each is an IP address or a
// DNS name (lower case, as Kubernetes requires in Ingress status).
func NewAddressPublisher(addresses []string) (*Publisher, error) {
	if len(addresses) == 0 {
		return nil, errors.New("publish address: none given")
	}
	var static []networkingv1.IngressLoadBalancerIngress
	for _, a := range addresses {
		a = strings.TrimSpace(a)
		if ip, err := netip.ParseAddr(a); err == nil && ip.Zone() == "" {
			static = append(static, networkingv1.IngressLoadBalancerIngress{IP: ip.String()})
			continue
		}
		if errs := validation.IsDNS1123Subdomain(a); len(errs) > 0 {
			return nil, fmt.Errorf("publish address %q: neither an IP address nor a DNS name: %s", a, strings.Join(errs, "; "))
		}
		static = append(static, networkingv1.IngressLoadBalancerIngress{Hostname: a})
	}
	return &Publisher{static: normalize(static)}, nil
}

// Start watches the Service of a service publisher, calls changed after each
// change of it, and returns once the first listing is in; it fails if ctx
// ends first. For an address publisher it does nothing. The watch ends with
// ctx.
func (p *Publisher) Start(ctx context.Context, changed func()) error {
	if p.client == nil {
		return nil
	}
	if !p.started.CompareAndSwap(false, true) {
		return errors.New("publisher: Start called twice")
	}
	byName := fields.OneTermEqualSelector("metadata.name", p.name).String()
	informer := kubeclient.NewInformer(p.client, p.client.Services(p.namespace), &corev1.Service{}, 0,
		func(o *metav1.ListOptions) { o.FieldSelector = byName })
	notify := func(any) { changed() }
	reg, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, obj any) { changed() },
		DeleteFunc: notify,
	})
	if err != nil {
		return fmt.Errorf("publish service %s/%s: %w", p.namespace, p.name, err)
	}
	p.services = corelisters.NewServiceLister(informer.GetIndexer())
	p.ready.Store(true)
	go informer.RunWithContext(ctx) // returns when ctx ends
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced, reg.HasSynced) {
		return fmt.Errorf("publish service %s/%s: waiting for the cache to sync: %w", p.namespace, p.name, context.Cause(ctx))
	}
	return nil
}

// Addresses returns the addresses to publish, sorted; none while a Service
// is missing or has no address yet. The slice is the caller's.
func (p *Publisher) Addresses() []networkingv1.IngressLoadBalancerIngress {
	if p.client == nil {
		return slices.Clone(p.static)
	}
	if !p.ready.Load() {
		return nil
	}
	svc, err := p.services.Services(p.namespace).Get(p.name)
	if err != nil {
		return nil
	}
	return serviceAddresses(svc)
}

// String names what is published, for logs.
func (p *Publisher) String() string {
	if p.client == nil {
		return fmt.Sprintf("addresses %s", describe(p.static))
	}
	return fmt.Sprintf("service %s/%s", p.namespace, p.name)
}

func serviceAddresses(svc *corev1.Service) []networkingv1.IngressLoadBalancerIngress {
	var out []networkingv1.IngressLoadBalancerIngress
	for _, lb := range svc.Status.LoadBalancer.Ingress {
		if lb.IP != "" || lb.Hostname != "" {
			out = append(out, networkingv1.IngressLoadBalancerIngress{IP: lb.IP, Hostname: lb.Hostname})
		}
	}
	if len(out) == 0 && svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone {
		out = append(out, networkingv1.IngressLoadBalancerIngress{IP: svc.Spec.ClusterIP})
	}
	return normalize(out)
}

// normalize sorts addresses, IPs before host names, and drops duplicates.
func normalize(addrs []networkingv1.IngressLoadBalancerIngress) []networkingv1.IngressLoadBalancerIngress {
	slices.SortFunc(addrs, compareAddress)
	return slices.CompactFunc(addrs, func(a, b networkingv1.IngressLoadBalancerIngress) bool {
		return compareAddress(a, b) == 0 && samePorts(a.Ports, b.Ports)
	})
}

func compareAddress(a, b networkingv1.IngressLoadBalancerIngress) int {
	return cmp.Or(cmp.Compare(a.Hostname, b.Hostname), cmp.Compare(a.IP, b.IP))
}

// sameAddresses reports whether a and b hold the same addresses in any order.
func sameAddresses(a, b []networkingv1.IngressLoadBalancerIngress) bool {
	if len(a) != len(b) {
		return false
	}
	a = slices.SortedFunc(slices.Values(a), compareAddress)
	b = slices.SortedFunc(slices.Values(b), compareAddress)
	for i := range a {
		if compareAddress(a[i], b[i]) != 0 || !samePorts(a[i].Ports, b[i].Ports) {
			return false
		}
	}
	return true
}

func samePorts(a, b []networkingv1.IngressPortStatus) bool {
	return slices.EqualFunc(a, b, func(x, y networkingv1.IngressPortStatus) bool {
		return x.Port == y.Port && x.Protocol == y.Protocol && equalPtr(x.Error, y.Error)
	})
}

func equalPtr(a, b *string) bool {
	return a == b || (a != nil && b != nil && *a == *b)
}

// describe renders addresses for logs: "[10.0.0.1 lb.example.com]".
func describe(addrs []networkingv1.IngressLoadBalancerIngress) string {
	parts := make([]string, 0, len(addrs))
	for _, a := range addrs {
		parts = append(parts, cmp.Or(a.IP, a.Hostname))
	}
	return "[" + strings.Join(parts, " ") + "]"
}
