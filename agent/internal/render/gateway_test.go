package render

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/lua"
)

func TestRenderGatewayListenersRefused(t *testing.T) {
	own := goldenSettings
	own.ListenAddress = "127.0.0.1"
	passthrough := goldenSettings
	passthrough.SSLPassthrough = true
	listener := func(addr string, port int32) model.Listener {
		return model.Listener{Address: addr, Port: port, Front: model.FrontName(addr, port)}
	}
	for _, tc := range []struct {
		name      string
		listeners []model.Listener
		settings  Settings
		want      string
	}{
		{"not an address", []model.Listener{{Address: "gw.example.com", Port: 80, Front: "gw.example.com:80"}}, goldenSettings, "want an IP address"},
		{"not canonical", []model.Listener{{Address: "fd00:0::1", Port: 80, Front: "[fd00:0::1]:80"}}, goldenSettings, "canonical form"},
		{"unspecified", []model.Listener{listener("0.0.0.0", 80)}, goldenSettings, "the unspecified address is the default server's"},
		{"port", []model.Listener{{Address: "127.0.50.1", Port: 0, Front: "127.0.50.1:0"}}, goldenSettings, "must be 1..65535"},
		{"front", []model.Listener{{Address: "127.0.50.1", Port: 80, Front: `127.0.50.1:80"; evil`}}, goldenSettings, `want "127.0.50.1:80"`},
		{"twice", []model.Listener{listener("127.0.50.1", 80), listener("127.0.50.1", 80)}, goldenSettings, "appears twice"},
		{"the Ingress servers' socket", []model.Listener{listener("127.0.0.1", 443)}, own, "is the HTTPS port of the Ingress servers"},
		{"the passthrough port", []model.Listener{listener("127.0.50.1", 443)}, passthrough, "TLS passthrough"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Render(model.Model{Listeners: tc.listeners}, tc.settings)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error holding %q", err, tc.want)
			}
		})
	}

	// Another address on the Ingress servers' port is fine: nginx picks the
	// server by the address the connection came to.
	cfg, err := Render(model.Model{Listeners: []model.Listener{listener("127.0.50.1", 443)}}, own)
	if err != nil || !bytes.Contains(cfg.Bytes, []byte(`listen "127.0.50.1:443";`)) {
		t.Errorf("a listener on 127.0.50.1:443 beside 127.0.0.1:443: %v", err)
	}
}

func TestRoutesGatewayRefused(t *testing.T) {
	front := model.FrontName("127.0.50.1", 80)
	route := func(host string, locs ...model.RouteLocation) *model.Route {
		return &model.Route{Host: host, Ordered: true, Locations: locs}
	}
	plain := model.RouteLocation{Path: "/", Backend: "ns/a:80"}
	for _, tc := range []struct {
		name   string
		routes []*model.Route
		want   string
	}{
		{"no front", []*model.Route{route("app.example.com", plain)}, "want FrontKey(front, host)"},
		{"twice", []*model.Route{route(model.FrontKey(front, "a.example.com"), plain), route(model.FrontKey(front, "a.example.com"), plain)}, "appears twice"},
		{"profile", []*model.Route{route(model.FrontKey(front, "a.example.com"), model.RouteLocation{Path: "/", Backend: "ns/a:80", Profile: "@restysync_p_0123456789abcdef0123456789abcdef"})}, "has a profile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Routes(model.Model{GatewayRoutes: model.ListOf(tc.routes...)}, goldenSettings)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error holding %q", err, tc.want)
			}
		})
	}
}

// A listener that comes or goes is a reload with its own reason; a
// route's change is not one.
func TestChangesGatewayListeners(t *testing.T) {
	m := gatewayGoldenModel()
	from, err := Render(m, goldenSettings)
	if err != nil {
		t.Fatal(err)
	}
	m.GatewayRoutes = model.ListOf(m.GatewayRoutes.At(0))
	m.GatewayRoutes.At(0).Locations = m.GatewayRoutes.At(0).Locations[:1]
	same, err := Render(m, goldenSettings)
	if err != nil {
		t.Fatal(err)
	}
	if same.Hash != from.Hash {
		t.Error("changing the Gateway routes changed nginx.conf")
	}
	m.Listeners = m.Listeners[:2]
	to, err := Render(m, goldenSettings)
	if err != nil {
		t.Fatal(err)
	}
	if got := Changes(from, to); len(got) != 1 || got[0] != ReasonGatewayServers {
		t.Errorf("Changes = %v, want [%s]", got, ReasonGatewayServers)
	}
}

// TestRenderGatewayGRPCListener: a gRPC front (model.Listener.GRPC)
// listens with HTTP/2 on its plaintext port and grpc_passes; turning a
// front into one is a Gateway listener change (a reload).
func TestRenderGatewayGRPCListener(t *testing.T) {
	m := gatewayGoldenModel()
	from, err := Render(m, goldenSettings)
	if err != nil {
		t.Fatal(err)
	}
	m.Listeners[0].GRPC = true
	to, err := Render(m, goldenSettings)
	if err != nil {
		t.Fatal(err)
	}
	conf := string(to.Bytes)
	server := conf[strings.Index(conf, `listen "127.29.50.1:80"`):]
	server = server[:strings.Index(server, "\n    }")]
	if !strings.Contains(server, `listen "127.29.50.1:80" http2;`) && !strings.Contains(server, "http2 on;") {
		t.Errorf("the gRPC front does not listen with HTTP/2:\n%s", server)
	}
	if !strings.Contains(server, "grpc_pass grpc://restysync_upstream;") || strings.Contains(server, "proxy_pass") {
		t.Errorf("the gRPC front does not grpc_pass:\n%s", server)
	}
	if strings.Count(conf, "grpc_pass grpc://restysync_upstream;") != strings.Count(string(from.Bytes), "grpc_pass grpc://restysync_upstream;")+1 {
		t.Error("another server changed")
	}
	if got := Changes(from, to); len(got) != 1 || got[0] != ReasonGatewayServers {
		t.Errorf("Changes = %v, want [%s]", got, ReasonGatewayServers)
	}
}

// A BackendTLS is a named location in every Gateway server, with the
// server's client certificate and an upstream of its own per certificate;
// a name, file or server name that is not what the model gives is refused.
func TestRenderGatewayBackendTLS(t *testing.T) {
	name := model.BackendTLSPrefix + "0123456789abcdef01234567"
	m := gatewayGoldenModel()
	m.BackendTLS = []model.BackendTLS{{Name: name, CAFile: "auth/infra_tls.0a1b2c3d4e5f.ca.crt", ServerName: "secure.example.com"}}
	m.Listeners[0].BackendCertFile, m.Listeners[0].BackendKeyFile = "auth/infra_client.0a1b2c3d4e5f.tls.crt", "auth/infra_client.0a1b2c3d4e5f.tls.key"
	cfg, err := Render(m, goldenSettings)
	if err != nil {
		t.Fatal(err)
	}
	conf := string(cfg.Bytes)
	if n := strings.Count(conf, "location "+name+" {"); n != len(m.Listeners) {
		t.Errorf("%d backend TLS locations, want one per Gateway server (%d)", n, len(m.Listeners))
	}
	for _, want := range []string{`proxy_ssl_name "secure.example.com";`, `proxy_ssl_trusted_certificate "auth/infra_tls.0a1b2c3d4e5f.ca.crt";`,
		`proxy_ssl_certificate "auth/infra_client.0a1b2c3d4e5f.tls.crt";`, "proxy_ssl_verify on;"} {
		if !strings.Contains(conf, want) {
			t.Errorf("nginx.conf lacks %s", want)
		}
	}
	if len(cfg.BackendTLS) != 1 || cfg.BackendTLS[0] != name {
		t.Errorf("Config.BackendTLS = %v", cfg.BackendTLS)
	}
	back, err := ReadBack(cfg.Bytes, cfg.Hash)
	if err != nil || len(back.BackendTLS) != 1 || back.BackendTLS[0] != name {
		t.Errorf("ReadBack: %v, BackendTLS %v", err, back.BackendTLS)
	}
	// Two client certificates: two upstreams, never one shared.
	if n := strings.Count(conf, "upstream "+defaultUpstream+"_tls_"); n != 2 {
		t.Errorf("%d backend TLS upstreams, want 2 (with and without the client certificate)", n)
	}

	for _, tc := range []struct {
		name string
		edit func(*model.Model)
	}{
		{"location name", func(m *model.Model) { m.BackendTLS[0].Name = "@restysync_btls_x; return 200" }},
		{"server name variable", func(m *model.Model) { m.BackendTLS[0].ServerName = "$host" }},
		{"CA file", func(m *model.Model) { m.BackendTLS[0].CAFile = "auth/x\n" }},
		{"no CA file", func(m *model.Model) { m.BackendTLS[0].CAFile = "" }},
		{"a certificate without its key", func(m *model.Model) { m.Listeners[0].BackendKeyFile = "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := gatewayGoldenModel()
			bad.BackendTLS = slices.Clone(m.BackendTLS)
			bad.Listeners[0].BackendCertFile, bad.Listeners[0].BackendKeyFile = m.Listeners[0].BackendCertFile, m.Listeners[0].BackendKeyFile
			tc.edit(&bad)
			if _, err := Render(bad, goldenSettings); err == nil {
				t.Error("rendered")
			}
		})
	}

	// A quote stays inside the quoted string.
	m.BackendTLS[0].ServerName = `a.test"; proxy_ssl_verify off; #`
	cfg, err = Render(m, goldenSettings)
	if err != nil || strings.Contains(string(cfg.Bytes), `"a.test";`) || !strings.Contains(string(cfg.Bytes), `proxy_ssl_name "a.test\"; proxy_ssl_verify off; #";`) {
		t.Errorf("a server name with a quote: %v", err)
	}
}

// TestGatewayMirrorLocations: every HTTP Gateway server holds the named
// locations of 1 to 16 copies and the internal location they enter,
// whatever its routes (a mirror is a push); a gRPC one holds none. Lua
// refuses a rule of more mirrors than these locations send.
func TestGatewayMirrorLocations(t *testing.T) {
	src, err := lua.FS.ReadFile("restysync/gateway.lua")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("local MAX_MIRRORS = %d\n", maxGatewayMirrors); !bytes.Contains(src, []byte(want)) {
		t.Errorf("lua/restysync/gateway.lua does not hold %q", want)
	}
	m := model.Model{Listeners: []model.Listener{
		{Address: "127.0.50.1", Port: 80, Front: "127.0.50.1:80"},
		{Address: "127.0.50.2", Port: 80, Front: "127.0.50.2:80", GRPC: true},
	}}
	cfg, _, err := Build(m, goldenSettings)
	if err != nil {
		t.Fatal(err)
	}
	conf := string(cfg.Bytes)
	http, grpc, ok := strings.Cut(conf, "listen \"127.0.50.2:80\"")
	if !ok {
		t.Fatalf("no gRPC server:\n%s", conf)
	}
	for n := 1; n <= maxGatewayMirrors; n++ {
		if !strings.Contains(http, fmt.Sprintf("location @restysync_mirror_%d {", n)) || !strings.Contains(http, fmt.Sprintf("mirror \"_restysync_mirror/%d\";", n)) {
			t.Errorf("the HTTP server has no location of %d copies", n)
		}
	}
	if strings.Count(http, "mirror \"_restysync_mirror/1\";") != maxGatewayMirrors || !strings.Contains(http, "location \"_restysync_mirror/\" {\n            internal;") {
		t.Errorf("the HTTP server's mirror locations:\n%s", http)
	}
	if strings.Contains(grpc, "mirror") {
		t.Errorf("the gRPC server has mirror locations:\n%s", grpc)
	}
}

// TestRenderGatewayClientTLS: a front that checks client certificates
// (model.Listener.ClientTLS) names its CA in its own server; "on" closes
// the connection of a client without a valid one (444), the fallback
// asks without requiring and serves a certificate that fails the check
// from a location of its own; a change is a Gateway listener reload, and
// settings the template cannot hold safely are refused.
func TestRenderGatewayClientTLS(t *testing.T) {
	m := gatewayGoldenModel()
	from, err := Render(m, goldenSettings)
	if err != nil {
		t.Fatal(err)
	}
	serverOf := func(conf, listen string) string {
		server := conf[strings.Index(conf, listen):]
		return server[:strings.Index(server, "\n    }\n")]
	}
	for _, verify := range []string{"on", "optional_no_ca"} {
		m.Listeners[1].ClientTLS = &model.ClientTLS{CAFile: "auth/infra_gateway-ca.0123456789ab.ca.crt", Verify: verify, Depth: 5}
		to, err := Render(m, goldenSettings)
		if err != nil {
			t.Fatal(err)
		}
		conf := string(to.Bytes)
		server := serverOf(conf, `listen "127.29.50.1:8443" ssl`)
		for _, want := range []string{`ssl_client_certificate "auth/infra_gateway-ca.0123456789ab.ca.crt";`, "ssl_verify_client " + verify + ";", "ssl_verify_depth 5;"} {
			if !strings.Contains(server, want) {
				t.Errorf("%s: the server lacks %q:\n%s", verify, want, server)
			}
		}
		refused := strings.Contains(server, "error_page 495 496 = @restysync_client_certificate_refused;") &&
			strings.Contains(server, "location @restysync_client_certificate_refused {\n            return 444;")
		if refused != (verify == "on") {
			t.Errorf("%s: closes the connection of a refused certificate: %v\n%s", verify, refused, server)
		}
		fallback := strings.Contains(server, "error_page 495 = @restysync_client_certificate_fallback;") &&
			strings.Contains(server, "location @restysync_client_certificate_fallback {\n            set $restysync_front \"127.29.50.1:8443\";")
		if fallback != (verify == "optional_no_ca") {
			t.Errorf("%s: serves a certificate that fails the check: %v\n%s", verify, fallback, server)
		}
		if strings.Count(conf, "ssl_verify_client") != 1 {
			t.Errorf("%s: another server checks client certificates too", verify)
		}
		if got := Changes(from, to); len(got) != 1 || got[0] != ReasonGatewayServers {
			t.Errorf("Changes = %v, want [%s]", got, ReasonGatewayServers)
		}
	}
	for _, tc := range []struct {
		name string
		l    model.Listener
		want string
	}{
		{"plaintext", model.Listener{Address: "127.0.50.1", Port: 80, Front: "127.0.50.1:80", ClientTLS: &model.ClientTLS{CAFile: "auth/x.ca.crt", Verify: "on", Depth: 1}}, "plaintext port"},
		{"verify off", model.Listener{Address: "127.0.50.1", Port: 443, HTTPS: true, Front: "127.0.50.1:443", ClientTLS: &model.ClientTLS{CAFile: "auth/x.ca.crt", Verify: "off; evil", Depth: 1}}, "client certificate settings"},
		{"optional", model.Listener{Address: "127.0.50.1", Port: 443, HTTPS: true, Front: "127.0.50.1:443", ClientTLS: &model.ClientTLS{CAFile: "auth/x.ca.crt", Verify: "optional", Depth: 1}}, "client certificate settings"},
		{"depth", model.Listener{Address: "127.0.50.1", Port: 443, HTTPS: true, Front: "127.0.50.1:443", ClientTLS: &model.ClientTLS{CAFile: "auth/x.ca.crt", Verify: "on", Depth: 101}}, "client certificate settings"},
		{"no CA", model.Listener{Address: "127.0.50.1", Port: 443, HTTPS: true, Front: "127.0.50.1:443", ClientTLS: &model.ClientTLS{Verify: "on", Depth: 1}}, "need a CA file"},
		{"CRL", model.Listener{Address: "127.0.50.1", Port: 443, HTTPS: true, Front: "127.0.50.1:443", ClientTLS: &model.ClientTLS{CAFile: "auth/x.ca.crt", CRLFile: "auth/x.crl", Verify: "on", Depth: 1}}, "no CRL"},
		{"CA file with a newline", model.Listener{Address: "127.0.50.1", Port: 443, HTTPS: true, Front: "127.0.50.1:443", ClientTLS: &model.ClientTLS{CAFile: "auth/x\";\nssl_verify_client off;", Verify: "on", Depth: 1}}, "127.0.50.1:443"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Render(model.Model{Listeners: []model.Listener{tc.l}}, goldenSettings)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error holding %q", err, tc.want)
			}
		})
	}
}

// TestRenderGatewayRetries: each distinct set of retry codes is one named
// location in every Gateway server (grpc_next_upstream on a gRPC port),
// listed for Lua in init; codes out of order or nginx cannot retry on are
// refused; no retry codes, nothing new in nginx.conf.
func TestRenderGatewayRetries(t *testing.T) {
	listeners := []model.Listener{
		{Address: "127.0.50.1", Port: 80, Front: model.FrontName("127.0.50.1", 80)},
		{Address: "127.0.50.2", Port: 80, Front: model.FrontName("127.0.50.2", 80), GRPC: true},
	}
	retrying := func(codes ...int) model.RouteLocation {
		return model.RouteLocation{Path: "/", Backend: "ns/a:80", Rule: &model.RouteRule{Retry: &model.RouteRetry{Attempts: 2, Codes: codes}}}
	}
	routes := func(locs ...model.RouteLocation) model.List[*model.Route] {
		var out []*model.Route
		for i, l := range locs {
			out = append(out, &model.Route{Host: model.FrontKey(listeners[0].Front, "r"+string(rune('a'+i))+".example.com"), Ordered: true, Locations: []model.RouteLocation{l}})
		}
		return model.ListOf(out...)
	}
	m := model.Model{Listeners: listeners, GatewayRoutes: routes(retrying(500, 503), retrying(500, 503), retrying(429), retrying())}
	cfg, err := Render(m, goldenSettings)
	if err != nil {
		t.Fatal(err)
	}
	conf := string(cfg.Bytes)
	for _, want := range []string{
		"location @restysync_retry_429 {", "location @restysync_retry_500_503 {",
		"proxy_next_upstream error timeout http_500 http_503;", "grpc_next_upstream error timeout http_500 http_503;",
		`route_front(false, "@restysync_retry_500_503")`,
		"}, {\n            \"@restysync_retry_429\",\n            \"@restysync_retry_500_503\",\n        })",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("nginx.conf lacks %q", want)
		}
	}
	if n := strings.Count(conf, "location @restysync_retry_500_503 {"); n != 2 {
		t.Errorf("the location of 500 and 503 is in %d servers, want 2", n)
	}

	plain, err := Render(model.Model{Listeners: listeners, GatewayRoutes: routes(retrying())}, goldenSettings)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(plain.Bytes), "restysync_retry") {
		t.Errorf("a retry without codes put a retry location in nginx.conf")
	}

	for _, codes := range [][]int{{503, 500}, {500, 500}, {418}} {
		if _, err := Render(model.Model{Listeners: listeners, GatewayRoutes: routes(retrying(codes...))}, goldenSettings); err == nil {
			t.Errorf("retry codes %v: rendered, want an error", codes)
		}
	}
}
