package model

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// backendRef is a checked Ingress backend: a port of a Service in the
// Ingress's namespace.
type backendRef struct {
	namespace string
	service   string
	port      networkingv1.ServiceBackendPort
	// name is the Backend.Name: "namespace/service:port", port as written,
	// and "@namespace/ingress" for a variant with a Policy.
	name   string
	policy Policy
	// protocol is the Service port's: "" for TCP, or UDP (stream.go).
	protocol corev1.Protocol
	// serviceUpstream sends to the Service's cluster IP and port instead
	// of its endpoints (service-upstream; proxykeys.go).
	serviceUpstream bool
}

// withPolicy returns the variant of r that carries the Policy of ingress,
// or r itself for the zero Policy.
func (r backendRef) withPolicy(p Policy, ingress string) backendRef {
	if p == (Policy{}) {
		return r
	}
	r.policy, r.name = p, r.name+variantSeparator+ingress
	return r
}

// parseBackend checks the shape of an Ingress backend. It returns the reason
// it cannot be served, or "" when ref is good. field is where the backend is
// in the Ingress ("spec.defaultBackend").
func parseBackend(namespace string, b *networkingv1.IngressBackend, field string) (backendRef, string) {
	switch {
	case b.Resource != nil && b.Service != nil:
		return backendRef{}, field + ": has both service and resource; only one is allowed"
	case b.Resource != nil:
		return backendRef{}, field + ".resource: resource backends are not supported"
	case b.Service == nil:
		return backendRef{}, field + ".service: is missing"
	case b.Service.Name == "":
		return backendRef{}, field + ".service.name: is missing"
	case len(validation.IsDNS1035Label(b.Service.Name)) > 0:
		// The API server checks it; the file source does not.
		return backendRef{}, fmt.Sprintf("%s.service.name %q: is not a Service name (a DNS-1035 label)", field, clip(b.Service.Name))
	case b.Service.Port.Name != "" && len(validation.IsValidPortName(b.Service.Port.Name)) > 0:
		return backendRef{}, fmt.Sprintf("%s.service.port.name %q: is not a port name", field, clip(b.Service.Port.Name))
	}
	port := b.Service.Port
	var written string
	switch {
	case port.Name != "" && port.Number != 0:
		return backendRef{}, field + ".service.port: has both name and number; only one is allowed"
	case port.Name != "":
		written = port.Name
	case port.Number > 0 && port.Number <= 65535:
		written = strconv.Itoa(int(port.Number))
	case port.Number != 0:
		return backendRef{}, fmt.Sprintf("%s.service.port.number %d: is not a port number", field, port.Number)
	default:
		return backendRef{}, field + ".service.port: needs a name or a number"
	}
	return backendRef{
		namespace: namespace,
		service:   b.Service.Name,
		port:      port,
		name:      namespace + "/" + b.Service.Name + ":" + written,
	}, ""
}

// resolved is a backend with its endpoints, and, when the Service or its
// port is missing, which field of the reference is at fault and why.
type resolved struct {
	backend Backend
	// policy is the backend's Policy until the build shares it (model).
	policy Policy
	// problem is "" or a reason that follows the field path of the backend
	// in the Ingress, such as `.service.name "web": Service ns/web not found`.
	problem string
}

// resolve finds the endpoints of ref, once per backend name.
func (b *Builder) resolve(ref backendRef) resolved {
	if r, ok := b.resolved[ref.name]; ok {
		return r
	}
	r := resolved{backend: Backend{Name: ref.name, Endpoints: []Endpoint{}}, policy: ref.policy}
	svc, servicePort, problem := b.servicePort(ref)
	if problem == "" {
		eps, ok := []Endpoint(nil), false
		if ref.serviceUpstream {
			eps, ok = b.serviceEndpoints(svc, servicePort)
		}
		if !ok {
			eps = b.endpoints(svc, servicePort)
		}
		r.backend.Endpoints = eps
	}
	r.problem = problem
	b.resolved[ref.name] = r
	return r
}

// servicePort finds the Service port that ref names, by number or by name.
func (b *Builder) servicePort(ref backendRef) (*Service, *ServicePort, string) {
	svc := b.service(ref.namespace, ref.service)
	if svc == nil {
		return nil, nil, fmt.Sprintf(".service.name %q: Service %s/%s not found", ref.service, ref.namespace, ref.service)
	}
	if svc.Type == corev1.ServiceTypeExternalName {
		return nil, nil, fmt.Sprintf(".service.name %q: Service %s/%s is of type ExternalName, which is not supported yet", ref.service, ref.namespace, ref.service)
	}
	protocol := cmp.Or(ref.protocol, corev1.ProtocolTCP)
	for i := range svc.Ports {
		p := &svc.Ports[i]
		if cmp.Or(p.Protocol, corev1.ProtocolTCP) != protocol {
			continue
		}
		if (ref.port.Name != "" && p.Name == ref.port.Name) || (ref.port.Name == "" && p.Port == ref.port.Number) {
			return svc, p, ""
		}
	}
	if ref.port.Name != "" {
		return nil, nil, fmt.Sprintf(".service.port.name %q: Service %s/%s has no %s port named %q", ref.port.Name, ref.namespace, ref.service, protocol, ref.port.Name)
	}
	return nil, nil, fmt.Sprintf(".service.port.number %d: Service %s/%s has no %s port %d", ref.port.Number, ref.namespace, ref.service, protocol, ref.port.Number)
}

// endpoints collects the ready endpoints of one Service port from every
// EndpointSlice of the Service, deduplicated and sorted.
func (b *Builder) endpoints(svc *Service, servicePort *ServicePort) []Endpoint {
	serviceSlices := b.serviceSlices(svc.Namespace, svc.Name)
	size := 0
	for _, slice := range serviceSlices {
		size += len(slice.Endpoints)
	}
	eps := make([]Endpoint, 0, size)
	for _, slice := range serviceSlices {
		eps = b.appendSliceEndpoints(eps, slice, servicePort.Name, cmp.Or(servicePort.Protocol, corev1.ProtocolTCP))
	}
	slices.SortFunc(eps, compareEndpoints)
	return slices.Compact(eps)
}

// appendSliceEndpoints appends the ready endpoints of slice for the
// EndpointPort named portName ("" matches an unnamed port) of protocol.
func (b *Builder) appendSliceEndpoints(eps []Endpoint, slice *discoveryv1.EndpointSlice, portName string, protocol corev1.Protocol) []Endpoint {
	port, ok := b.slicePort(slice, portName, protocol)
	if !ok {
		return eps
	}
	switch slice.AddressType {
	case discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6:
		return b.appendIPEndpoints(eps, slice, port)
	case discoveryv1.AddressTypeFQDN:
		// FQDN endpoints need DNS, which Build must not do. They will come in
		// through the Snapshot once the agent resolves them; until then they
		// add nothing.
		return eps
	default:
		b.problem("EndpointSlice", slice.Namespace, slice.Name,
			fmt.Sprintf("addressType %q: is not supported; slice left out", slice.AddressType))
		return eps
	}
}

// slicePort finds the target port of the EndpointPort named portName.
func (b *Builder) slicePort(slice *discoveryv1.EndpointSlice, portName string, protocol corev1.Protocol) (int32, bool) {
	for i, p := range slice.Ports {
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		if name != portName || (p.Protocol != nil && *p.Protocol != protocol) || (p.Protocol == nil && protocol != corev1.ProtocolTCP) {
			continue
		}
		if p.Port == nil || *p.Port < 1 || *p.Port > 65535 {
			b.problem("EndpointSlice", slice.Namespace, slice.Name,
				fmt.Sprintf("ports[%d] (name %q): has no valid port number; slice left out for this port", i, name))
			return 0, false
		}
		return *p.Port, true
	}
	return 0, false
}

func (b *Builder) appendIPEndpoints(eps []Endpoint, slice *discoveryv1.EndpointSlice, port int32) []Endpoint {
	for i, ep := range slice.Endpoints {
		if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
			continue
		}
		for j, address := range ep.Addresses {
			addr, reason := parseEndpointAddress(address, slice.AddressType)
			if reason != "" {
				b.problem("EndpointSlice", slice.Namespace, slice.Name,
					fmt.Sprintf("endpoints[%d].addresses[%d] %q: %s; address left out", i, j, address, reason))
				continue
			}
			if reason := b.targets.CheckEndpoint(addr, port); reason != "" {
				b.endpointRefused("EndpointSlice", slice.Namespace, slice.Name,
					fmt.Sprintf("endpoints[%d].addresses[%d] %q port %d: refused: %s; address left out, the rest of the slice is used", i, j, address, port, reason))
				continue
			}
			eps = append(eps, Endpoint{Address: canonicalAddress(address, addr), Port: port})
		}
	}
	return eps
}

// parseEndpointAddress checks that address is a usable IP address of the
// slice's family. Where it may point is Targets.CheckEndpoint's question.
func parseEndpointAddress(address string, family discoveryv1.AddressType) (netip.Addr, string) {
	addr, err := netip.ParseAddr(address)
	switch {
	case err != nil:
		return addr, "is not an IP address"
	case addr.Zone() != "":
		return addr, "has an IPv6 zone"
	case family == discoveryv1.AddressTypeIPv4 && !addr.Is4():
		return addr, "is not an IPv4 address"
	case family == discoveryv1.AddressTypeIPv6 && !addr.Is6():
		return addr, "is not an IPv6 address"
	case addr.IsUnspecified() || addr.IsMulticast():
		return addr, "is not a unicast address"
	}
	return addr, ""
}

// canonicalAddress returns addr in its canonical form ("2001:db8::1"),
// reusing written when it already is, which is the common case.
func canonicalAddress(written string, addr netip.Addr) string {
	var buf [64]byte
	canonical := addr.AppendTo(buf[:0])
	if string(canonical) == written {
		return written
	}
	return string(canonical)
}

func compareEndpoints(a, b Endpoint) int {
	return cmp.Or(strings.Compare(a.Address, b.Address), cmp.Compare(a.Port, b.Port))
}
