// Package fqdn is part of the source stage of the pipeline (source → model → render → plan → apply): it wraps a
// Source and turns EndpointSlices of addressType FQDN into IP slices, by
// resolving their names and resolving them again as DNS changes.
//
// Resolution sits here, not in model.Build, because Build must stay a pure
// function; the model sees ordinary IPv4 and IPv6 slices. Names are looked
// up once when they first appear (so a new slice is served on its first
// sync) and then every Interval in the background; a change in the answers
// is reported as an EndpointSlice change, which takes the fast path.
package fqdn

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/source"
)

// Resolver looks names up; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Options configure the wrapper. Zero values take the defaults noted.
type Options struct {
	// Resolver defaults to net.DefaultResolver.
	Resolver Resolver
	// Interval between background resolutions of every name (default 5s).
	Interval time.Duration
	// Timeout of one lookup (default 2s).
	Timeout time.Duration
	Logger  *slog.Logger
}

// Source resolves the FQDN EndpointSlices of an inner Source.
type Source struct {
	inner source.Source
	opts  Options

	mu sync.Mutex
	// answers by name: the addresses, or the error of the last lookup.
	answers map[string]answer
	// changedServices are Services whose answers moved, for the fast path.
	changedServices map[source.ServiceKey]bool
	// plain is the last EndpointSlices list Snapshot found no FQDN slice
	// in: the same list again (same array and length: a source hands a
	// list it did not change again, and never changes one handed out) has
	// none either and is not walked. The walk reads every slice of the
	// cluster: ~1–3 ms at 50,000 slices on every sync of a new Ingress.
	plain model.List[*discoveryv1.EndpointSlice]
}

type answer struct {
	addrs []netip.Addr
	err   error
}

var _ source.Source = (*Source)(nil)

// Wrap returns inner with its FQDN EndpointSlices resolved.
func Wrap(inner source.Source, opts Options) *Source {
	if opts.Resolver == nil {
		opts.Resolver = net.DefaultResolver
	}
	if opts.Interval <= 0 {
		opts.Interval = 5 * time.Second
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Source{inner: inner, opts: opts, answers: map[string]answer{}, changedServices: map[source.ServiceKey]bool{}}
}

// Start starts the inner source, then re-resolves every name each Interval
// until ctx is done, calling changed for each slice whose answers moved.
func (s *Source) Start(ctx context.Context, changed func(source.Change)) error {
	if err := s.inner.Start(ctx, changed); err != nil {
		return err
	}
	go func() {
		tick := time.NewTicker(s.opts.Interval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for _, slice := range s.refresh(ctx) {
				changed(source.Change{Kind: source.KindEndpointSlice, Namespace: slice.Namespace, Name: slice.Name})
			}
		}
	}()
	return nil
}

// refresh looks every FQDN name of the inner snapshot up again and
// returns the slices of the answers that changed.
func (s *Source) refresh(ctx context.Context) []*discoveryv1.EndpointSlice {
	snap, _ := s.inner.Snapshot()
	var moved []*discoveryv1.EndpointSlice
	for slice := range snap.EndpointSlices.All() {
		if slice.AddressType != discoveryv1.AddressTypeFQDN {
			continue
		}
		for _, name := range names(slice) {
			next := s.lookup(ctx, name)
			s.mu.Lock()
			prev, known := s.answers[name]
			if !known || !sameAnswer(prev, next) {
				s.answers[name] = next
				s.changedServices[source.ServiceKey{Namespace: slice.Namespace, Name: snap.ServiceOfSlice(slice)}] = true
				if !slices.Contains(moved, slice) {
					moved = append(moved, slice)
				}
				s.opts.Logger.Info("FQDN endpoint resolved", "name", name, "addresses", fmt.Sprint(next.addrs), "error", next.err)
			}
			s.mu.Unlock()
		}
	}
	return moved
}

// Snapshot returns the inner snapshot with every FQDN slice replaced by IP
// slices, and a Problem for each name that does not resolve.
func (s *Source) Snapshot() (model.Snapshot, []model.Problem) {
	snap, problems := s.inner.Snapshot()
	list := snap.EndpointSlices
	s.mu.Lock()
	plain := list.Same(s.plain)
	s.mu.Unlock()
	if plain {
		return snap, problems
	}
	var out []*discoveryv1.EndpointSlice
	i := 0 // slice is list's item i
	for slice := range list.All() {
		if slice.AddressType != discoveryv1.AddressTypeFQDN {
			if out != nil {
				out = append(out, slice)
			}
			i++
			continue
		}
		if out == nil {
			out = list.Slice()[:i]
		}
		resolved, p := s.resolveSlice(slice, snap.ServiceOfSlice(slice))
		out = append(out, resolved...)
		problems = append(problems, p...)
		i++
	}
	if out != nil {
		// The source's index by Service holds the slices as listed.
		snap.EndpointSlices, snap.SlicesOf = model.ListOf(out...), nil
	}
	s.mu.Lock()
	s.plain = model.List[*discoveryv1.EndpointSlice]{}
	if out == nil {
		s.plain = list
	}
	s.mu.Unlock()
	return snap, problems
}

// resolveSlice returns one IPv4 and one IPv6 slice holding the addresses of
// slice's names (each endpoint keeps its conditions), named after slice,
// of the Service service (its label, which the copies carry even when
// slice's source dropped it: the snapshot's SliceServices does not know
// them).
func (s *Source) resolveSlice(slice *discoveryv1.EndpointSlice, service string) ([]*discoveryv1.EndpointSlice, []model.Problem) {
	v4, v6 := slice.DeepCopy(), slice.DeepCopy()
	if slice.Labels == nil && service != "" {
		v4.Labels = map[string]string{discoveryv1.LabelServiceName: service}
		v6.Labels = map[string]string{discoveryv1.LabelServiceName: service}
	}
	v4.AddressType, v6.AddressType = discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6
	v4.Endpoints, v6.Endpoints = nil, nil
	var problems []model.Problem
	for i, ep := range slice.Endpoints {
		for j, name := range ep.Addresses {
			a := s.cached(name)
			if a.err != nil {
				problems = append(problems, model.Problem{Kind: "EndpointSlice", Namespace: slice.Namespace, Name: slice.Name,
					Reason: fmt.Sprintf("endpoints[%d].addresses[%d] %q: does not resolve: %v; address left out", i, j, name, a.err)})
				continue
			}
			for _, addr := range a.addrs {
				e := *ep.DeepCopy()
				e.Addresses = []string{addr.String()}
				if addr.Is4() || addr.Is4In6() {
					e.Addresses = []string{addr.Unmap().String()}
					v4.Endpoints = append(v4.Endpoints, e)
				} else {
					v6.Endpoints = append(v6.Endpoints, e)
				}
			}
		}
	}
	return []*discoveryv1.EndpointSlice{v4, v6}, problems
}

// cached returns the answer for name, looking it up now if it has none.
func (s *Source) cached(name string) answer {
	s.mu.Lock()
	a, ok := s.answers[name]
	s.mu.Unlock()
	if ok {
		return a
	}
	a = s.lookup(context.Background(), name)
	s.mu.Lock()
	s.answers[name] = a
	s.mu.Unlock()
	return a
}

func (s *Source) lookup(ctx context.Context, name string) answer {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	addrs, err := s.opts.Resolver.LookupNetIP(ctx, "ip", strings.TrimSuffix(name, "."))
	if err != nil {
		return answer{err: err}
	}
	slices.SortFunc(addrs, func(a, b netip.Addr) int { return a.Compare(b) })
	return answer{addrs: slices.Compact(addrs)}
}

func sameAnswer(a, b answer) bool {
	if (a.err == nil) != (b.err == nil) {
		return false
	}
	return slices.Equal(a.addrs, b.addrs)
}

func names(slice *discoveryv1.EndpointSlice) []string {
	var out []string
	for _, ep := range slice.Endpoints {
		out = append(out, ep.Addresses...)
	}
	return out
}

// Indexed is a Source over an inner Source that keeps the fast path: it
// reports the Services whose names resolved differently too.
type Indexed struct {
	*Source
	index source.EndpointIndex
}

var _ source.EndpointIndex = Indexed{}

// WrapIndexed is Wrap for an inner Source that implements
// source.EndpointIndex; the result implements it too.
func WrapIndexed(inner interface {
	source.Source
	source.EndpointIndex
}, opts Options) Indexed {
	return Indexed{Source: Wrap(inner, opts), index: inner}
}

// TakeChangedServices merges the inner Source's changes with those of DNS.
func (x Indexed) TakeChangedServices() []source.ServiceKey {
	out := x.index.TakeChangedServices()
	x.mu.Lock()
	defer x.mu.Unlock()
	for k := range x.changedServices {
		out = append(out, k)
	}
	clear(x.changedServices)
	return out
}

// ServiceEndpoints returns the inner Service and slices, FQDN slices resolved.
func (x Indexed) ServiceEndpoints(namespace, name string) (*model.Service, []*discoveryv1.EndpointSlice) {
	svc, found := x.index.ServiceEndpoints(namespace, name)
	var out []*discoveryv1.EndpointSlice
	for _, slice := range found {
		if slice.AddressType != discoveryv1.AddressTypeFQDN {
			out = append(out, slice)
			continue
		}
		resolved, _ := x.resolveSlice(slice, name) // the slices of the Service name
		out = append(out, resolved...)
	}
	return svc, out
}
