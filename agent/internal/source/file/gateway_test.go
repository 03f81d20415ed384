package file

import (
	"slices"
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/source"
)

const gatewayClassYAML = `apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata:
  name: restysync
  namespace: ignored
spec:
  controllerName: restysync.io/gateway-controller
`

const gatewayYAML = `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: gw
  namespace: infra
spec:
  gatewayClassName: restysync
  listeners:
  - name: http
    port: 80
    protocol: HTTP
    allowedRoutes:
      namespaces:
        from: Selector
        selector:
          matchLabels: {team: a}
  - name: https
    port: 443
    protocol: HTTPS
    hostname: "*.example.com"
    tls:
      certificateRefs:
      - name: cert
        namespace: certs
`

const httpRouteYAML = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: app
spec:
  parentRefs:
  - name: gw
    namespace: infra
    sectionName: http
  hostnames: [app.example.com]
  rules:
  - matches:
    - path: {type: PathPrefix, value: /api}
      headers:
      - {name: X-Version, value: "2"}
    backendRefs:
    - {name: app, port: 80, weight: 3}
`

const referenceGrantYAML = `apiVersion: gateway.networking.k8s.io/v1
kind: ReferenceGrant
metadata:
  name: gateways
  namespace: certs
spec:
  from:
  - {group: gateway.networking.k8s.io, kind: Gateway, namespace: infra}
  to:
  - {group: "", kind: Secret}
`

const namespaceYAML = `apiVersion: v1
kind: Namespace
metadata:
  name: default
  labels: {team: a}
`

// gatewayNames lists the Gateway API's objects of snap as "Kind
// namespace/name", in the order of the view's kinds.
func gatewayNames(snap model.Snapshot) []string {
	var names []string
	for o := range snap.Namespaces.All() {
		names = append(names, "Namespace "+o.Name)
	}
	for o := range snap.GatewayClasses.All() {
		names = append(names, "GatewayClass "+o.Name)
	}
	for o := range snap.Gateways.All() {
		names = append(names, "Gateway "+o.Namespace+"/"+o.Name)
	}
	for o := range snap.HTTPRoutes.All() {
		names = append(names, "HTTPRoute "+o.Namespace+"/"+o.Name)
	}
	for o := range snap.ReferenceGrants.All() {
		names = append(names, "ReferenceGrant "+o.Namespace+"/"+o.Name)
	}
	return names
}

// The Gateway API's kinds and Namespaces are read, as documents and as
// the items of a List, with their fields.
func TestDecodeGatewayAPI(t *testing.T) {
	all := strings.Join([]string{httpRouteYAML, referenceGrantYAML, gatewayYAML, gatewayClassYAML, namespaceYAML}, "---\n")
	want := []string{"Namespace default", "GatewayClass restysync", "Gateway infra/gw", "HTTPRoute default/app", "ReferenceGrant certs/gateways"}
	for name, data := range map[string]string{
		"documents": all,
		"a List":    "apiVersion: v1\nkind: List\nitems:\n" + indentItem(httpRouteYAML) + indentItem(referenceGrantYAML) + indentItem(gatewayYAML) + indentItem(gatewayClassYAML) + indentItem(namespaceYAML),
	} {
		t.Run(name, func(t *testing.T) {
			snap, problems := ReadBytes("gw.yaml", []byte(data))
			if len(problems) != 0 {
				t.Fatalf("problems: %v", problems)
			}
			if got := gatewayNames(snap); !slices.Equal(got, want) {
				t.Fatalf("objects:\n got %q\nwant %q", got, want)
			}
			if c := snap.GatewayClasses.At(0); c.Namespace != "" || c.Spec.ControllerName != model.GatewayControllerName {
				t.Errorf("GatewayClass: namespace %q (want none: cluster-scoped), controllerName %q", c.Namespace, c.Spec.ControllerName)
			}
			gw := snap.Gateways.At(0)
			if l := gw.Spec.Listeners; len(l) != 2 || l[0].AllowedRoutes.Namespaces.Selector.MatchLabels["team"] != "a" ||
				l[1].TLS == nil || string(l[1].TLS.CertificateRefs[0].Name) != "cert" || string(*l[1].Hostname) != "*.example.com" {
				t.Errorf("Gateway listeners: %+v", l)
			}
			route := snap.HTTPRoutes.At(0)
			if r := route.Spec.Rules; len(r) != 1 || *r[0].Matches[0].Path.Value != "/api" || *r[0].BackendRefs[0].Weight != 3 ||
				string(*route.Spec.ParentRefs[0].SectionName) != "http" {
				t.Errorf("HTTPRoute: %+v", route.Spec)
			}
			if ns := snap.Namespaces.At(0); ns.Labels["team"] != "a" {
				t.Errorf("Namespace labels %v", ns.Labels)
			}
		})
	}
}

// A Gateway API document that does not decode is a Problem naming the
// file, the document and the line, like any other; another version of the
// Gateway API's kinds is not read, and says which one is.
func TestDecodeGatewayAPIProblems(t *testing.T) {
	tests := []struct {
		name, data string
		want       wantProblem
	}{
		{"unknown field", strings.Replace(httpRouteYAML, "    backendRefs:", "    backendRef:", 1),
			wantProblem{"x.yaml#1", `line 16: strict decoding error: unknown field "spec.rules[0].backendRef"`}},
		{"a field of the wrong type", strings.Replace(gatewayYAML, "port: 443", "port: https", 1),
			wantProblem{"x.yaml#1", "line 1: json: cannot unmarshal string into Go struct field Listener.spec.listeners.port"}},
		{"v1beta1", strings.Replace(httpRouteYAML, "gateway.networking.k8s.io/v1", "gateway.networking.k8s.io/v1beta1", 1),
			wantProblem{"x.yaml#1", `HTTPRoute of apiVersion "gateway.networking.k8s.io/v1beta1" is not read: the file source reads it as gateway.networking.k8s.io/v1`}},
		{"no name", strings.Replace(referenceGrantYAML, "  name: gateways\n", "", 1),
			wantProblem{"x.yaml#1", "ReferenceGrant has no metadata.name"}},
		{"bad namespace name", strings.Replace(namespaceYAML, "name: default", "name: Not_A_Label", 1),
			wantProblem{"x.yaml#1", `Namespace metadata.name "Not_A_Label"`}},
		{"a kind of the Gateway API not read", "apiVersion: gateway.networking.k8s.io/v1\nkind: UDPRoute\nmetadata: {name: g}\n",
			wantProblem{"x.yaml#1", `kind "UDPRoute" of apiVersion "gateway.networking.k8s.io/v1" is not read`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap, problems := ReadBytes("x.yaml", []byte(tt.data))
			if got := gatewayNames(snap); len(got) != 0 {
				t.Errorf("read %v", got)
			}
			if len(problems) != 1 || problems[0].Name != tt.want.name || !strings.Contains(problems[0].Reason, tt.want.reason) {
				t.Fatalf("problems %v, want %s: ...%s...", problems, tt.want.name, tt.want.reason)
			}
		})
	}
}

// What restysync check and inspect pass over as documents of other kinds
// no longer holds the Gateway API's kinds or Namespaces.
func TestGatewayAPIIsNotOtherKind(t *testing.T) {
	data := strings.Join([]string{httpRouteYAML, gatewayYAML, gatewayClassYAML, referenceGrantYAML, namespaceYAML}, "---\n")
	_, problems := ReadBytes("x.yaml", []byte(data))
	counts, rest := OtherKinds(problems)
	if len(counts) != 0 || len(rest) != 0 {
		t.Errorf("other kinds %v, problems %v; want none", counts, rest)
	}
}

// A broken document of the Gateway API names the object whose last good
// version is kept; a cluster-scoped kind has no namespace.
func TestIdentifyGatewayAPI(t *testing.T) {
	for data, want := range map[string]objectKey{
		"kind: HTTPRoute\nmetadata: {name: app}\nspec: 1":                                {kind: source.KindHTTPRoute, namespace: "default", name: "app"},
		"kind: Gateway\nmetadata: {name: gw, namespace: infra}\nspec: 1":                 {kind: source.KindGateway, namespace: "infra", name: "gw"},
		"kind: GatewayClass\nmetadata: {name: c, namespace: x}\nspec: 1":                 {kind: source.KindGatewayClass, name: "c"},
		"kind: Namespace\nmetadata: {name: web}\nspec: 1":                                {kind: source.KindNamespace, name: "web"},
		"kind: ReferenceGrant\nmetadata: {name: g, namespace: certs}\nspec: {from: one}": {kind: source.KindReferenceGrant, namespace: "certs", name: "g"},
	} {
		got := identify([]byte(data))
		if got == nil || *got != want {
			t.Errorf("identify(%q) = %v, want %v", data, got, want)
		}
	}
}

// The file source fills the defaults the API server fills from the CRDs'
// schema, so the model reads the same object from either source.
func TestGatewayAPIDefaults(t *testing.T) {
	bare := "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: bare}\nspec:\n  parentRefs: [{name: gw}]\n"
	snap, problems := ReadBytes("x.yaml", []byte(strings.Join([]string{gatewayYAML, httpRouteYAML, bare}, "---\n")))
	if len(problems) != 0 || snap.Gateways.Len() != 1 || snap.HTTPRoutes.Len() != 2 {
		t.Fatalf("read %v, problems %v", gatewayNames(snap), problems)
	}
	https := snap.Gateways.At(0).Spec.Listeners[1]
	if from := https.AllowedRoutes.Namespaces.From; from == nil || *from != "Same" {
		t.Errorf("a listener without allowedRoutes: from %v, want Same", from)
	}
	if ref := https.TLS.CertificateRefs[0]; *ref.Group != "" || *ref.Kind != "Secret" || *https.TLS.Mode != "Terminate" {
		t.Errorf("certificateRef %+v, mode %v", ref, *https.TLS.Mode)
	}
	for route := range snap.HTTPRoutes.All() {
		parent := route.Spec.ParentRefs[0]
		if *parent.Group != "gateway.networking.k8s.io" || *parent.Kind != "Gateway" {
			t.Errorf("%s parentRef %+v", route.Name, parent)
		}
		if route.Name == "bare" {
			if r := route.Spec.Rules; len(r) != 1 || len(r[0].Matches) != 1 || *r[0].Matches[0].Path.Type != "PathPrefix" || *r[0].Matches[0].Path.Value != "/" {
				t.Errorf("a route without rules: %+v, want one rule matching the prefix /", r)
			}
			continue
		}
		m, b := route.Spec.Rules[0].Matches[0], route.Spec.Rules[0].BackendRefs[0]
		if *m.Headers[0].Type != "Exact" || *b.Kind != "Service" || *b.Group != "" || *b.Weight != 3 {
			t.Errorf("%s: header match %+v, backendRef %+v", route.Name, m.Headers[0], b)
		}
	}
}

const listenerSetYAML = `apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata:
  name: extra
  namespace: tenant
spec:
  parentRef: {name: gw, namespace: infra}
  listeners:
  - name: shop
    port: 443
    protocol: HTTPS
    hostname: shop.example.com
    tls:
      certificateRefs:
      - name: shop-cert
`

// A ListenerSet is read, with the defaults the API server fills: its
// parentRef's group and kind, its listeners' as a Gateway's.
func TestDecodeListenerSet(t *testing.T) {
	snap, problems := ReadBytes("x.yaml", []byte(listenerSetYAML))
	if len(problems) != 0 || snap.ListenerSets.Len() != 1 {
		t.Fatalf("ListenerSets %d, problems %v", snap.ListenerSets.Len(), problems)
	}
	ls := snap.ListenerSets.At(0)
	if ls.Namespace != "tenant" || *ls.Spec.ParentRef.Group != "gateway.networking.k8s.io" || *ls.Spec.ParentRef.Kind != "Gateway" ||
		string(*ls.Spec.ParentRef.Namespace) != "infra" || ls.Spec.ParentRef.Name != "gw" {
		t.Errorf("ListenerSet %s/%s parentRef %+v", ls.Namespace, ls.Name, ls.Spec.ParentRef)
	}
	l := ls.Spec.Listeners[0]
	if *l.AllowedRoutes.Namespaces.From != "Same" || *l.TLS.Mode != "Terminate" || *l.TLS.CertificateRefs[0].Kind != "Secret" {
		t.Errorf("listener defaults: %+v", l)
	}
	if got := identify([]byte("kind: ListenerSet\nmetadata: {name: s, namespace: t}\nspec: 1")); got == nil ||
		*got != (objectKey{kind: source.KindListenerSet, namespace: "t", name: "s"}) {
		t.Errorf("identify: %v", got)
	}
}
