package kube

import (
	"bytes"
	"context"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gatewayfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	"github.com/restysync/restysync/agent/internal/kubeclient"
	"github.com/restysync/restysync/agent/internal/kubeclient/kubeclienttest"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/source"
)

// gatewayTestObjects are the Gateway API's objects of the tests: our
// GatewayClass and another controller's, a Gateway of each in web whose
// HTTPS listener names a Secret in certs (ours: gw-cert, Opaque; theirs:
// their-cert), an HTTPRoute in web and one in other, a ReferenceGrant in
// certs.
func gatewayTestObjects() []runtime.Object {
	secretRef := func(name string) gatewayv1.SecretObjectReference {
		ns := gatewayv1.Namespace("certs")
		return gatewayv1.SecretObjectReference{Name: gatewayv1.ObjectName(name), Namespace: &ns}
	}
	gateway := func(name, class, cert string) *gatewayv1.Gateway {
		return &gatewayv1.Gateway{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "web"},
			Spec: gatewayv1.GatewaySpec{
				GatewayClassName: gatewayv1.ObjectName(class),
				Listeners: []gatewayv1.Listener{
					{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType},
					{Name: "https", Port: 443, Protocol: gatewayv1.HTTPSProtocolType,
						TLS: &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{secretRef(cert)}}},
				},
			},
		}
	}
	route := func(name, namespace string) *gatewayv1.HTTPRoute {
		ns := gatewayv1.Namespace("web")
		return &gatewayv1.HTTPRoute{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
			Spec: gatewayv1.HTTPRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{
				ParentRefs: []gatewayv1.ParentReference{{Name: "gw", Namespace: &ns}}}},
		}
	}
	return []runtime.Object{
		&gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "restysync"},
			Spec: gatewayv1.GatewayClassSpec{ControllerName: model.GatewayControllerName}},
		&gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "theirs"},
			Spec: gatewayv1.GatewayClassSpec{ControllerName: "example.com/other"}},
		gateway("gw", "restysync", "gw-cert"),
		gateway("their-gw", "theirs", "their-cert"),
		route("app", "web"),
		route("app", "other"),
		&gatewayv1.GRPCRoute{
			ObjectMeta: metav1.ObjectMeta{Name: "calls", Namespace: "web"},
			Spec: gatewayv1.GRPCRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{
				ParentRefs: []gatewayv1.ParentReference{{Name: "gw"}}}},
		},
		&gatewayv1.TLSRoute{
			ObjectMeta: metav1.ObjectMeta{Name: "tls", Namespace: "web"},
			Spec: gatewayv1.TLSRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{
				ParentRefs: []gatewayv1.ParentReference{{Name: "gw"}}},
				Hostnames: []gatewayv1.Hostname{"tls.example.com"},
				Rules:     []gatewayv1.TLSRouteRule{{BackendRefs: []gatewayv1.BackendRef{{BackendObjectReference: gatewayv1.BackendObjectReference{Name: "app", Port: new(gatewayv1.PortNumber(443))}}}}}},
		},
		// A ListenerSet of our Gateway, whose listener names the Gateway's
		// Secret: read once, by name.
		&gatewayv1.ListenerSet{
			ObjectMeta: metav1.ObjectMeta{Name: "extra", Namespace: "web"},
			Spec: gatewayv1.ListenerSetSpec{ParentRef: gatewayv1.ParentGatewayReference{Name: "gw"},
				Listeners: []gatewayv1.ListenerEntry{{Name: "extra", Port: 8443, Protocol: gatewayv1.HTTPSProtocolType,
					TLS: &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{secretRef("gw-cert")}}}}},
		},
		&gatewayv1.ReferenceGrant{
			ObjectMeta: metav1.ObjectMeta{Name: "gateways", Namespace: "certs"},
			Spec: gatewayv1.ReferenceGrantSpec{
				From: []gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "Gateway", Namespace: "web"}},
				To:   []gatewayv1.ReferenceGrantTo{{Group: "", Kind: "Secret"}},
			},
		},
		&gatewayv1.BackendTLSPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "backend-tls", Namespace: "web"},
			Spec: gatewayv1.BackendTLSPolicySpec{
				TargetRefs: []gatewayv1.LocalPolicyTargetReferenceWithSectionName{{LocalPolicyTargetReference: gatewayv1.LocalPolicyTargetReference{Kind: "Service", Name: "app"}}},
				Validation: gatewayv1.BackendTLSPolicyValidation{Hostname: "app.web.test",
					CACertificateRefs: []gatewayv1.LocalObjectReference{{Kind: "ConfigMap", Name: "backend-ca"}}},
			},
		},
	}
}

// createGatewayObjects creates the Gateway API's objects with the typed
// client (a fake one too: its tracker would file a Gateway given at
// construction under v1beta1, whose Gateway is the same Go type).
func createGatewayObjects(t *testing.T, client gatewayclient.Interface, objs ...runtime.Object) {
	t.Helper()
	ctx := context.Background()
	gw := client.GatewayV1()
	for _, obj := range objs {
		var err error
		switch o := obj.(type) {
		case *gatewayv1.GatewayClass:
			_, err = gw.GatewayClasses().Create(ctx, o, metav1.CreateOptions{})
		case *gatewayv1.Gateway:
			_, err = gw.Gateways(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *gatewayv1.HTTPRoute:
			_, err = gw.HTTPRoutes(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *gatewayv1.GRPCRoute:
			_, err = gw.GRPCRoutes(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *gatewayv1.TLSRoute:
			_, err = gw.TLSRoutes(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *gatewayv1.ReferenceGrant:
			_, err = gw.ReferenceGrants(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *gatewayv1.ListenerSet:
			_, err = gw.ListenerSets(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *gatewayv1.BackendTLSPolicy:
			_, err = gw.BackendTLSPolicies(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		default:
			t.Fatalf("createGatewayObjects: unexpected %T", obj)
		}
		if err != nil {
			t.Fatalf("create %T: %v", obj, err)
		}
	}
}

// gatewayCoreObjects are the namespaces and Secrets beside them.
func gatewayCoreObjects() []runtime.Object {
	certs := namespace("certs")
	certs.Labels = map[string]string{"team": "a"}
	certs.Annotations = map[string]string{"big": "dropped"}
	return []runtime.Object{
		namespace("web"), certs, namespace("other"),
		opaqueSecret("gw-cert", "certs", map[string]string{"tls.crt": "cert", "tls.key": "key", "password": "hunter2"}),
		opaqueSecret("their-cert", "certs", map[string]string{"tls.crt": "theirs", "tls.key": "theirs"}),
	}
}

// wantGatewaySnapshot checks the snapshot of gatewayTestObjects and
// gatewayCoreObjects, read in every namespace.
func wantGatewaySnapshot(t *testing.T, snap model.Snapshot) {
	t.Helper()
	for _, c := range []struct {
		kind      string
		got, want []string
	}{
		{"GatewayClasses", names(snap.GatewayClasses.Slice()), []string{"restysync", "theirs"}},
		{"Gateways", names(snap.Gateways.Slice()), []string{"web/gw", "web/their-gw"}},
		{"HTTPRoutes", names(snap.HTTPRoutes.Slice()), []string{"other/app", "web/app"}},
		{"GRPCRoutes", names(snap.GRPCRoutes.Slice()), []string{"web/calls"}},
		{"TLSRoutes", names(snap.TLSRoutes.Slice()), []string{"web/tls"}},
		{"ReferenceGrants", names(snap.ReferenceGrants.Slice()), []string{"certs/gateways"}},
		{"ListenerSets", names(snap.ListenerSets.Slice()), []string{"web/extra"}},
		{"BackendTLSPolicies", names(snap.BackendTLSPolicies.Slice()), []string{"web/backend-tls"}},
		// An API server has its own Namespaces besides these.
		{"Namespaces", slices.DeleteFunc(names(snap.Namespaces.Slice()), func(n string) bool { return n == "default" || strings.HasPrefix(n, "kube-") }),
			[]string{"certs", "other", "web"}},
		// Only our Gateway's listener Secret, by name in another namespace.
		{"Secrets", names(snap.Secrets.Slice()), []string{"certs/gw-cert"}},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.kind, c.got, c.want)
		}
	}
	for s := range snap.Secrets.All() {
		if want := map[string]string{"tls.crt": "cert", "tls.key": "key"}; s.Name == "gw-cert" && !maps.Equal(stringData(s), want) {
			t.Errorf("certs/gw-cert data = %v, want %v", stringData(s), want)
		}
	}
	for ns := range snap.Namespaces.All() {
		if ns.Name == "certs" && (ns.Labels["team"] != "a" || ns.Annotations != nil) {
			t.Errorf("namespace certs: labels %v, annotations %v; want its labels only", ns.Labels, ns.Annotations)
		}
	}
}

// With the Gateway API served when the source starts, its kinds are in
// the first snapshot, and so is the Secret our Gateway's listener names.
func TestGatewayAPIFake(t *testing.T) {
	gw := gatewayfake.NewSimpleClientset()
	createGatewayObjects(t, gw, gatewayTestObjects()...)
	kubeclienttest.ServeGatewayAPI(gw)
	src := New(kubeclienttest.WrapGateway(fake.NewClientset(gatewayCoreObjects()...), gw), Options{})
	counter := newKindCounter()
	startSource(t, src, counter.changed)
	snap, _ := src.Snapshot()
	wantGatewaySnapshot(t, snap)
	for _, kind := range []source.Kind{source.KindGatewayClass, source.KindGateway, source.KindHTTPRoute, source.KindReferenceGrant, source.KindNamespace} {
		if counter.get(kind) == 0 {
			t.Errorf("no change reported for %s", kind)
		}
	}

	t.Run("every Gateway", func(t *testing.T) {
		src := New(kubeclienttest.WrapGateway(fake.NewClientset(gatewayCoreObjects()...), gw), Options{EveryIngress: true})
		startSource(t, src, func(source.Change) {})
		snap, _ := src.Snapshot()
		if got := names(snap.Secrets.Slice()); !slices.Equal(got, []string{"certs/gw-cert", "certs/their-cert"}) {
			t.Errorf("secrets = %v, want both Gateways' listener Secrets", got)
		}
	})
}

// withoutResource is a client whose API server serves the Gateway API
// without one of its resources (an optional one's CRD not installed).
type withoutResource struct {
	kubeclient.Interface
	resource string
}

func (c withoutResource) ServedResources(ctx context.Context, groupVersion string) ([]string, error) {
	served, err := c.Interface.ServedResources(ctx, groupVersion)
	return slices.DeleteFunc(served, func(r string) bool { return r == c.resource }), err
}

// IsWatchListSemanticsUnSupported: the fakes do not stream lists.
func (c withoutResource) IsWatchListSemanticsUnSupported() bool { return true }

// Without the BackendTLSPolicy CRD the source reads every other kind of
// the Gateway API, and no policy.
func TestGatewayAPIWithoutBackendTLSPolicies(t *testing.T) {
	gw := gatewayfake.NewSimpleClientset()
	createGatewayObjects(t, gw, gatewayTestObjects()...)
	kubeclienttest.ServeGatewayAPI(gw)
	client := withoutResource{kubeclienttest.WrapGateway(fake.NewClientset(gatewayCoreObjects()...), gw), "backendtlspolicies"}
	src := New(client, Options{})
	startSource(t, src, func(source.Change) {})
	snap, _ := src.Snapshot()
	if snap.Gateways.Len() != 2 || snap.HTTPRoutes.Len() != 2 || snap.BackendTLSPolicies.Len() != 0 {
		t.Errorf("Gateways %v, HTTPRoutes %v, BackendTLSPolicies %v; want 2, 2 and none", names(snap.Gateways.Slice()), names(snap.HTTPRoutes.Slice()), names(snap.BackendTLSPolicies.Slice()))
	}
	if p := src.BackendTLSPolicy("web", "backend-tls"); p != nil {
		t.Errorf("BackendTLSPolicy lookup without the resource = %v, want nil", p.Name)
	}
}

// lateGatewayAPI is a client whose API server serves the Gateway API
// only once served is set: the CRDs are installed then.
type lateGatewayAPI struct {
	kubeclient.Interface
	installed chan struct{} // closed when the CRDs are installed
}

func (c *lateGatewayAPI) ServedResources(ctx context.Context, groupVersion string) ([]string, error) {
	select {
	case <-c.installed:
		return c.Interface.ServedResources(ctx, groupVersion)
	default:
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: gatewayv1.GroupName}, "")
	}
}

// IsWatchListSemanticsUnSupported: the fakes do not stream lists.
func (c *lateGatewayAPI) IsWatchListSemanticsUnSupported() bool { return true }

// Without the Gateway API, the source says so once and serves the rest;
// once discovery serves it, the informers start and a change is reported.
func TestGatewayAPILateFake(t *testing.T) {
	defer func(d time.Duration) { gatewayAPICheckInterval = d }(gatewayAPICheckInterval)
	gatewayAPICheckInterval = 20 * time.Millisecond
	gw := gatewayfake.NewSimpleClientset()
	createGatewayObjects(t, gw, gatewayTestObjects()...)
	kubeclienttest.ServeGatewayAPI(gw)
	client := &lateGatewayAPI{Interface: kubeclienttest.WrapGateway(fake.NewClientset(append(testObjects()[:2], gatewayCoreObjects()...)...), gw),
		installed: make(chan struct{})}
	var log bytes.Buffer
	logs := &syncWriter{w: &log}
	src := New(client, Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	counter := newKindCounter()
	startSource(t, src, counter.changed)
	snap, _ := src.Snapshot()
	if snap.Ingresses.Len() != 1 || snap.GatewayClasses.Len() != 0 || snap.Gateways.Len() != 0 || snap.Namespaces.Len() != 0 {
		t.Errorf("without the Gateway API: %d Ingresses (want 1), GatewayClasses %v, Gateways %v, Namespaces %v",
			snap.Ingresses.Len(), names(snap.GatewayClasses.Slice()), names(snap.Gateways.Slice()), names(snap.Namespaces.Slice()))
	}
	time.Sleep(5 * gatewayAPICheckInterval) // several checks
	if n := strings.Count(logs.String(), "the Gateway API is not installed"); n != 1 {
		t.Errorf("said %d times that the Gateway API is not installed, want once:\n%s", n, logs)
	}

	close(client.installed)
	eventually(t, "the Gateway API's objects in the snapshot", func() bool {
		snap, _ = src.Snapshot()
		return snap.GatewayClasses.Len() > 0
	})
	wantGatewaySnapshot(t, snap)
	if counter.get(source.KindGatewayClass) == 0 {
		t.Error("no change reported once the Gateway API is read")
	}
	if !strings.Contains(logs.String(), "the Gateway API is installed") {
		t.Errorf("the log does not say the Gateway API is read now:\n%s", logs)
	}
}

// withoutListenerSets is a client whose API server serves the Gateway API
// of a release before ListenerSets.
type withoutListenerSets struct{ kubeclient.Interface }

func (c withoutListenerSets) ServedResources(ctx context.Context, groupVersion string) ([]string, error) {
	served, err := c.Interface.ServedResources(ctx, groupVersion)
	return slices.DeleteFunc(served, func(r string) bool { return r == "listenersets" }), err
}

func (c withoutListenerSets) IsWatchListSemanticsUnSupported() bool { return true }

// Without the ListenerSet CRD, the other kinds are read, and the log and a
// Problem say ListenerSets are not.
func TestGatewayAPIWithoutListenerSets(t *testing.T) {
	gw := gatewayfake.NewSimpleClientset()
	createGatewayObjects(t, gw, gatewayTestObjects()...)
	kubeclienttest.ServeGatewayAPI(gw)
	var log bytes.Buffer
	logs := &syncWriter{w: &log}
	src := New(withoutListenerSets{kubeclienttest.WrapGateway(fake.NewClientset(gatewayCoreObjects()...), gw)},
		Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	startSource(t, src, func(source.Change) {})
	snap, problems := src.Snapshot()
	if snap.Gateways.Len() != 2 || snap.HTTPRoutes.Len() != 2 || snap.ListenerSets.Len() != 0 {
		t.Errorf("Gateways %v, HTTPRoutes %v, ListenerSets %v; want the Gateways and routes, no ListenerSet",
			names(snap.Gateways.Slice()), names(snap.HTTPRoutes.Slice()), names(snap.ListenerSets.Slice()))
	}
	if src.ListenerSet("web", "extra") != nil {
		t.Error("a ListenerSet from a cache that is not there")
	}
	if !strings.Contains(logs.String(), "lack gateway.networking.k8s.io/v1 listenersets") {
		t.Errorf("the log does not say ListenerSets are not read:\n%s", logs)
	}
	if len(problems) != 1 || problems[0].Name != "listenersets.gateway.networking.k8s.io" {
		t.Errorf("problems %+v, want one of the ListenerSet CRD", problems)
	}
}

// A listener's certificateRefs name Secrets: in the Gateway's namespace by
// default, and only of the core group's kind Secret; spec.tls.frontend's
// CA certificates name ConfigMaps and Secrets of the core group.
func TestGatewayRefs(t *testing.T) {
	group, kind := gatewayv1.Group("example.com"), gatewayv1.Kind("Vault")
	core, secret := gatewayv1.Group(""), gatewayv1.Kind("Secret")
	other := gatewayv1.Namespace("cas")
	snap := model.Snapshot{
		GatewayClasses: model.ListOf(&gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "ours"},
			Spec: gatewayv1.GatewayClassSpec{ControllerName: "example.com/gw"}}),
		Gateways: model.ListOf(&gatewayv1.Gateway{
			ObjectMeta: metav1.ObjectMeta{Name: "gw", Namespace: "web"},
			Spec: gatewayv1.GatewaySpec{GatewayClassName: "ours", Listeners: []gatewayv1.Listener{
				{Name: "plain", Port: 80, Protocol: gatewayv1.HTTPProtocolType},
				{Name: "tls", Port: 443, Protocol: gatewayv1.HTTPSProtocolType, TLS: &gatewayv1.ListenerTLSConfig{
					CertificateRefs: []gatewayv1.SecretObjectReference{
						{Name: "same"}, {Name: "explicit", Group: &core, Kind: &secret},
						{Name: "other-group", Group: &group}, {Name: "other-kind", Kind: &kind},
					}}},
			},
				TLS: &gatewayv1.GatewayTLSConfig{Frontend: &gatewayv1.FrontendTLSConfig{
					Default: gatewayv1.TLSConfig{Validation: &gatewayv1.FrontendTLSValidation{CACertificateRefs: []gatewayv1.ObjectReference{
						{Kind: "ConfigMap", Name: "ca"}, {Kind: "Secret", Name: "ca-secret", Namespace: &other},
						{Kind: "Service", Name: "not-a-ca"}, {Group: "example.com", Kind: "ConfigMap", Name: "other-group"},
					}}},
					PerPort: []gatewayv1.TLSPortConfig{{Port: 8443, TLS: gatewayv1.TLSConfig{Validation: &gatewayv1.FrontendTLSValidation{
						CACertificateRefs: []gatewayv1.ObjectReference{{Kind: "ConfigMap", Name: "per-port", Namespace: &other}}}}}},
				}},
			},
		}),
	}
	names := func(refs []types.NamespacedName) []string {
		var out []string
		for _, ref := range refs {
			out = append(out, ref.String())
		}
		return out
	}
	secrets, configMaps := gatewayRefs(snap, "example.com/gw", false)
	if want := []string{"web/same", "web/explicit", "cas/ca-secret"}; !slices.Equal(names(secrets), want) {
		t.Errorf("Secrets = %v, want %v", names(secrets), want)
	}
	if want := []string{"web/ca", "cas/per-port"}; !slices.Equal(names(configMaps), want) {
		t.Errorf("ConfigMaps = %v, want %v", names(configMaps), want)
	}
	if secrets, configMaps := gatewayRefs(snap, "example.com/another", false); len(secrets)+len(configMaps) != 0 {
		t.Errorf("refs of a Gateway of another controller's class: %v %v", secrets, configMaps)
	}

	// A ListenerSet's listeners, in its own namespace by default, when its
	// parent is one of those Gateways.
	gwNS := gatewayv1.Namespace("web")
	tlsEntry := func(name string) []gatewayv1.ListenerEntry {
		return []gatewayv1.ListenerEntry{{Name: "tls", Port: 443, Protocol: gatewayv1.HTTPSProtocolType,
			TLS: &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{{Name: gatewayv1.ObjectName(name)}}}}}
	}
	snap.ListenerSets = model.ListOf(
		&gatewayv1.ListenerSet{ObjectMeta: metav1.ObjectMeta{Name: "set", Namespace: "tenant"},
			Spec: gatewayv1.ListenerSetSpec{ParentRef: gatewayv1.ParentGatewayReference{Name: "gw", Namespace: &gwNS}, Listeners: tlsEntry("set-cert")}},
		&gatewayv1.ListenerSet{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: "tenant"},
			Spec: gatewayv1.ListenerSetSpec{ParentRef: gatewayv1.ParentGatewayReference{Name: "missing"}, Listeners: tlsEntry("orphan-cert")}},
	)
	secrets, _ = gatewayRefs(snap, "example.com/gw", false)
	if want := []string{"web/same", "web/explicit", "cas/ca-secret", "tenant/set-cert"}; !slices.Equal(names(secrets), want) {
		t.Errorf("Secrets with ListenerSets = %v, want %v", names(secrets), want)
	}
}
