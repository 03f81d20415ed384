package model

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Stream is what nginx's stream module serves beside the HTTP servers:
// TLS passed to a backend untouched, chosen by SNI (annotation
// ssl-passthrough, with --enable-ssl-passthrough), and TCP and UDP
// services (ingress-nginx's --tcp-services-configmap and
// --udp-services-configmap).
//
// Its backends' endpoints are written into nginx.conf, so a move of them
// is a reload, not a push: the stream module of Debian's nginx has no Lua
// to balance with. nginx drains the old workers' connections on a reload,
// so a move drops no connection.
type Stream struct {
	// Passthrough are the hosts whose TLS goes to a backend untouched,
	// sorted by Host.
	Passthrough []PassthroughHost
	// Services are the TCP and UDP services, sorted by Port then Protocol.
	Services []StreamService
	// Backends are the Service ports they go to, sorted by Name.
	Backends []StreamBackend
	// Gateways are the Gateway listeners of protocol TLS, mode
	// Passthrough, one per address:port, sorted (tlsroute.go).
	Gateways []TLSFront
}

// Empty says there is nothing for the stream module to serve.
func (s Stream) Empty() bool {
	return len(s.Passthrough) == 0 && len(s.Services) == 0 && len(s.Gateways) == 0
}

// PassthroughHost is one host whose TLS connections go to Backend as they
// are: the backend presents its own certificate.
type PassthroughHost struct {
	// Host is an exact name or a wildcard ("*.example.com", one label).
	Host string
	// Backend is the Name of an entry in Stream.Backends.
	Backend string
	// Ingress that passes it through ("namespace/name"): the oldest.
	Ingress string
}

// StreamService is one port nginx listens on for a TCP or UDP service.
type StreamService struct {
	Port int32
	// Protocol is corev1.ProtocolTCP or corev1.ProtocolUDP.
	Protocol corev1.Protocol
	// Backend is the Name of an entry in Stream.Backends.
	Backend string
	// AcceptProxyProtocol reads a PROXY protocol header from each client
	// (the value's first ":PROXY"); SendProxyProtocol sends one to the
	// backend (the second). TCP only.
	AcceptProxyProtocol bool
	SendProxyProtocol   bool
}

// StreamBackend is the ready endpoints of one Service port, for the stream
// module.
type StreamBackend struct {
	// Name is "tcp:namespace/service:port" or "udp:…", port as written.
	Name string
	// Namespace and Service are the Service's: an EndpointSlice change
	// of it changes nginx.conf.
	Namespace, Service string
	// Endpoints sorted by Address then Port; empty closes each connection.
	Endpoints []Endpoint
}

// streamState is the stream part of one Build.
type streamState struct {
	// enabled is Snapshot.SSLPassthrough.
	enabled     bool
	passthrough map[string]PassthroughHost
	services    []StreamService
	backends    map[string]StreamBackend
}

// addPassthrough passes the TLS of ing's hosts through when it sets
// ssl-passthrough: to the backend of the host's path "/", else of the
// Ingress's default backend, as ingress-nginx chooses it. The oldest
// Ingress wins a host. Plain HTTP for those hosts is served as the
// Ingress's paths say, as ingress-nginx does.
func (b *builder) addPassthrough(ing *networkingv1.Ingress) {
	value, key, ok := lookupAnnotation(ing, "ssl-passthrough")
	if !ok {
		return
	}
	on, _ := strconv.ParseBool(value)
	if reason := checkBool(value); reason != "" {
		b.annotationProblem(ing, key, value, reason+"; nginx terminates TLS for its hosts")
		return
	}
	if !on {
		return
	}
	if !b.stream.enabled {
		b.annotationProblem(ing, key, value, "needs the agent's --enable-ssl-passthrough (off by default, as in ingress-nginx); nginx terminates TLS for its hosts")
		return
	}
	id := ing.Namespace + "/" + ing.Name
	for ri := range ing.Spec.Rules {
		rule := &ing.Spec.Rules[ri]
		if rule.Host == "" {
			b.annotationProblem(ing, key, value, fmt.Sprintf("spec.rules[%d] has no host, and passthrough chooses the backend by the name the client asks for (SNI); that rule is not passed through", ri))
			continue
		}
		if validHost(rule.Host) != "" {
			continue // reported by addIngress
		}
		backend, field := passthroughBackend(ing, rule)
		if backend == nil {
			b.annotationProblem(ing, key, value, fmt.Sprintf("host %q has no path \"/\" and the Ingress no default backend: nothing to pass its TLS connections to", rule.Host))
			continue
		}
		ref, reason := parseBackend(ing.Namespace, backend, field)
		if reason != "" {
			continue // reported by addIngress
		}
		if owner, taken := b.stream.passthrough[rule.Host]; taken {
			if owner.Ingress != id {
				b.annotationProblem(ing, key, value, fmt.Sprintf("host %q is passed through by Ingress %s already", rule.Host, owner.Ingress))
			}
			continue
		}
		name, problem := b.resolveStream(ref, corev1.ProtocolTCP)
		if problem != "" {
			b.ingressProblem(ing, field+problem+"; its TLS connections are closed")
		}
		b.stream.passthrough[rule.Host] = PassthroughHost{Host: rule.Host, Backend: name, Ingress: id}
	}
}

// passthroughBackend returns the backend of rule's path "/", else of the
// Ingress's default backend, and where it is in the Ingress.
func passthroughBackend(ing *networkingv1.Ingress, rule *networkingv1.IngressRule) (*networkingv1.IngressBackend, string) {
	if rule.HTTP != nil {
		for i := range rule.HTTP.Paths {
			if p := &rule.HTTP.Paths[i]; p.Path == "/" {
				return &p.Backend, "backend"
			}
		}
	}
	if ing.Spec.DefaultBackend != nil {
		return ing.Spec.DefaultBackend, "spec.defaultBackend"
	}
	return nil, ""
}

// resolveStream returns the name of the stream backend of ref's Service
// port of protocol, resolving it once, and why it has no endpoints when a
// part is missing.
func (b *builder) resolveStream(ref backendRef, protocol corev1.Protocol) (name, problem string) {
	ref.protocol = protocol
	name = strings.ToLower(string(protocol)) + ":" + ref.name
	if _, ok := b.stream.backends[name]; ok {
		return name, ""
	}
	backend := StreamBackend{Name: name, Namespace: ref.namespace, Service: ref.service, Endpoints: []Endpoint{}}
	svc, servicePort, problem := b.servicePort(ref)
	if problem == "" {
		backend.Endpoints = b.endpoints(svc, servicePort)
	}
	b.stream.backends[name] = backend
	return name, problem
}

// addStreamServices reads ingress-nginx's TCP or UDP services ConfigMap:
// each key a port, each value "namespace/service:port[:PROXY][:PROXY]".
// A bad entry is a Problem on the ConfigMap and only it is left out.
// reserved are the ports nginx listens on for HTTP.
func (b *builder) addStreamServices(cm *corev1.ConfigMap, protocol corev1.Protocol, reserved []int32) {
	if cm == nil {
		return
	}
	bad := func(key, reason string) {
		b.problem("ConfigMap", cm.Namespace, cm.Name, fmt.Sprintf("%s service %q: %s; left out", protocol, clip(key), reason))
	}
	for _, key := range slices.Sorted(maps.Keys(cm.Data)) {
		value := cm.Data[key]
		port, err := strconv.ParseInt(key, 10, 32)
		if err != nil || port < 1 || port > 65535 || strconv.FormatInt(port, 10) != key {
			bad(key, "the key must be a port number, 1..65535")
			continue
		}
		if slices.Contains(reserved, int32(port)) {
			bad(key, "nginx listens on that port for HTTP already")
			continue
		}
		ref, accept, send, reason := parseStreamTarget(value)
		if reason == "" && protocol == corev1.ProtocolUDP && (accept || send) {
			reason = "the PROXY protocol is for TCP services only"
		}
		if reason != "" {
			bad(key, fmt.Sprintf("value %q: %s", clip(value), reason))
			continue
		}
		name, problem := b.resolveStream(ref, protocol)
		if problem != "" {
			p := Problem{Kind: "ConfigMap", Namespace: cm.Namespace, Name: cm.Name,
				Reason: clipReason(fmt.Sprintf("%s service %q: value %q%s; its connections are closed", protocol, key, clip(value), problem))}
			if b.service(ref.namespace, ref.service) == nil {
				p.Missing = "Service " + ref.namespace + "/" + ref.service
			}
			b.problems = append(b.problems, p)
		}
		b.stream.services = append(b.stream.services, StreamService{Port: int32(port), Protocol: protocol, Backend: name,
			AcceptProxyProtocol: accept, SendProxyProtocol: send})
	}
}

// parseStreamTarget checks "namespace/service:port[:PROXY][:PROXY]".
func parseStreamTarget(value string) (ref backendRef, accept, send bool, reason string) {
	parts := strings.Split(value, ":")
	if len(parts) < 2 || len(parts) > 4 {
		return ref, false, false, "want namespace/service:port, optionally followed by :PROXY (accept it from clients) and :PROXY (send it to the backend)"
	}
	namespace, service, ok := strings.Cut(parts[0], "/")
	if !ok {
		return ref, false, false, "want namespace/service before the port"
	}
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return ref, false, false, fmt.Sprintf("namespace %q: %s", clip(namespace), errs[0])
	}
	if errs := validation.IsDNS1035Label(service); len(errs) > 0 {
		return ref, false, false, fmt.Sprintf("service %q: %s", clip(service), errs[0])
	}
	port := networkingv1.ServiceBackendPort{Name: parts[1]}
	if n, err := strconv.ParseInt(parts[1], 10, 32); err == nil {
		if n < 1 || n > 65535 {
			return ref, false, false, fmt.Sprintf("port %d: must be 1..65535", n)
		}
		port = networkingv1.ServiceBackendPort{Number: int32(n)}
	} else if errs := validation.IsValidPortName(parts[1]); len(errs) > 0 {
		return ref, false, false, fmt.Sprintf("port %q: is neither a number nor a port name: %s", clip(parts[1]), errs[0])
	}
	for i, p := range parts[2:] {
		if p != "" && p != "PROXY" {
			return ref, false, false, fmt.Sprintf("field %d %q: want PROXY or nothing", i+3, clip(p))
		}
	}
	accept = len(parts) > 2 && parts[2] == "PROXY"
	send = len(parts) > 3 && parts[3] == "PROXY"
	ref = backendRef{namespace: namespace, service: service, port: port, name: namespace + "/" + service + ":" + parts[1]}
	return ref, accept, send, ""
}

// streamModel returns the stream part of the Model, sorted.
func (b *builder) streamModel() Stream {
	var s Stream
	for _, h := range b.stream.passthrough {
		s.Passthrough = append(s.Passthrough, h)
	}
	slices.SortFunc(s.Passthrough, func(a, b PassthroughHost) int { return strings.Compare(a.Host, b.Host) })
	s.Services = b.stream.services
	slices.SortFunc(s.Services, func(a, b StreamService) int {
		return cmp.Or(cmp.Compare(a.Port, b.Port), strings.Compare(string(a.Protocol), string(b.Protocol)))
	})
	for _, backend := range b.stream.backends {
		s.Backends = append(s.Backends, backend)
	}
	slices.SortFunc(s.Backends, func(a, b StreamBackend) int { return strings.Compare(a.Name, b.Name) })
	return s
}

// UsesService says whether the endpoints of Service namespace/name are
// in nginx.conf: a change of them needs a new config.
func (s Stream) UsesService(namespace, name string) bool {
	for _, b := range s.Backends {
		if b.Namespace == namespace && b.Service == name {
			return true
		}
	}
	return false
}
