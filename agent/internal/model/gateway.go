package model

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The Gateway API processor: GatewayClasses whose controllerName is ours,
// their Gateways (addresses, listeners, certificates), the HTTPRoutes that
// attach to them (httproute.go) and the routes those make, one per
// listener hostname (gatewayhosts.go). It writes into the same Builder as
// the Ingress processor: backends, certificates and problems are shared;
// its routes go to Model.GatewayRoutes whole, keyed by FrontKey, so Ingress
// and HTTPRoute never see each other's hosts.
//
// Why the routes are built here and not in render: the Gateway API's
// precedence runs across routes, rules and matches, and listener isolation
// across listeners; resolving both in the model leaves Lua a plain lookup
// (exact host, wildcard suffix, "_") and a first-match walk.

// GatewaySupportedFeatures are the Gateway API features restysync declares
// in its GatewayClasses' status.supportedFeatures: GATEWAY-HTTP core and
// the extended ones the router implements. The one list; sorted.
var GatewaySupportedFeatures = []string{
	"BackendTLSPolicy",
	"GRPCRoute",
	"GRPCRouteNamedRouteRule",
	"Gateway",
	"GatewayAddressEmpty",
	"GatewayBackendClientCertificate",
	"GatewayFrontendClientCertificateValidation",
	"GatewayFrontendClientCertificateValidationInsecureFallback",
	"GatewayHTTPListenerIsolation",
	"GatewayHTTPSListenerDetectMisdirectedRequests",
	"GatewayPort8080",
	"GatewayStaticAddresses",
	"HTTPRoute",
	"HTTPRoute303RedirectStatusCode",
	"HTTPRoute307RedirectStatusCode",
	"HTTPRoute308RedirectStatusCode",
	"HTTPRouteBackendProtocolWebSocket",
	"HTTPRouteBackendRequestHeaderModification",
	"HTTPRouteBackendTimeout",
	"HTTPRouteCORS",
	"HTTPRouteDestinationPortMatching",
	"HTTPRouteHostRewrite",
	"HTTPRouteMethodMatching",
	"HTTPRouteNamedRouteRule",
	"HTTPRouteParentRefPort",
	"HTTPRoutePathRedirect",
	"HTTPRoutePathRewrite",
	"HTTPRoutePortRedirect",
	"HTTPRouteQueryParamMatching",
	"HTTPRouteRequestMirror",
	"HTTPRouteRequestMultipleMirrors",
	"HTTPRouteRequestPercentageMirror",
	"HTTPRouteRequestTimeout",
	"HTTPRouteResponseHeaderModification",
	"HTTPRouteRetry",
	"HTTPRouteRetryBackendTimeout",
	"HTTPRouteRetryConnectionError",
	"HTTPRouteSchemeRedirect",
	"ListenerSet",
	"ReferenceGrant",
	"TLSRoute",
	"TLSRouteModeMixed",
	"TLSRouteModeTerminate",
}

// The condition types and reasons this file and httproute.go write, as the
// spec names them.
const (
	condAccepted         = "Accepted"
	condProgrammed       = "Programmed"
	condResolvedRefs     = "ResolvedRefs"
	condConflicted       = "Conflicted"
	condPartiallyInvalid = "PartiallyInvalid"

	reasonAccepted              = "Accepted"
	reasonProgrammed            = "Programmed"
	reasonResolvedRefs          = "ResolvedRefs"
	reasonInvalid               = "Invalid"
	reasonNoConflicts           = "NoConflicts"
	reasonListenersNotValid     = "ListenersNotValid"
	reasonUnsupportedAddress    = "UnsupportedAddress"
	reasonAddressNotUsable      = "AddressNotUsable"
	reasonAddressNotAssigned    = "AddressNotAssigned"
	reasonInvalidParameters     = "InvalidParameters"
	reasonUnsupportedProtocol   = "UnsupportedProtocol"
	reasonUnsupportedValue      = "UnsupportedValue"
	reasonInvalidRouteKinds     = "InvalidRouteKinds"
	reasonInvalidCertificateRef = "InvalidCertificateRef"
	reasonRefNotPermitted       = "RefNotPermitted"
	reasonHostnameConflict      = "HostnameConflict"
	reasonProtocolConflict      = "ProtocolConflict"
	reasonPortUnavailable       = "PortUnavailable"
)

// maxListeners bounds a Gateway's listeners, as the CRD does.
const maxListeners = 64

const (
	gatewayGroup    = gatewayv1.GroupName // "gateway.networking.k8s.io"
	kindHTTPRoute   = "HTTPRoute"
	kindGRPCRoute   = "GRPCRoute"
	kindTLSRoute    = "TLSRoute"
	kindGateway     = "Gateway"
	kindListenerSet = "ListenerSet"
)

// gatewayProcessor is the Gateway API processor. Its fields are its
// settings, from the Snapshot, and what it finds while it emits.
type gatewayProcessor struct {
	*Builder
	source Snapshot

	// gateways are ours, oldest first; byName finds them.
	gateways []*gatewayState
	byName   map[namespacedName]*gatewayState
	// listenerSets are those of our Gateways, in the spec's precedence;
	// setByName finds them (listenerset.go).
	listenerSets []*listenerSetState
	setByName    map[namespacedName]*listenerSetState
	// namespaceLabels by namespace name (allowedRoutes selectors).
	namespaceLabels map[string]map[string]string
	// attachments are what the routes attached to, for gatewayhosts.go.
	attachments []attachment
	// grpcRoutes are the HTTPRoutes grpcroute.go made of GRPCRoutes;
	// grpcFronts the fronts that serve GRPCRoutes only (Listener.GRPC).
	grpcRoutes map[*gatewayv1.HTTPRoute]bool
	grpcFronts map[string]bool
	// TLS to backends (backendtls.go): the policies by target, the
	// policies each route sends through and the BackendTLS the shares
	// use.
	tlsTargets    map[backendTLSTarget][]*backendTLSPolicy
	routePolicies map[*gatewayv1.HTTPRoute][]*backendTLSPolicy
	backendTLS    map[string]BackendTLS

	status GatewayAPIStatus
	// routeStatuses are the routes' statuses as they are made, the
	// status's Routes once sorted (FinishModel).
	routeStatuses []*RouteStatus
	listeners     []Listener
	routes        []*Route
	// tlsFronts and streamBackends are the TLSRoutes' (tlsroute.go), and
	// files the certificates of the Terminate listeners.
	tlsFronts      []TLSFront
	streamBackends map[string]StreamBackend
	files          []AuthFile
}

// gatewayState is one of our Gateways while it is processed.
type gatewayState struct {
	gw *gatewayv1.Gateway
	id string // "namespace/name"
	// addresses it is served on; served is false when it is not (not
	// accepted, or an address problem: programmed says why).
	addresses []string
	accepted  Condition
	// addressProblem is the Programmed condition's reason and message
	// when an address keeps the Gateway from being served.
	addressProblem *Condition
	// listeners are the Gateway's own, then those of its attached
	// ListenerSets (listenerset.go) in the spec's precedence.
	listeners []*listenerState
	// sets are the ListenerSets whose parentRef names the Gateway.
	sets []*listenerSetState
	// frontend is the client certificate validation of each HTTPS port
	// (gatewayfrontend.go).
	frontend map[gatewayv1.PortNumber]frontendCheck
	// backendCertRefs is the Gateway-level ResolvedRefs condition of its
	// client certificate to TLS backends, nil when it names none;
	// backendCert and backendKey are that certificate's files
	// (backendtls.go).
	backendCertRefs         *Condition
	backendCert, backendKey string
}

func (g *gatewayState) served() bool {
	return g.accepted.Status && g.addressProblem == nil && len(g.addresses) > 0
}

// listenerState is one listener of one of our Gateways.
type listenerState struct {
	// set is the ListenerSet the listener is one of; nil for the
	// Gateway's own.
	set      *listenerSetState
	spec     *gatewayv1.Listener
	hostname string // "" for none
	https    bool
	// passthrough: protocol TLS, mode Passthrough; terminate: protocol
	// TLS, mode Terminate. Either is served by the stream module, its
	// routes are TLSRoutes (tlsroute.go).
	passthrough, terminate bool
	kinds                  []string // supported route kinds

	accepted, resolved, conflicted Condition
	// secret is the certificate's Secret "namespace/name" of an HTTPS
	// listener whose certificateRefs resolved.
	secret   string
	attached int32
	// certPEM and keyPEM are the secret's, for a Terminate listener.
	certPEM, keyPEM string
	// clientTLS is how an HTTPS listener's port checks client
	// certificates (gatewayfrontend.go); nil: it does not.
	clientTLS *ClientTLS
}

// stream: the listener is served by the stream module (protocol TLS).
func (l *listenerState) stream() bool { return l.passthrough || l.terminate }

// endsTLS: the listener terminates TLS with its certificate.
func (l *listenerState) endsTLS() bool { return l.https || l.terminate }

// attachable: routes of kind may attach (and count in attachedRoutes).
func (l *listenerState) attachable(kind string) bool {
	return l.accepted.Status && !l.conflicted.Status && slices.Contains(l.kinds, kind)
}

// programmed: the listener serves its routes.
func (l *listenerState) programmed() bool {
	return l.accepted.Status && !l.conflicted.Status && len(l.kinds) > 0 && (!l.endsTLS() || l.secret != "")
}

func newGatewayProcessor(s Snapshot) *gatewayProcessor {
	p := &gatewayProcessor{
		source:          s,
		byName:          make(map[namespacedName]*gatewayState),
		setByName:       make(map[namespacedName]*listenerSetState),
		namespaceLabels: make(map[string]map[string]string, s.Namespaces.Len()),
		grpcRoutes:      make(map[*gatewayv1.HTTPRoute]bool),
		grpcFronts:      make(map[string]bool),
		routePolicies:   make(map[*gatewayv1.HTTPRoute][]*backendTLSPolicy),
		backendTLS:      make(map[string]BackendTLS),
	}
	for ns := range s.Namespaces.All() {
		p.namespaceLabels[ns.Name] = ns.Labels
	}
	return p
}

// Process reads our GatewayClasses, their Gateways and the HTTPRoutes
// that name them, and emits listeners, certificates, backends and routes.
func (p *gatewayProcessor) Process(shared *Builder) {
	p.Builder = shared
	classes := p.processClasses()
	p.collectGateways(classes)
	p.assignAddresses()
	for _, g := range p.gateways {
		p.checkBackendClientCertificate(g)
		p.processListeners(g)
	}
	p.processListenerSets()
	p.processBackendTLSPolicies()
	p.processRoutes()
	p.processTLSRoutes()
	p.emitRoutes()
	statuses := make(map[*gatewayState]GatewayStatus, len(p.gateways))
	for _, g := range p.gateways {
		statuses[g] = p.gatewayStatus(g)
		p.status.Gateways = append(p.status.Gateways, statuses[g])
	}
	p.gatewayServices(statuses)
	for _, s := range p.listenerSets {
		p.status.ListenerSets = append(p.status.ListenerSets, p.listenerSetStatus(s))
	}
	p.routeStatuses = append(p.routeStatuses, p.backendTLSStatus()...)
}

// FinishRoute is never called: the processor emits no Location.
func (p *gatewayProcessor) FinishRoute(loc Location, _ string, _ bool) Location { return loc }

// FinishModel gives m the listeners, routes and status.
func (p *gatewayProcessor) FinishModel(m *Model) {
	slices.SortFunc(p.listeners, func(a, b Listener) int {
		return cmp.Or(strings.Compare(a.Address, b.Address), cmp.Compare(a.Port, b.Port))
	})
	m.Listeners = slices.CompactFunc(p.listeners, func(a, b Listener) bool { return a.Front == b.Front })
	for i := range m.Listeners {
		m.Listeners[i].GRPC = p.grpcFronts[m.Listeners[i].Front]
	}
	slices.SortFunc(p.routes, func(a, b *Route) int { return strings.Compare(a.Host, b.Host) })
	m.GatewayRoutes = ListOf(p.routes...)
	for _, t := range p.backendTLS {
		m.BackendTLS = append(m.BackendTLS, t)
	}
	slices.SortFunc(m.BackendTLS, func(a, b BackendTLS) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(p.status.Classes, func(a, b GatewayClassStatus) int { return strings.Compare(a.Name, b.Name) })
	for _, list := range [][]GatewayStatus{p.status.Gateways, p.status.ListenerSets} {
		slices.SortFunc(list, func(a, b GatewayStatus) int {
			return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
		})
	}
	slices.SortFunc(p.status.Services, func(a, b GatewayService) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	slices.SortFunc(p.routeStatuses, func(a, b *RouteStatus) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name), strings.Compare(a.Kind, b.Kind))
	})
	p.status.Routes = ListOf(p.routeStatuses...)
	m.GatewayAPI = p.status
	p.finishTLS(m)
}

// servedFeatures are GatewaySupportedFeatures less those of the kinds the
// API server does not serve: a feature belongs to the kind its name begins
// with, and a Gateway's client certificate to backends goes with
// BackendTLSPolicy, the only way to ask for TLS to a backend.
func servedFeatures(notServed []string) []string {
	features := slices.Clone(GatewaySupportedFeatures)
	for _, kind := range notServed {
		features = slices.DeleteFunc(features, func(feature string) bool {
			return strings.HasPrefix(feature, kind) || (kind == "BackendTLSPolicy" && feature == "GatewayBackendClientCertificate")
		})
	}
	return features
}

func condition(typ string, ok bool, reason, message string) Condition {
	return Condition{Type: typ, Status: ok, Reason: reason, Message: clipReason(message)}
}

// processClasses accepts our GatewayClasses and returns their names.
func (p *gatewayProcessor) processClasses() map[string]bool {
	ours := make(map[string]bool)
	for c := range p.source.GatewayClasses.All() {
		if p.source.GatewayController == "" || string(c.Spec.ControllerName) != p.source.GatewayController {
			continue
		}
		ours[c.Name] = true
		st := GatewayClassStatus{Name: c.Name, Generation: c.Generation, SupportedFeatures: servedFeatures(p.source.GatewayKindsNotServed)}
		if p.source.GatewayServices {
			st.SupportedFeatures = append(st.SupportedFeatures, FeatureGatewayInfrastructure)
			slices.Sort(st.SupportedFeatures)
		}
		if c.Spec.ParametersRef != nil {
			msg := "spec.parametersRef: restysync takes no parameters; the class is not accepted"
			p.problem("GatewayClass", "", c.Name, msg)
			st.Conditions = []Condition{condition(condAccepted, false, reasonInvalidParameters, msg)}
			ours[c.Name] = false
		} else {
			st.Conditions = []Condition{condition(condAccepted, true, reasonAccepted, "served by restysync")}
		}
		p.status.Classes = append(p.status.Classes, st)
	}
	return ours
}

// collectGateways takes the Gateways of our accepted classes, oldest
// first, then by namespace/name.
func (p *gatewayProcessor) collectGateways(classes map[string]bool) {
	var ours []*gatewayv1.Gateway
	for gw := range p.source.Gateways.All() {
		if !classes[string(gw.Spec.GatewayClassName)] {
			continue
		}
		if len(validation.IsDNS1123Label(gw.Namespace)) > 0 || len(validation.IsDNS1123Subdomain(gw.Name)) > 0 {
			p.problem("Gateway", gw.Namespace, gw.Name, fmt.Sprintf("metadata: namespace %q or name %q is not a Kubernetes name; the Gateway is left out", clip(gw.Namespace), clip(gw.Name)))
			continue
		}
		ours = append(ours, gw)
	}
	slices.SortFunc(ours, compareObjects[*gatewayv1.Gateway])
	for _, gw := range ours {
		g := &gatewayState{gw: gw, id: gw.Namespace + "/" + gw.Name}
		p.gateways = append(p.gateways, g)
		p.byName[namespacedName{gw.Namespace, gw.Name}] = g
	}
}

// object is what compareObjects reads.
type object interface {
	GetCreationTimestamp() metav1.Time
	GetNamespace() string
	GetName() string
}

// compareObjects orders oldest first, then by namespace and name.
func compareObjects[T object](a, b T) int {
	at, bt := a.GetCreationTimestamp(), b.GetCreationTimestamp()
	return cmp.Or(at.Compare(bt.Time), strings.Compare(a.GetNamespace(), b.GetNamespace()), strings.Compare(a.GetName(), b.GetName()))
}

func (p *gatewayProcessor) gatewayProblem(g *gatewayState, reason string) {
	p.problem("Gateway", g.gw.Namespace, g.gw.Name, reason)
}

// assignAddresses gives each Gateway its addresses: its static ones
// (spec.addresses of type IPAddress with a value), which must be in the
// pool and held by no older Gateway; else one from the pool. A Gateway
// keeps the pool address the last build served it on
// (Snapshot.GatewayAddressesServed), or else its status shows, while no
// older Gateway takes it (statically or kept), so addresses do not move when Gateways come and
// go, and a tenant's new Gateway cannot ask for another's address; new ones take free addresses in the pool's order, oldest Gateway
// first.
func (p *gatewayProcessor) assignAddresses() {
	pool := make(map[string]bool, len(p.source.GatewayAddresses))
	var order []string
	for _, a := range p.source.GatewayAddresses {
		if addr, err := netip.ParseAddr(a); err == nil && !pool[addr.String()] {
			pool[addr.String()] = true
			order = append(order, addr.String())
		}
	}
	held := make(map[string]string) // address → Gateway id
	var unassigned []*gatewayState
	for _, g := range p.gateways {
		g.accepted = condition(condAccepted, true, reasonAccepted, "")
		if infra := g.gw.Spec.Infrastructure; infra != nil && infra.ParametersRef != nil {
			ref := infra.ParametersRef
			msg := fmt.Sprintf("spec.infrastructure.parametersRef: %s/%s %q: restysync takes no parameters", clip(string(ref.Group)), clip(string(ref.Kind)), clip(ref.Name))
			p.gatewayProblem(g, msg+"; the Gateway is not accepted")
			g.accepted = condition(condAccepted, false, reasonInvalidParameters, msg)
			continue
		}
		static, wantsPool, ok := p.staticAddresses(g, pool, held)
		if !ok {
			continue
		}
		g.addresses = static
		if !wantsPool {
			continue
		}
		// In the same pass, oldest first: a newer Gateway's static address
		// never takes the one an older Gateway is served on.
		if a := cmp.Or(freeAddress(p.source.GatewayAddressesServed[g.id], pool, held), previousAddress(g.gw, pool, held)); a != "" {
			held[a] = g.id
			g.addresses = []string{a}
			continue
		}
		unassigned = append(unassigned, g)
	}
	for _, g := range unassigned {
		for _, a := range order {
			if _, taken := held[a]; !taken {
				held[a] = g.id
				g.addresses = []string{a}
				break
			}
		}
		if len(g.addresses) == 0 {
			msg := fmt.Sprintf("no free address in the pool (--gateway-addresses, %d addresses, all held by older Gateways)", len(order))
			p.gatewayProblem(g, msg+"; the Gateway is not served")
			c := condition(condProgrammed, false, reasonAddressNotAssigned, msg)
			g.addressProblem = &c
		}
	}
}

// staticAddresses checks g's spec.addresses: it returns the static ones
// g may use (and claims them in held), and whether g wants one from the
// pool (no spec.addresses, or an IPAddress without a value). ok is false
// when g is not accepted (an address type other than IPAddress).
func (p *gatewayProcessor) staticAddresses(g *gatewayState, pool map[string]bool, held map[string]string) (static []string, wantsPool, ok bool) {
	if len(g.gw.Spec.Addresses) == 0 {
		return nil, true, true
	}
	var unusable []string
	for i, a := range g.gw.Spec.Addresses {
		if a.Type != nil && *a.Type != gatewayv1.IPAddressType {
			msg := fmt.Sprintf("spec.addresses[%d]: type %q is not supported; only IPAddress is", i, clip(string(*a.Type)))
			p.gatewayProblem(g, msg+"; the Gateway is not accepted")
			g.accepted = condition(condAccepted, false, reasonUnsupportedAddress, msg)
			return nil, false, false
		}
		if a.Value == "" {
			wantsPool = true
			continue
		}
		addr, err := netip.ParseAddr(a.Value)
		switch {
		case err != nil:
			unusable = append(unusable, fmt.Sprintf("spec.addresses[%d] %q: is not an IP address", i, clip(a.Value)))
		case !pool[addr.String()]:
			unusable = append(unusable, fmt.Sprintf("spec.addresses[%d] %q: is not one of the addresses restysync serves (--gateway-addresses)", i, a.Value))
		case held[addr.String()] != "" && held[addr.String()] != g.id:
			unusable = append(unusable, fmt.Sprintf("spec.addresses[%d] %q: is already used by Gateway %s", i, a.Value, held[addr.String()]))
		default:
			if !slices.Contains(static, addr.String()) {
				held[addr.String()] = g.id
				static = append(static, addr.String())
			}
		}
	}
	if len(unusable) > 0 {
		msg := strings.Join(unusable, "; ")
		p.gatewayProblem(g, msg+"; the Gateway is not served")
		c := condition(condProgrammed, false, reasonAddressNotUsable, msg)
		g.addressProblem = &c
		return static, false, true
	}
	return static, wantsPool && len(static) == 0, true
}

// previousAddress is the pool address g's status shows, when it is in the
// pool and free.
func previousAddress(gw *gatewayv1.Gateway, pool map[string]bool, held map[string]string) string {
	var shown []string
	for _, a := range gw.Status.Addresses {
		if a.Type == nil || *a.Type == gatewayv1.IPAddressType {
			shown = append(shown, a.Value)
		}
	}
	return freeAddress(shown, pool, held)
}

// freeAddress returns the first of addresses that is in the pool and not
// held, or "".
func freeAddress(addresses []string, pool map[string]bool, held map[string]string) string {
	for _, a := range addresses {
		addr, err := netip.ParseAddr(a)
		if err != nil || !pool[addr.String()] {
			continue
		}
		if _, taken := held[addr.String()]; !taken {
			return addr.String()
		}
	}
	return ""
}

// processListeners checks each listener of g: protocol, hostname, route
// kinds, TLS certificate, and conflicts between listeners of one port.
func (p *gatewayProcessor) processListeners(g *gatewayState) {
	if n := len(g.gw.Spec.Listeners); n > maxListeners {
		msg := fmt.Sprintf("spec.listeners: has %d listeners, more than %d", n, maxListeners)
		p.gatewayProblem(g, msg+"; the Gateway is not accepted")
		g.accepted = condition(condAccepted, false, reasonInvalid, msg)
		return
	}
	for i := range g.gw.Spec.Listeners {
		g.listeners = append(g.listeners, p.checkListener(g, nil, &g.gw.Spec.Listeners[i], fmt.Sprintf("spec.listeners[%d]", i)))
	}
	p.markConflicts(g)
	if !g.accepted.Status {
		return
	}
	valid, invalid := 0, 0
	for _, l := range g.listeners {
		if l.accepted.Status && !l.conflicted.Status {
			valid++
		} else {
			invalid++
		}
	}
	switch {
	case valid == 0:
		g.accepted = condition(condAccepted, false, reasonListenersNotValid, "no listener is valid")
	case invalid > 0:
		g.accepted = condition(condAccepted, true, reasonListenersNotValid, fmt.Sprintf("%d of %d listeners are not valid", invalid, len(g.listeners)))
	}
	p.serveListeners(g, g.listeners)
}

// serveListeners emits the fronts and certificates of the listeners of g
// that are programmed, when g is served.
func (p *gatewayProcessor) serveListeners(g *gatewayState, listeners []*listenerState) {
	if !g.served() {
		return
	}
	for _, l := range listeners {
		if !l.programmed() || l.stream() {
			continue
		}
		for _, a := range g.addresses {
			front := FrontName(a, l.spec.Port)
			p.listeners = append(p.listeners, Listener{Address: a, Port: l.spec.Port, HTTPS: l.https, Front: front, ClientTLS: l.clientTLS,
				BackendCertFile: g.backendCert, BackendKeyFile: g.backendKey})
			if l.https {
				p.certHosts[l.secret] = append(p.certHosts[l.secret], FrontKey(front, cmp.Or(l.hostname, DefaultCertificateHost)))
			}
		}
	}
}

// listenerProblem is a Problem on the object that holds listener l of g:
// g, or l's ListenerSet.
func (p *gatewayProcessor) listenerProblem(g *gatewayState, l *listenerState, reason string) {
	if l.set != nil {
		p.problem(kindListenerSet, l.set.ls.Namespace, l.set.ls.Name, reason)
		return
	}
	p.gatewayProblem(g, reason)
}

// namespace is the namespace of the object that holds listener l of g:
// the one its routes' "Same" and its certificateRefs' default mean.
func (l *listenerState) namespace(g *gatewayState) string {
	if l.set != nil {
		return l.set.ls.Namespace
	}
	return g.gw.Namespace
}

// checkListener checks one listener on its own: spec is of g, or of set
// (nil for g's own), at field.
func (p *gatewayProcessor) checkListener(g *gatewayState, set *listenerSetState, spec *gatewayv1.Listener, field string) *listenerState {
	l := &listenerState{
		set:        set,
		spec:       spec,
		kinds:      []string{},
		accepted:   condition(condAccepted, true, reasonAccepted, ""),
		resolved:   condition(condResolvedRefs, true, reasonResolvedRefs, ""),
		conflicted: condition(condConflicted, false, reasonNoConflicts, ""),
	}
	notAccepted := func(reason, msg string) *listenerState {
		p.listenerProblem(g, l, fmt.Sprintf("%s (%q): %s; the listener is not served", field, clip(string(spec.Name)), msg))
		l.accepted = condition(condAccepted, false, reason, msg)
		return l
	}
	switch spec.Protocol {
	case gatewayv1.HTTPProtocolType:
	case gatewayv1.HTTPSProtocolType:
		l.https = true
	case gatewayv1.TLSProtocolType:
		l.passthrough = spec.TLS != nil && spec.TLS.Mode != nil && *spec.TLS.Mode == gatewayv1.TLSModePassthrough
		l.terminate = !l.passthrough
	default:
		return notAccepted(reasonUnsupportedProtocol, fmt.Sprintf("protocol %q is not supported; HTTP, HTTPS and TLS are", clip(string(spec.Protocol))))
	}
	if spec.Port < 1 || spec.Port > 65535 {
		return notAccepted(reasonUnsupportedValue, fmt.Sprintf("port %d is not a port number", spec.Port))
	}
	for _, a := range g.addresses {
		if msg := p.source.IngressPorts.heldBy(l, a, p.source.Targets.PodPorts); msg != "" {
			return notAccepted(reasonPortUnavailable, msg)
		}
	}
	if spec.Hostname != nil && *spec.Hostname != "" {
		if reason := validHost(string(*spec.Hostname)); reason != "" {
			return notAccepted(reasonUnsupportedValue, fmt.Sprintf("hostname %q: %s", clip(string(*spec.Hostname)), reason))
		}
		l.hostname = string(*spec.Hostname)
	}
	p.checkKinds(g, l, field)
	if l.endsTLS() {
		p.checkCertificate(g, l, field)
		p.applyFrontend(g, l)
	}
	return l
}

// checkKinds sets the listener's supported kinds from allowedRoutes.kinds
// (all the listener supports when none are given: HTTPRoute and GRPCRoute,
// TLSRoute on a TLS listener); any other kind makes ResolvedRefs
// false with InvalidRouteKinds.
func (p *gatewayProcessor) checkKinds(g *gatewayState, l *listenerState, field string) {
	supported, names := []string{kindHTTPRoute, kindGRPCRoute}, "HTTPRoute and GRPCRoute are"
	if l.stream() {
		supported, names = []string{kindTLSRoute}, "TLSRoute is"
	}
	if l.spec.AllowedRoutes == nil || len(l.spec.AllowedRoutes.Kinds) == 0 {
		l.kinds = slices.Clone(supported)
		return
	}
	var invalid []string
	for _, k := range l.spec.AllowedRoutes.Kinds {
		group := gatewayGroup
		if k.Group != nil {
			group = string(*k.Group)
		}
		if group == gatewayGroup && slices.Contains(supported, string(k.Kind)) {
			if !slices.Contains(l.kinds, string(k.Kind)) {
				l.kinds = append(l.kinds, string(k.Kind))
			}
			continue
		}
		invalid = append(invalid, fmt.Sprintf("%s/%s", clip(group), clip(string(k.Kind))))
	}
	if len(invalid) > 0 {
		msg := fmt.Sprintf("allowedRoutes.kinds: %s not supported; %s", strings.Join(invalid, ", "), names)
		p.listenerProblem(g, l, fmt.Sprintf("%s (%q): %s", field, clip(string(l.spec.Name)), msg))
		l.resolved = condition(condResolvedRefs, false, reasonInvalidRouteKinds, msg)
	}
}

// checkCertificate resolves an HTTPS listener's tls.certificateRefs: each
// must be a core Secret, in the namespace of the listener's Gateway (or
// ListenerSet) or granted to it by a ReferenceGrant (a grant to the
// Gateway is not one to its ListenerSets, nor the reverse), of type
// kubernetes.io/tls with a usable pair. The first is served; any bad one
// makes ResolvedRefs false and the listener is not served.
func (p *gatewayProcessor) checkCertificate(g *gatewayState, l *listenerState, field string) {
	owner, ownerKind := l.namespace(g), kindGateway
	if l.set != nil {
		ownerKind = kindListenerSet
	}
	unresolved := func(reason, msg string) {
		p.listenerProblem(g, l, fmt.Sprintf("%s (%q): %s; the listener is not served", field, clip(string(l.spec.Name)), msg))
		l.resolved = condition(condResolvedRefs, false, reason, msg)
		l.secret = ""
	}
	tls := l.spec.TLS
	if tls != nil && tls.Mode != nil && *tls.Mode != gatewayv1.TLSModeTerminate {
		msg := fmt.Sprintf("tls.mode %q: only Terminate is supported on %s", clip(string(*tls.Mode)), l.spec.Protocol)
		p.listenerProblem(g, l, fmt.Sprintf("%s (%q): %s; the listener is not served", field, clip(string(l.spec.Name)), msg))
		l.accepted = condition(condAccepted, false, reasonUnsupportedValue, msg)
		return
	}
	if tls == nil || len(tls.CertificateRefs) == 0 {
		unresolved(reasonInvalidCertificateRef, "tls.certificateRefs: a listener that terminates TLS needs a certificate")
		return
	}
	for i, ref := range tls.CertificateRefs {
		refField := fmt.Sprintf("tls.certificateRefs[%d]", i)
		group, kind := "", "Secret"
		if ref.Group != nil {
			group = string(*ref.Group)
		}
		if ref.Kind != nil {
			kind = string(*ref.Kind)
		}
		namespace := owner
		if ref.Namespace != nil && *ref.Namespace != "" {
			namespace = string(*ref.Namespace)
		}
		switch {
		case group != "" || kind != "Secret":
			unresolved(reasonInvalidCertificateRef, fmt.Sprintf("%s: %s/%s is not a Secret", refField, clip(group), clip(kind)))
			return
		case len(validation.IsDNS1123Subdomain(string(ref.Name))) > 0 || len(validation.IsDNS1123Label(namespace)) > 0:
			unresolved(reasonInvalidCertificateRef, fmt.Sprintf("%s: %q in namespace %q is not a Secret name", refField, clip(string(ref.Name)), clip(namespace)))
			return
		case namespace != owner && !p.granted(gatewayGroup, ownerKind, owner, "", "Secret", namespace, string(ref.Name)):
			unresolved(reasonRefNotPermitted, fmt.Sprintf("%s: Secret %s/%s is in another namespace and no ReferenceGrant there allows it", refField, namespace, ref.Name))
			return
		}
		secret := p.checkSecret(namespace, string(ref.Name))
		switch {
		case secret.unusable != "":
			unresolved(reasonInvalidCertificateRef, refField+": "+secret.unusable)
			return
		case secret.cert.Invalid != "":
			unresolved(reasonInvalidCertificateRef, fmt.Sprintf("%s: Secret %s %s", refField, secret.cert.Name, secret.cert.Invalid))
			return
		}
		if l.secret == "" {
			l.secret, l.certPEM, l.keyPEM = secret.cert.Name, secret.cert.CertPEM, secret.cert.KeyPEM
		}
	}
}

// granted says whether a ReferenceGrant in toNamespace lets objects of
// fromGroup/fromKind in fromNamespace refer to toGroup/toKind name there.
func (p *gatewayProcessor) granted(fromGroup, fromKind, fromNamespace, toGroup, toKind, toNamespace, name string) bool {
	for grant := range p.source.ReferenceGrants.All() {
		if grant.Namespace != toNamespace {
			continue
		}
		from := slices.ContainsFunc(grant.Spec.From, func(f gatewayv1.ReferenceGrantFrom) bool {
			return string(f.Group) == fromGroup && string(f.Kind) == fromKind && string(f.Namespace) == fromNamespace
		})
		to := slices.ContainsFunc(grant.Spec.To, func(t gatewayv1.ReferenceGrantTo) bool {
			return string(t.Group) == toGroup && string(t.Kind) == toKind && (t.Name == nil || *t.Name == "" || string(*t.Name) == name)
		})
		if from && to {
			return true
		}
	}
	return false
}

// markConflicts marks the listeners of g that share a port with another
// of another protocol (ProtocolConflict), or of the same protocol and
// hostname (HostnameConflict). Conflicted listeners are not served.
func (p *gatewayProcessor) markConflicts(g *gatewayState) {
	for i, l := range g.listeners {
		if !l.accepted.Status {
			continue
		}
		for j, o := range g.listeners {
			if i == j || !o.accepted.Status || o.spec.Port != l.spec.Port {
				continue
			}
			var reason, msg string
			switch {
			case o.spec.Protocol != l.spec.Protocol:
				reason, msg = reasonProtocolConflict, fmt.Sprintf("port %d is also listener %q's, with protocol %s", l.spec.Port, clip(string(o.spec.Name)), o.spec.Protocol)
			case o.hostname == l.hostname:
				reason, msg = reasonHostnameConflict, fmt.Sprintf("port %d and hostname %q are also listener %q's", l.spec.Port, l.hostname, clip(string(o.spec.Name)))
			default:
				continue
			}
			p.gatewayProblem(g, fmt.Sprintf("spec.listeners[%d] (%q): %s; the listener is not served", i, clip(string(l.spec.Name)), msg))
			l.conflicted = condition(condConflicted, true, reason, msg)
			break
		}
	}
}

// gatewayStatus is g's status as Build found it.
func (p *gatewayProcessor) gatewayStatus(g *gatewayState) GatewayStatus {
	st := GatewayStatus{Namespace: g.gw.Namespace, Name: g.gw.Name, Generation: g.gw.Generation, Conditions: []Condition{g.accepted}}
	if c := gatewayResolvedRefs(g); c != nil {
		st.Conditions = append(st.Conditions, *c)
	}
	if g.addressProblem == nil || g.addressProblem.Reason != reasonAddressNotAssigned {
		st.Addresses = slices.Clone(g.addresses)
	}
	anyProgrammed := false
	for _, l := range g.listeners {
		if l.set != nil {
			continue // in its ListenerSet's status
		}
		ls, programmed := listenerStatus(g, l)
		anyProgrammed = anyProgrammed || programmed
		st.Listeners = append(st.Listeners, ls)
	}
	if g.gw.Spec.AllowedListeners != nil {
		var attached int32
		for _, s := range g.sets {
			if s.accepted.Status {
				attached++
			}
		}
		st.AttachedListenerSets = &attached
	}
	switch {
	case !g.accepted.Status:
		st.Conditions = append(st.Conditions, condition(condProgrammed, false, reasonInvalid, "the Gateway is not accepted"))
	case g.addressProblem != nil:
		st.Conditions = append(st.Conditions, *g.addressProblem)
	case !anyProgrammed:
		st.Conditions = append(st.Conditions, condition(condProgrammed, false, reasonInvalid, "no listener is served"))
	default:
		st.Conditions = append(st.Conditions, condition(condProgrammed, true, reasonProgrammed, ""))
	}
	if c := insecureFrontendCondition(g.gw); c != nil {
		st.Conditions = append(st.Conditions, *c)
	}
	return st
}

// gatewayResolvedRefs is g's Gateway-level ResolvedRefs condition, one
// for the references of its spec.tls: the backend client certificate
// (backendtls.go) and the frontend CA certificates (gatewayfrontend.go);
// nil when it names neither. The first False wins: the client
// certificate's own reason, then ListenersNotResolved with the first port
// whose CA references did not all resolve (the spec's summary of the
// listeners' ResolvedRefs, which say why).
func gatewayResolvedRefs(g *gatewayState) *Condition {
	if g.backendCertRefs != nil && !g.backendCertRefs.Status {
		return g.backendCertRefs
	}
	ports := slices.Sorted(maps.Keys(g.frontend))
	for _, port := range ports {
		if bad := g.frontend[port].resolved; bad != nil {
			c := condition(condResolvedRefs, false, reasonListenersNotResolved, fmt.Sprintf("the HTTPS listeners on port %d: %s", port, bad.Message))
			return &c
		}
	}
	if g.backendCertRefs == nil && (g.gw.Spec.TLS == nil || g.gw.Spec.TLS.Frontend == nil) {
		return nil
	}
	c := condition(condResolvedRefs, true, reasonResolvedRefs, "")
	return &c
}

// listenerStatus is the status of listener l of g, and whether it is
// programmed.
func listenerStatus(g *gatewayState, l *listenerState) (ListenerStatus, bool) {
	ls := ListenerStatus{Name: string(l.spec.Name), SupportedKinds: l.kinds, AttachedRoutes: l.attached}
	programmed := condition(condProgrammed, true, reasonProgrammed, "")
	switch {
	case l.set != nil && l.conflicted.Status:
		programmed = condition(condProgrammed, false, l.conflicted.Reason, l.conflicted.Message)
	case !l.programmed():
		programmed = condition(condProgrammed, false, reasonInvalid, "the listener is not valid")
	case !g.served():
		programmed = condition(condProgrammed, false, reasonInvalid, "the Gateway is not served")
	}
	ls.Conditions = []Condition{l.accepted, l.resolved, programmed, l.conflicted}
	return ls, programmed.Status
}

// namespaceLabelsOf returns the labels of namespace, with
// kubernetes.io/metadata.name as the API server sets it when the
// Namespace is not in the Snapshot.
func (p *gatewayProcessor) namespaceLabelsOf(namespace string) map[string]string {
	labels, ok := p.namespaceLabels[namespace]
	if ok && labels[corev1.LabelMetadataName] == namespace {
		return labels
	}
	out := make(map[string]string, len(labels)+1)
	for k, v := range labels {
		out[k] = v
	}
	out[corev1.LabelMetadataName] = namespace
	return out
}
