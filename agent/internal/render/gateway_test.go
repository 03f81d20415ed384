package render

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/model"
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
	route := func(host string, locs ...model.RouteLocation) model.Route {
		return model.Route{Host: host, Ordered: true, Locations: locs}
	}
	plain := model.RouteLocation{Path: "/", Backend: "ns/a:80"}
	for _, tc := range []struct {
		name   string
		routes []model.Route
		want   string
	}{
		{"no front", []model.Route{route("app.example.com", plain)}, "want FrontKey(front, host)"},
		{"twice", []model.Route{route(model.FrontKey(front, "a.example.com"), plain), route(model.FrontKey(front, "a.example.com"), plain)}, "appears twice"},
		{"profile", []model.Route{route(model.FrontKey(front, "a.example.com"), model.RouteLocation{Path: "/", Backend: "ns/a:80", Profile: "@restysync_p_0123456789abcdef0123456789abcdef"})}, "has a profile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Routes(model.Model{GatewayRoutes: tc.routes}, goldenSettings)
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
	m.GatewayRoutes = m.GatewayRoutes[:1]
	m.GatewayRoutes[0].Locations = m.GatewayRoutes[0].Locations[:1]
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
