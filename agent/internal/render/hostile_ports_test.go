package render_test

import (
	"bytes"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
)

// ingressSettings serve the Ingresses on ports 80 and 443 of every address.
var ingressSettings = render.Settings{SharedDir: "/srv/restysync", HTTPPort: 80, HTTPSPort: 443}

// TestGatewayListenerOnNginxPortsAlone: a tenant's Gateway listener on a
// port nginx's own servers hold on every address (--listen-address "")
// is refused by the model, on its own: render is never handed a listener
// it refuses, which would fail the whole render and freeze every
// tenant's configuration. TLS on the HTTP port (the stream module cannot
// bind beside the http one), and, with ssl-passthrough, HTTP on the HTTPS
// port (the stream module holds it).
func TestGatewayListenerOnNginxPortsAlone(t *testing.T) {
	passthrough := gatewayv1.TLSModePassthrough
	for _, tc := range []struct {
		name        string
		listener    gatewayv1.Listener
		passthrough bool
	}{
		{"TLS on the HTTP port", gatewayv1.Listener{Name: "bad", Port: 80, Protocol: gatewayv1.TLSProtocolType,
			TLS: &gatewayv1.ListenerTLSConfig{Mode: &passthrough}}, false},
		{"TLS on the HTTPS port", gatewayv1.Listener{Name: "bad", Port: 443, Protocol: gatewayv1.TLSProtocolType,
			TLS: &gatewayv1.ListenerTLSConfig{Mode: &passthrough}}, false},
		{"HTTP on the passthrough port", gatewayv1.Listener{Name: "bad", Port: 443, Protocol: gatewayv1.HTTPProtocolType}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			settings := ingressSettings
			settings.SSLPassthrough = tc.passthrough
			s := hostilePortsSnapshot(tc.listener)
			s.SSLPassthrough = tc.passthrough
			s.IngressPorts = model.IngressPorts{Address: settings.ListenAddress, HTTP: int32(settings.HTTPPort), HTTPS: int32(settings.HTTPSPort)}
			m, problems := model.Build(s)
			cfg, _, err := render.Build(m, settings)
			if err != nil {
				t.Fatalf("render failed for every tenant: %v", err)
			}
			if !bytes.Contains(cfg.Bytes, []byte(`listen "127.29.70.1:8080";`)) {
				t.Errorf("the good listener is not served")
			}
			named := false
			for _, p := range problems {
				named = named || p.Kind == "Gateway" && p.Name == "hostile"
			}
			if !named {
				t.Errorf("no Problem names Gateway hostile: %v", problems)
			}
		})
	}
}

// hostilePortsSnapshot is a Gateway "hostile" with bad and a good HTTP
// listener on 8080, and a route to it.
func hostilePortsSnapshot(bad gatewayv1.Listener) model.Snapshot {
	all := gatewayv1.NamespacesFromAll
	good := gatewayv1.Listener{Name: "good", Port: 8080, Protocol: gatewayv1.HTTPProtocolType,
		AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: &all}}}
	port := gatewayv1.PortNumber(80)
	s := tenantSnapshot(&gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "hostile"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "restysync", Listeners: []gatewayv1.Listener{bad, good}}})
	s.HTTPRoutes = model.ListOf(&gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "r"},
		Spec: gatewayv1.HTTPRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "hostile"}}},
			Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
				BackendObjectReference: gatewayv1.BackendObjectReference{Name: "web", Port: &port}}}}}}}})
	s.EndpointSlices = model.ListOf(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "web-1",
		Labels: map[string]string{discoveryv1.LabelServiceName: "web"}}, AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.1"}}},
		Ports:     []discoveryv1.EndpointPort{{Name: new("http"), Port: new(int32(8080))}}})
	return s
}

// tenantSnapshot is a Snapshot of our GatewayClass, the pool 127.29.70.1,
// Service tenant/web (port 80) and Gateway gw.
func tenantSnapshot(gw *gatewayv1.Gateway) model.Snapshot {
	return model.Snapshot{
		GatewayController: model.GatewayControllerName,
		GatewayAddresses:  []string{"127.29.70.1"},
		Targets:           model.Targets{Local: true},
		GatewayClasses: model.ListOf(&gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "restysync"},
			Spec: gatewayv1.GatewayClassSpec{ControllerName: model.GatewayControllerName}}),
		Gateways: model.ListOf(gw),
		Services: model.ListOf(model.ServiceOf(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "web"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}})),
	}
}
