package model

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Small constructors for the Gateway API objects Build reads. Every
// Gateway is of class gwClass in namespace "infra", created at baseTime
// unless the test says otherwise; the pool has three addresses.

const gwClass = "restysync"

var gwPool = []string{"127.0.50.1", "127.0.50.2", "127.0.50.3"}

// gwSnapshot is a Snapshot with our GatewayClass, the pool, the web
// Service and the given objects.
func gwSnapshot(objects ...any) Snapshot {
	s := snapshotOf()
	s.GatewayController = GatewayControllerName
	s.GatewayAddresses = gwPool
	s.GatewayClasses = ListOf(gatewayClass(gwClass, GatewayControllerName))
	for _, o := range objects {
		added := appendIf(&s.Gateways, o) || appendIf(&s.HTTPRoutes, o) || appendIf(&s.GRPCRoutes, o) || appendIf(&s.TLSRoutes, o) || appendIf(&s.ReferenceGrants, o) || appendIf(&s.ListenerSets, o) ||
			appendIf(&s.GatewayClasses, o) || appendIf(&s.Secrets, o) || appendIf(&s.Services, o) || appendIf(&s.Namespaces, o) ||
			appendIf(&s.BackendTLSPolicies, o) || appendIf(&s.ConfigMaps, o)
		if !added {
			panic("gwSnapshot: unknown object")
		}
	}
	return s
}

// appendIf appends o to list when it is a T.
func appendIf[T any](list *List[T], o any) bool {
	v, ok := o.(T)
	if ok {
		*list = ListOf(append(list.Slice(), v)...)
	}
	return ok
}

func gatewayClass(name, controller string) *gatewayv1.GatewayClass {
	return &gatewayv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1},
		Spec:       gatewayv1.GatewayClassSpec{ControllerName: gatewayv1.GatewayController(controller)},
	}
}

func newGateway(namespace, name string, listeners ...gatewayv1.Listener) *gatewayv1.Gateway {
	return &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Generation: 1, CreationTimestamp: metav1.NewTime(baseTime)},
		Spec:       gatewayv1.GatewaySpec{GatewayClassName: gwClass, Listeners: listeners},
	}
}

// olderBy sets o's creation time to baseTime plus minutes.
func olderBy[T interface{ SetCreationTimestamp(metav1.Time) }](o T, minutes int) T {
	o.SetCreationTimestamp(metav1.NewTime(baseTime.Add(time.Duration(minutes) * time.Minute)))
	return o
}

func httpListener(name string, port int32, hostname string) gatewayv1.Listener {
	l := gatewayv1.Listener{Name: gatewayv1.SectionName(name), Port: port, Protocol: gatewayv1.HTTPProtocolType}
	if hostname != "" {
		h := gatewayv1.Hostname(hostname)
		l.Hostname = &h
	}
	return l
}

func httpsListener(name string, port int32, hostname string, secrets ...gatewayv1.SecretObjectReference) gatewayv1.Listener {
	l := httpListener(name, port, hostname)
	l.Protocol = gatewayv1.HTTPSProtocolType
	l.TLS = &gatewayv1.ListenerTLSConfig{CertificateRefs: secrets}
	return l
}

func secretRef(namespace, name string) gatewayv1.SecretObjectReference {
	r := gatewayv1.SecretObjectReference{Name: gatewayv1.ObjectName(name)}
	if namespace != "" {
		ns := gatewayv1.Namespace(namespace)
		r.Namespace = &ns
	}
	return r
}

// allowFrom sets the listener's allowedRoutes.namespaces.from.
func allowFrom(l gatewayv1.Listener, from gatewayv1.FromNamespaces, selector map[string]string) gatewayv1.Listener {
	l.AllowedRoutes = &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: &from}}
	if selector != nil {
		l.AllowedRoutes.Namespaces.Selector = &metav1.LabelSelector{MatchLabels: selector}
	}
	return l
}

func newRoute(namespace, name string, parents []gatewayv1.ParentReference, hostnames []string, rules ...gatewayv1.HTTPRouteRule) *gatewayv1.HTTPRoute {
	r := &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Generation: 1, CreationTimestamp: metav1.NewTime(baseTime)},
		Spec:       gatewayv1.HTTPRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: parents}, Rules: rules},
	}
	for _, h := range hostnames {
		r.Spec.Hostnames = append(r.Spec.Hostnames, gatewayv1.Hostname(h))
	}
	return r
}

// parentOf refers to Gateway namespace/name, with an optional section.
func parentOf(namespace, name, section string) gatewayv1.ParentReference {
	p := gatewayv1.ParentReference{Name: gatewayv1.ObjectName(name)}
	if namespace != "" {
		ns := gatewayv1.Namespace(namespace)
		p.Namespace = &ns
	}
	if section != "" {
		s := gatewayv1.SectionName(section)
		p.SectionName = &s
	}
	return p
}

func parentList(p ...gatewayv1.ParentReference) []gatewayv1.ParentReference { return p }

func backendTo(namespace, service string, port int32) gatewayv1.HTTPBackendRef {
	b := gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
		Name: gatewayv1.ObjectName(service), Port: &port}}}
	if namespace != "" {
		ns := gatewayv1.Namespace(namespace)
		b.Namespace = &ns
	}
	return b
}

func weighted(b gatewayv1.HTTPBackendRef, weight int32) gatewayv1.HTTPBackendRef {
	b.Weight = &weight
	return b
}

func routeRule(matches []gatewayv1.HTTPRouteMatch, backends ...gatewayv1.HTTPBackendRef) gatewayv1.HTTPRouteRule {
	return gatewayv1.HTTPRouteRule{Matches: matches, BackendRefs: backends}
}

func pathMatch(t gatewayv1.PathMatchType, value string) gatewayv1.HTTPRouteMatch {
	return gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Type: &t, Value: &value}}
}

func matchList(m ...gatewayv1.HTTPRouteMatch) []gatewayv1.HTTPRouteMatch { return m }

func withHeader(m gatewayv1.HTTPRouteMatch, name, value string) gatewayv1.HTTPRouteMatch {
	m.Headers = append(m.Headers, gatewayv1.HTTPHeaderMatch{Name: gatewayv1.HTTPHeaderName(name), Value: value})
	return m
}

func withMethod(m gatewayv1.HTTPRouteMatch, method string) gatewayv1.HTTPRouteMatch {
	mm := gatewayv1.HTTPMethod(method)
	m.Method = &mm
	return m
}

func withQuery(m gatewayv1.HTTPRouteMatch, name, value string) gatewayv1.HTTPRouteMatch {
	m.QueryParams = append(m.QueryParams, gatewayv1.HTTPQueryParamMatch{Name: gatewayv1.HTTPHeaderName(name), Value: value})
	return m
}

func referenceGrant(namespace, fromKind, fromNamespace, toKind, toName string) *gatewayv1.ReferenceGrant {
	g := &gatewayv1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "grant-" + fromNamespace},
		Spec: gatewayv1.ReferenceGrantSpec{
			From: []gatewayv1.ReferenceGrantFrom{{Group: gatewayGroup, Kind: gatewayv1.Kind(fromKind), Namespace: gatewayv1.Namespace(fromNamespace)}},
			To:   []gatewayv1.ReferenceGrantTo{{Group: "", Kind: gatewayv1.Kind(toKind)}},
		},
	}
	if toName != "" {
		n := gatewayv1.ObjectName(toName)
		g.Spec.To[0].Name = &n
	}
	return g
}

func nsObject(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// webIn is the web Service (port 80, named http) in namespace.
func webIn(namespace string) *Service {
	return service(namespace, "web", servicePort("http", 80))
}

// gatewayStatusOf finds the status of Gateway namespace/name.
func gatewayStatusOf(t *testing.T, m Model, namespace, name string) GatewayStatus {
	t.Helper()
	return statusIn(t, "Gateway", m.GatewayAPI.Gateways, namespace, name)
}

// statusIn finds the status of namespace/name, of kind, in list.
func statusIn(t *testing.T, kind string, list []GatewayStatus, namespace, name string) GatewayStatus {
	t.Helper()
	for _, g := range list {
		if g.Namespace == namespace && g.Name == name {
			return g
		}
	}
	t.Fatalf("no status for %s %s/%s in %s", kind, namespace, name, dump(list))
	return GatewayStatus{}
}

func listenerStatusOf(t *testing.T, g GatewayStatus, name string) ListenerStatus {
	t.Helper()
	for _, l := range g.Listeners {
		if l.Name == name {
			return l
		}
	}
	t.Fatalf("no listener %q in %s", name, dump(g))
	return ListenerStatus{}
}

func routeStatusOf(t *testing.T, m Model, namespace, name string) RouteStatus {
	t.Helper()
	for r := range m.GatewayAPI.Routes.All() {
		if r.Namespace == namespace && r.Name == name {
			return *r
		}
	}
	t.Fatalf("no status for HTTPRoute %s/%s in %s", namespace, name, dump(m.GatewayAPI.Routes))
	return RouteStatus{}
}

// conditionOf finds the condition of type typ.
func conditionOf(t *testing.T, conditions []Condition, typ string) Condition {
	t.Helper()
	for _, c := range conditions {
		if c.Type == typ {
			return c
		}
	}
	t.Fatalf("no %s condition in %s", typ, dump(conditions))
	return Condition{}
}

// wantCondition fails unless conditions hold typ with status and reason.
func wantCondition(t *testing.T, what string, conditions []Condition, typ string, status bool, reason string) {
	t.Helper()
	c := conditionOf(t, conditions, typ)
	if c.Status != status || c.Reason != reason {
		t.Errorf("%s: %s is %v/%s (%s), want %v/%s", what, typ, c.Status, c.Reason, c.Message, status, reason)
	}
}

// gatewayRoute finds the route of host key on front.
func gatewayRoute(m Model, front, host string) (Route, bool) {
	i := slices.IndexFunc(m.GatewayRoutes.Slice(), func(r *Route) bool { return r.Host == FrontKey(front, host) })
	if i < 0 {
		return Route{}, false
	}
	return *m.GatewayRoutes.At(i), true
}

// routeHosts lists the hosts of m's Gateway routes.
func routeHosts(m Model) []string {
	var hosts []string
	for r := range m.GatewayRoutes.All() {
		hosts = append(hosts, r.Host)
	}
	return hosts
}
