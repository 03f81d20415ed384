package model

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// TLSRoutes: TLS connections sent to a backend chosen by the name the
// client asks for (SNI), on Gateway listeners of protocol TLS: mode
// Passthrough passes them untouched, mode Terminate ends TLS with the
// listener's certificate and sends the plain bytes. Such a listener is not
// an HTTP server block: each of its Gateway's addresses becomes a TLSFront
// of the stream module, as the ssl-passthrough annotation's front is
// (stream.go). Both modes may share a port (TLSRouteModeMixed): the front
// reads the SNI and sends a terminated name on to a local server that
// ends TLS.
//
// The stream module ends TLS with certificate files: a Terminate
// listener's certificate and key are written as files under the shared
// dir (Model.AuthFiles, mode 0640, named by their content), as the client
// certificates of backend TLS are; a new certificate is a new file and a
// reload.
//
// Why the stream module and not the Lua router: nginx has to read the
// ClientHello before it knows where a connection goes, which only the
// stream module's ssl_preread does; Debian's stream module has no Lua, so
// its backends' endpoints are written into nginx.conf and a TLSRoute or an
// endpoint change behind one reloads nginx (which drains open connections).

// TLSFront is a Gateway listener port of protocol TLS on one of its
// Gateway's addresses: nginx's stream module listens on Address:Port and
// sends each connection to the backend of the most specific Host that
// matches the client's SNI, untouched or (CertFile set) after ending TLS.
// A name no Host matches is closed.
type TLSFront struct {
	Address string `json:"address"`
	Port    int32  `json:"port"`
	// Front is FrontName(Address, Port).
	Front string `json:"front"`
	// Hosts sorted by Host.
	Hosts []TLSHost `json:"hosts,omitempty"`
}

// TLSHost is one name a TLSFront passes through.
type TLSHost struct {
	// Host is an exact name, a Gateway wildcard ("*.example.com": any
	// number of labels), or "_" for every name.
	Host string `json:"host"`
	// Backend is the Name of an entry of Stream.Backends; "" closes the
	// connections (no usable backendRef).
	Backend string `json:"backend,omitempty"`
	// Route is the TLSRoute's "namespace/name": the oldest one wins a host.
	Route string `json:"route"`
	// CertFile and KeyFile are the files (Model.AuthFiles) of the
	// certificate that ends TLS for Host on a Terminate listener; "" on
	// a Passthrough one.
	CertFile string `json:"certFile,omitempty"`
	KeyFile  string `json:"keyFile,omitempty"`
}

// takes says whether routes of kind may attach to l.
func (l *listenerState) takes(kind string) bool {
	return l.accepted.Status && !l.conflicted.Status && slices.Contains(l.kinds, kind)
}

func (p *gatewayProcessor) tlsRouteProblem(r *gatewayv1.TLSRoute, reason string) {
	p.problem(kindTLSRoute, r.Namespace, r.Name, reason)
}

// processTLSRoutes attaches every TLSRoute that names one of our
// Gateways, oldest first, and records its status for each such parentRef.
func (p *gatewayProcessor) processTLSRoutes() {
	if len(p.gateways) == 0 {
		return
	}
	routes := p.source.TLSRoutes.Slice()
	slices.SortFunc(routes, compareObjects[*gatewayv1.TLSRoute])
	for _, r := range routes {
		var ours []*gatewayState
		refs := r.Spec.ParentRefs[:min(len(r.Spec.ParentRefs), maxParentRefs)]
		for i := range refs {
			ours = append(ours, p.parentGateway(r.Namespace, &refs[i]))
		}
		if !slices.ContainsFunc(ours, func(g *gatewayState) bool { return g != nil }) {
			continue
		}
		if len(validation.IsDNS1123Label(r.Namespace)) > 0 || len(validation.IsDNS1123Subdomain(r.Name)) > 0 {
			p.tlsRouteProblem(r, fmt.Sprintf("metadata: namespace %q or name %q is not a Kubernetes name; the TLSRoute is left out", clip(r.Namespace), clip(r.Name)))
			continue
		}
		hostnames, invalid := p.tlsRouteHostnames(r)
		backend, resolved := p.tlsRouteBackend(r)
		st := RouteStatus{Kind: kindTLSRoute, Namespace: r.Namespace, Name: r.Name, Generation: r.Generation}
		attached := make(map[*listenerState]bool)
		for i, g := range ours {
			if g == nil {
				continue
			}
			ref := &refs[i]
			parent := RouteParentStatus{Namespace: g.gw.Namespace, Name: g.gw.Name}
			if ref.SectionName != nil {
				parent.SectionName = string(*ref.SectionName)
			}
			if ref.Port != nil {
				parent.Port = *ref.Port
			}
			accepted := invalid
			if accepted == nil {
				accepted = ptrTo(p.attachTLS(r, hostnames, backend, g, ref, attached))
			}
			if !accepted.Status {
				p.tlsRouteProblem(r, fmt.Sprintf("spec.parentRefs[%d] (Gateway %s): not accepted (%s): %s", i, g.id, accepted.Reason, accepted.Message))
			}
			parent.Conditions = []Condition{*accepted, resolved}
			st.Parents = append(st.Parents, parent)
		}
		p.routeStatuses = append(p.routeStatuses, &st)
	}
}

// parentGateway returns our Gateway that ref of a route in namespace
// names, or nil.
func (p *gatewayProcessor) parentGateway(namespace string, ref *gatewayv1.ParentReference) *gatewayState {
	if ref.Group != nil && *ref.Group != gatewayGroup || ref.Kind != nil && *ref.Kind != kindGateway {
		return nil
	}
	if ref.Namespace != nil && *ref.Namespace != "" {
		namespace = string(*ref.Namespace)
	}
	return p.byName[namespacedName{namespace, string(ref.Name)}]
}

// tlsRouteHostnames returns r's valid hostnames, or the Accepted
// condition that keeps it from attaching when none is valid. The API
// server requires one at least; the file source does not check, and a
// TLSRoute without would take every name of its listeners.
func (p *gatewayProcessor) tlsRouteHostnames(r *gatewayv1.TLSRoute) ([]string, *Condition) {
	if n := len(r.Spec.Hostnames); n > maxRouteHostnames {
		msg := fmt.Sprintf("spec.hostnames: has %d entries, more than %d", n, maxRouteHostnames)
		p.tlsRouteProblem(r, msg+"; the TLSRoute is left out")
		return nil, ptrTo(condition(condAccepted, false, reasonUnsupportedValue, msg))
	}
	var out []string
	for i, h := range r.Spec.Hostnames {
		if reason := validHost(string(h)); reason != "" {
			p.tlsRouteProblem(r, fmt.Sprintf("spec.hostnames[%d] %q: %s; hostname left out", i, clip(string(h)), reason))
			continue
		}
		if !slices.Contains(out, string(h)) {
			out = append(out, string(h))
		}
	}
	if len(r.Spec.Hostnames) == 0 {
		msg := "spec.hostnames: none given, a TLSRoute needs one at least"
		p.tlsRouteProblem(r, msg+"; the TLSRoute is left out")
		return nil, ptrTo(condition(condAccepted, false, reasonUnsupportedValue, msg))
	}
	if len(out) == 0 {
		return nil, ptrTo(condition(condAccepted, false, reasonUnsupportedValue, "spec.hostnames: none is a valid hostname"))
	}
	return out, nil
}

// tlsRouteBackend returns the stream backend r's connections go to: its
// rule's first backendRef of non-zero weight, "" (connections closed) when
// that one cannot be used; and the ResolvedRefs condition. The stream
// front sends a host to one backend: a second backendRef of non-zero
// weight is a Problem and left out, never split silently.
func (p *gatewayProcessor) tlsRouteBackend(r *gatewayv1.TLSRoute) (string, Condition) {
	resolved := condition(condResolvedRefs, true, reasonResolvedRefs, "")
	if len(r.Spec.Rules) != 1 {
		msg := fmt.Sprintf("spec.rules: has %d rules; a TLSRoute has one", len(r.Spec.Rules))
		p.tlsRouteProblem(r, msg+"; its connections are closed")
		return "", condition(condResolvedRefs, false, string(gatewayv1.RouteReasonBackendNotFound), msg)
	}
	refs := r.Spec.Rules[0].BackendRefs
	if len(refs) > maxRuleBackends {
		refs = refs[:maxRuleBackends]
	}
	chosen, backend := -1, ""
	for i := range refs {
		ref := &refs[i]
		field := fmt.Sprintf("spec.rules[0].backendRefs[%d]", i)
		if ref.Weight != nil && *ref.Weight == 0 {
			continue
		}
		if chosen >= 0 {
			p.tlsRouteProblem(r, fmt.Sprintf("%s: connections go to backendRefs[%d] only; weights across several backendRefs are not supported on a TLS passthrough listener", field, chosen))
			continue
		}
		chosen = i
		name, bad := p.backendOf(kindTLSRoute, r.Namespace, &ref.BackendObjectReference, field)
		if bad != nil {
			p.tlsRouteProblem(r, bad.msg+"; its connections are closed")
			resolved = condition(condResolvedRefs, false, bad.reason, bad.msg)
			continue
		}
		backend = p.streamBackend(name, &ref.BackendObjectReference, r.Namespace)
	}
	if chosen < 0 {
		msg := "spec.rules[0].backendRefs: no backendRef of non-zero weight"
		p.tlsRouteProblem(r, msg+"; its connections are closed")
		resolved = condition(condResolvedRefs, false, string(gatewayv1.RouteReasonBackendNotFound), msg)
	}
	return backend, resolved
}

// streamBackend adds the stream backend of a backendRef that backendOf
// resolved as name, and returns its Name.
func (p *gatewayProcessor) streamBackend(name string, ref *gatewayv1.BackendObjectReference, namespace string) string {
	if ref.Namespace != nil && *ref.Namespace != "" {
		namespace = string(*ref.Namespace)
	}
	streamName := "tcp:" + name
	if p.streamBackends == nil {
		p.streamBackends = make(map[string]StreamBackend)
	}
	if _, ok := p.streamBackends[streamName]; ok {
		return streamName
	}
	b := StreamBackend{Name: streamName, Namespace: namespace, Service: string(ref.Name), Endpoints: []Endpoint{}}
	svc, port, problem := p.servicePort(backendRef{namespace: namespace, service: string(ref.Name),
		port: networkingv1.ServiceBackendPort{Number: *ref.Port}, name: name, protocol: corev1.ProtocolTCP})
	if problem == "" {
		b.Endpoints = p.endpoints(svc, port)
	}
	p.streamBackends[streamName] = b
	return streamName
}

// attachTLS attaches r to the passthrough listeners of g that ref selects
// and allow it, whose hostname intersects r's hostnames, and returns the
// Accepted condition for ref. The oldest route wins a name on a front.
func (p *gatewayProcessor) attachTLS(r *gatewayv1.TLSRoute, hostnames []string, backend string, g *gatewayState, ref *gatewayv1.ParentReference, attached map[*listenerState]bool) Condition {
	var selected, allowed []*listenerState
	for _, l := range g.listeners {
		if ref.SectionName != nil && *ref.SectionName != l.spec.Name || ref.Port != nil && *ref.Port != l.spec.Port {
			continue
		}
		selected = append(selected, l)
		if l.takes(kindTLSRoute) && p.allows(g, l, r.Namespace) {
			allowed = append(allowed, l)
		}
	}
	switch {
	case len(selected) == 0:
		return condition(condAccepted, false, string(gatewayv1.RouteReasonNoMatchingParent), "no listener of the Gateway has the parentRef's sectionName and port")
	case len(allowed) == 0:
		return condition(condAccepted, false, string(gatewayv1.RouteReasonNotAllowedByListeners), "no listener of the Gateway takes TLSRoutes (protocol TLS) from namespace "+r.Namespace)
	}
	return attachToListeners(g, allowed, hostnames, attached, func(l *listenerState, hosts []string) {
		certFile, keyFile := p.terminateFiles(l)
		var held []string
		for _, a := range g.addresses {
			held = p.addTLSHosts(a, l.spec.Port, hosts, TLSHost{Backend: backend, Route: r.Namespace + "/" + r.Name, CertFile: certFile, KeyFile: keyFile})
		}
		if len(held) > 0 {
			p.tlsRouteProblem(r, fmt.Sprintf("spec.hostnames: %s on port %d of Gateway %s: already served by an older TLSRoute; this route does not get them", quotedList(held), l.spec.Port, g.id))
		}
	})
}

// addTLSHosts sends hosts on address:port as to (its Host aside), those no
// older route holds there, and returns those an older route holds.
func (p *gatewayProcessor) addTLSHosts(address string, port int32, hosts []string, to TLSHost) (held []string) {
	front := FrontName(address, port)
	i := slices.IndexFunc(p.tlsFronts, func(f TLSFront) bool { return f.Front == front })
	if i < 0 {
		p.tlsFronts = append(p.tlsFronts, TLSFront{Address: address, Port: port, Front: front})
		i = len(p.tlsFronts) - 1
	}
	f := &p.tlsFronts[i]
	for _, h := range hosts {
		if i := slices.IndexFunc(f.Hosts, func(t TLSHost) bool { return t.Host == h }); i >= 0 {
			if f.Hosts[i].Route != to.Route {
				held = append(held, h)
			}
			continue
		}
		to.Host = h
		f.Hosts = append(f.Hosts, to)
	}
	return held
}

// quotedList is names quoted and joined by ", ", at most maxQuoted of them.
func quotedList(names []string) string {
	const maxQuoted = 8
	var b strings.Builder
	for i, n := range names {
		if i == maxQuoted {
			fmt.Fprintf(&b, " and %d more", len(names)-maxQuoted)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", n)
	}
	return b.String()
}

// terminateFiles returns the certificate and key files of a Terminate
// listener (recorded in p.files), or "" for another one.
func (p *gatewayProcessor) terminateFiles(l *listenerState) (string, string) {
	if !l.terminate {
		return "", ""
	}
	namespace, name, _ := strings.Cut(l.secret, "/")
	file := func(key, content string) string {
		f := AuthFile{Name: hashedFileName(namespace, name, key, []byte(content)), Content: content}
		if !slices.Contains(p.files, f) {
			p.files = append(p.files, f)
		}
		return f.Name
	}
	return file("tls.crt", l.certPEM), file("tls.key", l.keyPEM)
}

// finishTLS adds every served TLS listener's fronts (a front
// with no route closes every connection) and gives m's stream part the
// fronts and their backends, sorted.
func (p *gatewayProcessor) finishTLS(m *Model) {
	for _, g := range p.gateways {
		if !g.served() {
			continue
		}
		for _, l := range g.listeners {
			if l.stream() && l.programmed() {
				for _, a := range g.addresses {
					p.addTLSHosts(a, l.spec.Port, nil, TLSHost{})
				}
			}
		}
	}
	for i := range p.tlsFronts {
		slices.SortFunc(p.tlsFronts[i].Hosts, func(a, b TLSHost) int { return strings.Compare(a.Host, b.Host) })
	}
	slices.SortFunc(p.tlsFronts, func(a, b TLSFront) int {
		return cmp.Or(strings.Compare(a.Address, b.Address), cmp.Compare(a.Port, b.Port))
	})
	m.Stream.Gateways = p.tlsFronts
	for _, b := range p.streamBackends {
		if !slices.ContainsFunc(m.Stream.Backends, func(o StreamBackend) bool { return o.Name == b.Name }) {
			m.Stream.Backends = append(m.Stream.Backends, b)
		}
	}
	slices.SortFunc(m.Stream.Backends, func(a, b StreamBackend) int { return strings.Compare(a.Name, b.Name) })
	for _, f := range p.files {
		if !slices.Contains(m.AuthFiles, f) {
			m.AuthFiles = append(m.AuthFiles, f)
		}
	}
	slices.SortFunc(m.AuthFiles, func(a, b AuthFile) int { return strings.Compare(a.Name, b.Name) })
}
