package render_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/restysync/restysync/agent/internal/apply"
	"github.com/restysync/restysync/agent/internal/luaapi"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
	"github.com/restysync/restysync/agent/internal/testenv/agentnginx"
	"github.com/restysync/restysync/agent/internal/testenv/testcert"
)

// FuzzGatewayModelRenders: whatever a tenant's Gateway listener,
// HTTPRoute filters (CORS, header edits, a rewrite, timeouts, retry,
// mirrors) and TLSRoute hold, and wherever nginx's own servers listen,
// what the model accepts render accepts, and Lua (a real nginx) takes the
// routes render makes of it. A render error or a refused push fails every
// tenant's configuration, so the model must refuse a bad object first and
// name it (issue 30 point 5; the hostile-tenant review).
func FuzzGatewayModelRenders(f *testing.F) {
	certPEM, keyPEM := testcert.New(f, 1, time.Now().Add(24*time.Hour), "a.example.com", "*.example.com")
	caPEM, _ := testcert.New(f, 2, time.Now().Add(24*time.Hour), "ca.example.com")
	n, _, _ := agentnginx.Start(f)
	// protocol, port, listener hostname, route hostname, secret name,
	// header value, CORS origin and exposed header, rewrite path and
	// hostname, a header's regex, timeout, retry codes, mirror percent,
	// where nginx listens.
	f.Add(uint8(0), int32(8080), "", "a.example.com", "cert", "v", "https://a.example.com", "X-E", "", "r.example.com", "^v[0-9]+$", "1s", []byte{3, 0x01, 0xf4}, int32(50), uint8(0))
	f.Add(uint8(2), int32(80), "", "a.example.com", "cert", "v", "", "X-E", "", "r.example.com", "^v[0-9]+$", "", []byte{}, int32(0), uint8(0))                  // TLS on nginx's HTTP port
	f.Add(uint8(0), int32(443), "", "", "cert", "v", "", "X-E", "", "r.example.com", "^v[0-9]+$", "", []byte{}, int32(0), uint8(4))                              // HTTP on the passthrough port
	f.Add(uint8(3), int32(8443), "*.example.com", "t.example.com", "cert", "", "", "X-E", "", "r.example.com", "^v[0-9]+$", "", []byte(nil), int32(0), uint8(1)) // Terminate
	f.Add(uint8(1), int32(443), "a.example.com", "a.example.com", "cert", "a\r\nb", "https://*.Example.com", "X-E", "", "r.example.com", "^v[0-9]+$", "500ms", []byte{2, 0x01, 0xf4, 0x01, 0xf7}, int32(101), uint8(2))
	f.Add(uint8(1), int32(10246), "*", "_", "x/../../y", "\u2028", "http://a.com\"", "X-E", "", "r.example.com", "^v[0-9]+$", "-1s", []byte{0xff, 0xff}, int32(-5), uint8(3))
	f.Add(uint8(2), int32(443), "a.example.com", "a.example.com", string(make([]byte, 253)), "${x}", "*", "X-E", "", "r.example.com", "^v[0-9]+$", "99999h", []byte{11, 0x01, 0x93}, int32(100), uint8(5))
	// "*" beside a name in exposeHeaders: Lua refused every push of it.
	f.Add(uint8(0), int32(80), "", "", "cert", "v", "https://a.example.com", "*", "", "r.example.com", "^v[0-9]+$", "", []byte{}, int32(0), uint8(1))
	// Rewrites: a path with a space, one with "?" and "#".
	f.Add(uint8(0), int32(80), "", "", "cert", "v", "https://a.example.com", "X-E", "/a b", "r.example.com", "^v[0-9]+$", "", []byte{}, int32(0), uint8(1))
	f.Add(uint8(0), int32(80), "", "", "cert", "v", "https://a.example.com", "X-E", "/a?b=1#c", "r.example.com", "^v[0-9]+$", "", []byte{}, int32(0), uint8(1))
	// TLS to the backend, its hostname hostile.
	f.Add(uint8(8), int32(8080), "", "", "cert", "v", "https://a.example.com", "X-E", "", "b.example.com", "", "", []byte{}, int32(0), uint8(1))
	f.Add(uint8(8), int32(8080), "", "", "cert", "v", "https://a.example.com", "X-E", "", "b\";\n.com", "", "", []byte{}, int32(0), uint8(1))
	// A regex Go takes and PCRE does not; an upper-case rewrite hostname.
	f.Add(uint8(0), int32(80), "", "", "cert", "v", "", "X-E", "", "R.Example.com", `\x{100}[[:alpha:]](?<n>a)\Q.\E`, "", []byte{}, int32(0), uint8(1))
	f.Fuzz(func(t *testing.T, protocol uint8, port int32, listenerHost, routeHost, secretName, headerValue, origin, expose, rewrite, rewriteHost, regex, timeout string, codes []byte, mirror int32, where uint8) {
		settings := ingressSettings
		settings.StatusPort = 10246
		switch where % 3 {
		case 1:
			settings.ListenAddress = "127.0.0.1"
		case 2:
			settings.ListenAddress = "127.29.70.1" // the pool's address
		}
		settings.SSLPassthrough = where&4 != 0
		s := fuzzGatewaySnapshot(protocol, port, listenerHost, routeHost, secretName, headerValue, origin, expose, rewrite, rewriteHost, regex, timeout, codes, mirror)
		s.SSLPassthrough = settings.SSLPassthrough
		s.IngressPorts = model.IngressPorts{Address: settings.ListenAddress, HTTP: int32(settings.HTTPPort),
			HTTPS: int32(settings.HTTPSPort), Status: int32(settings.StatusPort)}
		s.ConfigMaps = model.ListOf(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "backend-ca"}, Data: map[string]string{"ca.crt": caPEM}})
		s.Secrets = model.ListOf(
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: secretName}, Type: corev1.SecretTypeTLS,
				Data: map[string][]byte{corev1.TLSCertKey: []byte(certPEM), corev1.TLSPrivateKeyKey: []byte(keyPEM), "ca.crt": []byte(caPEM)}},
		)
		m, problems := model.Build(s)
		again, againProblems := model.Build(s)
		if !reflect.DeepEqual(m, again) || !reflect.DeepEqual(problems, againProblems) {
			t.Fatal("two builds of one snapshot differ")
		}
		_, routes, err := render.Build(m, settings)
		if err != nil {
			t.Fatalf("the model accepted what render refuses, which fails every tenant's configuration: %v", err)
		}
		update := luaapi.RouteUpdate{Upserts: luaapi.RoutePayloads(routes)}
		if _, err := n.Lua.PushRoutes(context.Background(), update); errors.Is(err, apply.ErrRefused) {
			t.Fatalf("the model accepted what Lua refuses, which fails every tenant's push: %v", err)
		} else if err != nil {
			t.Fatal(err)
		}
		update.Upserts = nil
		for _, r := range routes {
			update.Removes = append(update.Removes, r.Host)
		}
		if _, err := n.Lua.PushRoutes(context.Background(), update); err != nil {
			t.Fatal(err)
		}
	})
}

// fuzzGatewaySnapshot is one Gateway "gw" in namespace tenant with a
// listener of the fuzzed protocol, port and hostname (HTTP, HTTPS, TLS
// Passthrough, TLS Terminate), its client certificates checked against
// secretName's ca.crt (protocol bit 4); an HTTPRoute with every issue-30
// filter; a TLSRoute; a BackendTLSPolicy on the backend (bit 8).
func fuzzGatewaySnapshot(protocol uint8, port int32, listenerHost, routeHost, secretName, headerValue, origin, expose, rewrite, rewriteHost, regex, timeout string, codes []byte, mirror int32) model.Snapshot {
	all := gatewayv1.NamespacesFromAll
	l := gatewayv1.Listener{Name: "l", Port: port, AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: &all}}}
	if listenerHost != "" {
		l.Hostname = new(gatewayv1.Hostname(listenerHost))
	}
	ref := gatewayv1.SecretObjectReference{Name: gatewayv1.ObjectName(secretName)}
	switch protocol % 4 {
	case 0:
		l.Protocol = gatewayv1.HTTPProtocolType
	case 1:
		l.Protocol = gatewayv1.HTTPSProtocolType
		l.TLS = &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{ref}}
	case 2:
		l.Protocol = gatewayv1.TLSProtocolType
		l.TLS = &gatewayv1.ListenerTLSConfig{Mode: new(gatewayv1.TLSModePassthrough)}
	case 3:
		l.Protocol = gatewayv1.TLSProtocolType
		l.TLS = &gatewayv1.ListenerTLSConfig{Mode: new(gatewayv1.TLSModeTerminate), CertificateRefs: []gatewayv1.SecretObjectReference{ref}}
	}
	gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "gw"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "restysync", Listeners: []gatewayv1.Listener{l}}}
	if protocol&4 != 0 {
		gw.Spec.TLS = &gatewayv1.GatewayTLSConfig{Frontend: &gatewayv1.FrontendTLSConfig{Default: gatewayv1.TLSConfig{
			Validation: &gatewayv1.FrontendTLSValidation{CACertificateRefs: []gatewayv1.ObjectReference{{Kind: "Secret", Name: gatewayv1.ObjectName(secretName)}}}}}}
	}
	parents := []gatewayv1.ParentReference{{Name: "gw"}}
	servicePort := gatewayv1.PortNumber(80)
	backend := gatewayv1.BackendObjectReference{Name: "web", Port: &servicePort}
	// retry: the first byte is the attempts, each two more a code.
	var retry *gatewayv1.HTTPRouteRetry
	if len(codes) > 0 {
		retry = &gatewayv1.HTTPRouteRetry{Attempts: new(int(codes[0]))}
		for i := 1; i+1 < len(codes) && i < 32; i += 2 {
			retry.Codes = append(retry.Codes, gatewayv1.HTTPRouteRetryStatusCode(int(codes[i])<<8|int(codes[i+1])))
		}
	}
	rule := gatewayv1.HTTPRouteRule{
		BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: backend},
			Filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier,
				RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{Set: []gatewayv1.HTTPHeader{{Name: "X-B", Value: headerValue}}}}}}},
		Filters: []gatewayv1.HTTPRouteFilter{
			{Type: gatewayv1.HTTPRouteFilterResponseHeaderModifier, ResponseHeaderModifier: &gatewayv1.HTTPHeaderFilter{
				Add: []gatewayv1.HTTPHeader{{Name: "X-A", Value: headerValue}}}},
			{Type: gatewayv1.HTTPRouteFilterCORS, CORS: &gatewayv1.HTTPCORSFilter{
				AllowOrigins:  []gatewayv1.CORSOrigin{gatewayv1.CORSOrigin(origin)},
				ExposeHeaders: []gatewayv1.HTTPHeaderName{gatewayv1.HTTPHeaderName(expose), "X-Exposed"}, MaxAge: 5}},
		},
		Retry: retry,
	}
	if timeout != "" {
		d := gatewayv1.Duration(timeout)
		rule.Timeouts = &gatewayv1.HTTPRouteTimeouts{Request: &d, BackendRequest: &d}
	}
	if rewrite != "" || rewriteHost != "" {
		f := &gatewayv1.HTTPURLRewriteFilter{}
		if rewrite != "" {
			f.Path = &gatewayv1.HTTPPathModifier{Type: gatewayv1.FullPathHTTPPathModifier, ReplaceFullPath: &rewrite}
		}
		if rewriteHost != "" {
			f.Hostname = new(gatewayv1.PreciseHostname(rewriteHost))
		}
		rule.Filters = append(rule.Filters, gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: f})
	}
	if regex != "" {
		rule.Matches = []gatewayv1.HTTPRouteMatch{{Headers: []gatewayv1.HTTPHeaderMatch{{Type: new(gatewayv1.HeaderMatchRegularExpression), Name: "X-R", Value: regex}}},
			{Path: &gatewayv1.HTTPPathMatch{Type: new(gatewayv1.PathMatchRegularExpression), Value: &regex}}}
	}
	if mirror != 0 {
		rule.Filters = append(rule.Filters, gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestMirror,
			RequestMirror: &gatewayv1.HTTPRequestMirrorFilter{BackendRef: backend, Percent: &mirror}})
	}
	route := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "r"},
		Spec: gatewayv1.HTTPRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: parents}, Rules: []gatewayv1.HTTPRouteRule{rule}}}
	tlsRoute := &gatewayv1.TLSRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "t"},
		Spec: gatewayv1.TLSRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: parents},
			Rules: []gatewayv1.TLSRouteRule{{BackendRefs: []gatewayv1.BackendRef{{BackendObjectReference: backend}}}}}}
	if routeHost != "" {
		route.Spec.Hostnames = []gatewayv1.Hostname{gatewayv1.Hostname(routeHost)}
		tlsRoute.Spec.Hostnames = []gatewayv1.Hostname{gatewayv1.Hostname(routeHost)}
	}
	s := tenantSnapshot(gw)
	s.HTTPRoutes, s.TLSRoutes = model.ListOf(route), model.ListOf(tlsRoute)
	if protocol&8 != 0 { // TLS to the backend, checked for the rewrite's hostname
		s.BackendTLSPolicies = model.ListOf(&gatewayv1.BackendTLSPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "tls"},
			Spec: gatewayv1.BackendTLSPolicySpec{
				TargetRefs: []gatewayv1.LocalPolicyTargetReferenceWithSectionName{{LocalPolicyTargetReference: gatewayv1.LocalPolicyTargetReference{Kind: "Service", Name: "web"}}},
				Validation: gatewayv1.BackendTLSPolicyValidation{Hostname: gatewayv1.PreciseHostname(rewriteHost),
					CACertificateRefs: []gatewayv1.LocalObjectReference{{Kind: "ConfigMap", Name: "backend-ca"}}}}})
	}
	return s
}
