package render

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/luaapi"
	"github.com/restysync/restysync/agent/internal/model"
)

// The Gateway data plane tests push hand-built Gateway routes (as the
// model's Gateway processor makes them: model.Route with Host
// FrontKey(front, host), Ordered, locations in the spec's precedence) to
// a real nginx serving Gateway listeners on 127.29.0.x, and send real
// HTTP(S) requests to those addresses.

// gatewayAddrA and gatewayAddrB are two Gateways' addresses.
const (
	gatewayAddrA = "127.29.0.1"
	gatewayAddrB = "127.29.0.2"
)

// startRequestEcho starts a backend that answers with its name, the
// request's path and query, its Host and its headers, as JSON; a request
// with ?set-header=NAME gets that response header set to "backend".
func startRequestEcho(t *testing.T, name string) model.Endpoint {
	t.Helper()
	return startBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := r.URL.Query().Get("set-header"); h != "" {
			w.Header().Set(h, "backend")
		}
		json.NewEncoder(w).Encode(echoed{Name: name, URI: r.URL.RequestURI(), Host: r.Host, Headers: r.Header})
	}))
}

type echoed struct {
	Name    string      `json:"name"`
	URI     string      `json:"uri"`
	Host    string      `json:"host"`
	Headers http.Header `json:"headers"`
}

// gatewayRequest is one request to a Gateway listener.
type gatewayRequest struct {
	addr    string // address:port
	https   bool
	host    string
	method  string
	path    string
	headers map[string]string
}

// gatewayAnswer is what came back: the status, the echo (when a backend
// answered), the Location and the response headers.
type gatewayAnswer struct {
	code     int
	echo     echoed
	location string
	header   http.Header
}

func sendGateway(t *testing.T, req gatewayRequest) gatewayAnswer {
	t.Helper()
	scheme := "http"
	if req.https {
		scheme = "https"
	}
	client := &http.Client{
		Timeout:       5 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "tcp", req.addr)
			},
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true, ServerName: req.host},
			DisableKeepAlives: true,
		},
	}
	method := req.method
	if method == "" {
		method = http.MethodGet
	}
	r, err := http.NewRequest(method, scheme+"://"+req.host+req.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range req.headers {
		r.Header.Set(k, v)
	}
	resp, err := client.Do(r)
	if err != nil {
		t.Fatalf("%s %s%s on %s: %v", method, req.host, req.path, req.addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := gatewayAnswer{code: resp.StatusCode, location: resp.Header.Get("Location"), header: resp.Header}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, &a.echo); err != nil {
			t.Fatalf("%s %s%s on %s: %d %q is no echo: %v", method, req.host, req.path, req.addr, resp.StatusCode, body, err)
		}
	}
	return a
}

// gatewayRoutesModel is the model of TestDataPlaneGateway: an Ingress
// host, listener A (HTTP) and B (HTTP, same port, another address), and
// C (HTTPS on A's address), with their routes.
func gatewayRoutesModel(portHTTP, portHTTPS int) model.Model {
	a := model.FrontName(gatewayAddrA, int32(portHTTP))
	b := model.FrontName(gatewayAddrB, int32(portHTTP))
	c := model.FrontName(gatewayAddrA, int32(portHTTPS))
	rule := func(r model.RouteRule) *model.RouteRule { return &r }
	to := func(path, backend string, r *model.RouteRule) model.RouteLocation {
		return model.RouteLocation{Path: path, Backend: backend, Rule: r}
	}
	redirect := func(path string, rd model.Redirect) model.RouteLocation {
		return model.RouteLocation{Path: path, Rule: &model.RouteRule{Redirect: &rd}}
	}
	changes := &model.HeaderChanges{
		Set:    []model.Header{{Name: "X-Set", Value: "set"}},
		Add:    []model.Header{{Name: "X-Add", Value: "added"}},
		Remove: []string{"X-Remove"},
	}
	return model.Model{
		Default: model.Server{Locations: []model.Location{loc("/", model.PathPrefix, "ns/ingress:80")}},
		Servers: model.ListOf(&model.Server{Host: "app.example.com", Locations: []model.Location{loc("/", model.PathPrefix, "ns/ingress:80")}}),
		Listeners: []model.Listener{
			{Address: gatewayAddrA, Port: int32(portHTTP), Front: a},
			{Address: gatewayAddrA, Port: int32(portHTTPS), HTTPS: true, Front: c},
			{Address: gatewayAddrB, Port: int32(portHTTP), Front: b},
		},
		GatewayRoutes: model.ListOf(
			&model.Route{Host: model.FrontKey(a, "app.example.com"), Ordered: true, Locations: []model.RouteLocation{
				// The spec's precedence, as the model orders it: exact,
				// longest prefix, regex; then method, most headers, most
				// query parameters.
				{Path: "/match", Exact: true, Backend: "ns/exact:80"},
				to("/match/longer", "ns/longer:80", nil),
				to("/match", "ns/method:80", rule(model.RouteRule{Method: "POST"})),
				to("/match", "ns/two-headers:80", rule(model.RouteRule{Headers: []model.ValueMatch{
					{Name: "Version", Value: "2"}, {Name: "Env", Value: "^can", Regex: true}}})),
				to("/match", "ns/header:80", rule(model.RouteRule{Headers: []model.ValueMatch{{Name: "version", Value: "2"}}})),
				to("/match", "ns/query:80", rule(model.RouteRule{Query: []model.ValueMatch{{Name: "q", Value: "1"}}})),
				to("/match", "ns/query-regex:80", rule(model.RouteRule{Query: []model.ValueMatch{{Name: "Q", Value: "^[0-9]+$", Regex: true}}})),
				to("/match", "ns/prefix:80", nil),
				{Path: "^/re/[a-z]+$", Regex: true, Backend: "ns/regex:80", Rule: rule(model.RouteRule{CaseSensitive: true})},
				{Path: "^/ri/[a-z]+$", Regex: true, Backend: "ns/regex-i:80"},
				// Filters.
				to("/request-headers", "ns/echo:80", rule(model.RouteRule{RequestHeaders: changes})),
				to("/response-headers", "ns/echo:80", rule(model.RouteRule{ResponseHeaders: changes})),
				redirect("/redirect-host", model.Redirect{Host: "example.org", Status: 302}),
				redirect("/redirect-301", model.Redirect{Host: "example.org", Status: 301}),
				redirect("/redirect-303", model.Redirect{Status: 303}),
				redirect("/redirect-307", model.Redirect{Status: 307}),
				redirect("/redirect-308", model.Redirect{Status: 308}),
				redirect("/scheme-https", model.Redirect{Scheme: "https", Host: "example.org", Status: 302}),
				redirect("/scheme-https-8443", model.Redirect{Scheme: "https", Port: 8443, Host: "example.org", Status: 302}),
				redirect("/port-80", model.Redirect{Port: 80, Host: "example.org", Status: 302}),
				redirect("/port-8080", model.Redirect{Port: 8080, Host: "example.org", Status: 302}),
				redirect("/full-path", model.Redirect{Path: "/replaced", Status: 302}),
				redirect("/prefix-path", model.Redirect{Path: "/new-prefix", ReplacePrefix: true, MatchedPrefix: "/prefix-path", Status: 302}),
				to("/rewrite-prefix", "ns/echo:80", rule(model.RouteRule{Rewrite: &model.Rewrite{Path: "/one", ReplacePrefix: true, MatchedPrefix: "/rewrite-prefix"}})),
				to("/strip", "ns/echo:80", rule(model.RouteRule{Rewrite: &model.Rewrite{Path: "/", ReplacePrefix: true, MatchedPrefix: "/strip"}})),
				to("/rewrite-full", "ns/echo:80", rule(model.RouteRule{Rewrite: &model.Rewrite{Path: "/full", Host: "rewritten.example.com"}})),
				to("/weights", "", rule(model.RouteRule{Backends: []model.WeightedBackend{
					{Backend: "ns/heavy:80", Weight: 3}, {Weight: 1}, {Backend: "ns/never:80", Weight: 0}}})),
				to("/no-backend", "", rule(model.RouteRule{Status: 500})),
			}},
			&model.Route{Host: model.FrontKey(a, "*.wild.example.com"), Ordered: true, Locations: []model.RouteLocation{to("/", "ns/wild:80", nil)}},
			&model.Route{Host: model.FrontKey(a, "*.b.wild.example.com"), Ordered: true, Locations: []model.RouteLocation{to("/", "ns/wild-b:80", nil)}},
			&model.Route{Host: model.FrontKey(a, "_"), Ordered: true, Locations: []model.RouteLocation{to("/", "ns/front-a-default:80", nil)}},
			&model.Route{Host: model.FrontKey(b, "app.example.com"), Ordered: true, Locations: []model.RouteLocation{to("/", "ns/front-b:80", nil)}},
			&model.Route{Host: model.FrontKey(c, "secure.example.com"), Ordered: true, Locations: []model.RouteLocation{
				redirect("/redirect", model.Redirect{Host: "example.org", Status: 302}),
				to("/", "ns/secure:80", nil),
			}},
		),
	}
}

// TestDataPlaneGateway serves Gateway listeners from Lua: each request is
// routed by its listener's routes only, in the spec's precedence, through
// every filter; the HTTPS listener picks the front's certificate by SNI;
// a changed route is a push, not a reload.
func TestDataPlaneGateway(t *testing.T) {
	names := []string{"ingress", "exact", "longer", "method", "two-headers", "header", "query", "query-regex", "prefix",
		"regex", "regex-i", "echo", "heavy", "never", "wild", "wild-b", "front-a-default", "front-b", "secure", "added"}
	var upserts []luaapi.BackendPayload
	for _, name := range names {
		upserts = append(upserts, luaapi.BackendPayload{Name: "ns/" + name + ":80", Endpoints: []model.Endpoint{startRequestEcho(t, name)}})
	}
	portHTTP, portHTTPS := freeGatewayPort(t), freeGatewayPort(t)
	m := gatewayRoutesModel(portHTTP, portHTTPS)
	dp, settings, cfg := startDataPlane(t, m, nil)
	dp.push(t, upserts, nil)
	a := net.JoinHostPort(gatewayAddrA, strconv.Itoa(portHTTP))
	b := net.JoinHostPort(gatewayAddrB, strconv.Itoa(portHTTP))
	c := net.JoinHostPort(gatewayAddrA, strconv.Itoa(portHTTPS))
	if strings.Contains(string(cfg.Bytes), "app.example.com") || strings.Contains(string(cfg.Bytes), "/match") {
		t.Fatal("nginx.conf holds a host or a path of a route")
	}

	t.Run("precedence", func(t *testing.T) {
		for _, tc := range []struct {
			method, path string
			headers      map[string]string
			want         string
		}{
			{"GET", "/match", nil, "exact"},
			{"POST", "/match", nil, "exact"}, // exact beats the method
			{"GET", "/match/longer/x", map[string]string{"Version": "2"}, "longer"},
			{"POST", "/match/x", map[string]string{"Version": "2", "Env": "canary"}, "method"},
			{"GET", "/match/x", map[string]string{"Version": "2", "Env": "canary"}, "two-headers"},
			{"GET", "/match/x", map[string]string{"VERSION": "2", "Env": "prod"}, "header"},
			{"GET", "/match/x?q=1", map[string]string{"Version": "3"}, "query"},
			{"GET", "/match/x?q=2&Q=42", nil, "query-regex"},
			{"GET", "/match/x?Q=4a", nil, "prefix"},
			{"GET", "/match/x?q=1&q=2", nil, "query"}, // the first value counts
			{"GET", "/match/x?q=2&q=1", nil, "prefix"},
			// Element-wise: "/match" does not take "/matchx", and a host
			// with a route on this front never falls to the front's "_".
			{"GET", "/matchx", nil, ""},
			{"GET", "/re/abc", nil, "regex"},
			{"GET", "/re/ABC", nil, ""}, // case-sensitive: 404
			{"GET", "/ri/ABC", nil, "regex-i"},
		} {
			got := sendGateway(t, gatewayRequest{addr: a, host: "app.example.com", method: tc.method, path: tc.path, headers: tc.headers})
			if tc.want == "" {
				if got.code != http.StatusNotFound {
					t.Errorf("%s %s %v: %d %s, want 404", tc.method, tc.path, tc.headers, got.code, got.echo.Name)
				}
				continue
			}
			if got.code != http.StatusOK || got.echo.Name != tc.want {
				t.Errorf("%s %s %v: %d %q, want 200 %q", tc.method, tc.path, tc.headers, got.code, got.echo.Name, tc.want)
			}
		}
	})

	t.Run("hosts and fronts", func(t *testing.T) {
		for _, tc := range []struct{ addr, host, want string }{
			{a, "app.example.com", "prefix"}, // "/match/y" below
			{b, "app.example.com", "front-b"},
			{a, "x.wild.example.com", "wild"},
			{a, "x.y.wild.example.com", "wild"}, // a Gateway wildcard matches any number of labels
			{a, "x.b.wild.example.com", "wild-b"},
			{a, "y.x.b.wild.example.com", "wild-b"},
			{a, "b.wild.example.com", "wild"},
			{a, "wild.example.com", "front-a-default"},
			{a, "other.example.com", "front-a-default"},
			{b, "other.example.com", ""}, // B has no "_": 404
		} {
			got := sendGateway(t, gatewayRequest{addr: tc.addr, host: tc.host, path: "/match/y"})
			if tc.want == "" {
				if got.code != http.StatusNotFound {
					t.Errorf("%s on %s: %d %q, want 404", tc.host, tc.addr, got.code, got.echo.Name)
				}
				continue
			}
			if got.code != http.StatusOK || got.echo.Name != tc.want {
				t.Errorf("%s on %s: %d %q, want 200 %q", tc.host, tc.addr, got.code, got.echo.Name, tc.want)
			}
		}
		// The Ingress server does not see the fronts' routes, nor they its.
		if code, body := dp.get(t, "app.example.com", "/match"); code != http.StatusOK || !strings.Contains(body, `"ingress"`) {
			t.Errorf("the Ingress host app.example.com on the default server: %d %s, want the Ingress's backend", code, body)
		}
	})

	t.Run("request and response headers", func(t *testing.T) {
		got := sendGateway(t, gatewayRequest{addr: a, host: "app.example.com", path: "/request-headers",
			headers: map[string]string{"X-Set": "old", "X-Add": "first", "X-Remove": "gone", "X-Other": "kept"}})
		h := got.echo.Headers
		if got.code != http.StatusOK || h.Get("X-Set") != "set" || strings.Join(h.Values("X-Add"), ",") != "first,added" ||
			h.Get("X-Remove") != "" || h.Get("X-Other") != "kept" {
			t.Errorf("request headers: %d %v, want X-Set set, X-Add first,added, no X-Remove, X-Other kept", got.code, h)
		}
		got = sendGateway(t, gatewayRequest{addr: a, host: "app.example.com", path: "/response-headers?set-header=X-Remove"})
		if got.code != http.StatusOK || got.header.Get("X-Set") != "set" || got.header.Get("X-Add") != "added" || got.header.Get("X-Remove") != "" {
			t.Errorf("response headers: %d %v, want X-Set, X-Add and no X-Remove (the backend set it)", got.code, got.header)
		}
		got = sendGateway(t, gatewayRequest{addr: a, host: "app.example.com", path: "/match/y"})
		if got.header.Get("X-Set") != "" {
			t.Errorf("a location without response headers got %v", got.header)
		}
	})

	t.Run("redirects", func(t *testing.T) {
		port := strconv.Itoa(portHTTP)
		for _, tc := range []struct {
			addr     string
			https    bool
			path     string
			code     int
			location string
		}{
			// No scheme, no port: the listener's port (not 80 here).
			{a, false, "/redirect-host/x?y=1", 302, "http://example.org:" + port + "/redirect-host/x?y=1"},
			{a, false, "/redirect-301", 301, "http://example.org:" + port + "/redirect-301"},
			{a, false, "/redirect-303", 303, "http://app.example.com:" + port + "/redirect-303"},
			{a, false, "/redirect-307", 307, "http://app.example.com:" + port + "/redirect-307"},
			{a, false, "/redirect-308", 308, "http://app.example.com:" + port + "/redirect-308"},
			// A scheme without a port: the scheme's own, left out.
			{a, false, "/scheme-https", 302, "https://example.org/scheme-https"},
			{a, false, "/scheme-https-8443", 302, "https://example.org:8443/scheme-https-8443"},
			{a, false, "/port-80", 302, "http://example.org/port-80"},
			{a, false, "/port-8080", 302, "http://example.org:8080/port-8080"},
			{a, false, "/full-path/x?k=v", 302, "http://app.example.com:" + port + "/replaced?k=v"},
			{a, false, "/prefix-path/lemon", 302, "http://app.example.com:" + port + "/new-prefix/lemon"},
			{a, false, "/prefix-path", 302, "http://app.example.com:" + port + "/new-prefix"},
			// On the HTTPS listener the scheme stays https.
			{c, true, "/redirect", 302, "https://example.org:" + strconv.Itoa(portHTTPS) + "/redirect"},
		} {
			host := "app.example.com"
			if tc.https {
				host = "secure.example.com"
			}
			got := sendGateway(t, gatewayRequest{addr: tc.addr, https: tc.https, host: host, path: tc.path})
			if got.code != tc.code || got.location != tc.location {
				t.Errorf("%s: %d %q, want %d %q", tc.path, got.code, got.location, tc.code, tc.location)
			}
		}
	})

	t.Run("rewrites", func(t *testing.T) {
		for _, tc := range []struct{ path, uri, host string }{
			{"/rewrite-prefix/two?x=1", "/one/two?x=1", "app.example.com"},
			{"/rewrite-prefix", "/one", "app.example.com"},
			{"/strip/three", "/three", "app.example.com"},
			{"/strip", "/", "app.example.com"},
			{"/rewrite-full/a/b?q=1", "/full?q=1", "rewritten.example.com"},
		} {
			got := sendGateway(t, gatewayRequest{addr: a, host: "app.example.com", path: tc.path})
			if got.code != http.StatusOK || got.echo.URI != tc.uri || got.echo.Host != tc.host {
				t.Errorf("%s: %d %q Host %q, want %q Host %q", tc.path, got.code, got.echo.URI, got.echo.Host, tc.uri, tc.host)
			}
		}
	})

	t.Run("weights", func(t *testing.T) {
		const n = 400
		counts := map[string]int{}
		for range n {
			got := sendGateway(t, gatewayRequest{addr: a, host: "app.example.com", path: "/weights"})
			switch got.code {
			case http.StatusOK:
				counts[got.echo.Name]++
			case http.StatusInternalServerError:
				counts["500"]++
			default:
				t.Fatalf("/weights answered %d", got.code)
			}
		}
		// Weights 3, 1 (no backend: 500) and 0: a quarter of 500s, within
		// a wide margin (p < 1e-6 to fail by chance), none to the 0 share.
		if counts["never"] != 0 || counts["500"] < 50 || counts["500"] > 160 || counts["heavy"]+counts["500"] != n {
			t.Errorf("weights 3, 1 (500), 0 over %d requests: %v", n, counts)
		}
		if got := sendGateway(t, gatewayRequest{addr: a, host: "app.example.com", path: "/no-backend"}); got.code != http.StatusInternalServerError {
			t.Errorf("a rule answering 500 answered %d", got.code)
		}
	})

	t.Run("HTTPS listener: the front's certificate by SNI", func(t *testing.T) {
		dp.pushCerts(t, []luaapi.CertificatePayload{
			upsertOf("gw/secure", newTestCert(t, 2901, "secure.example.com"), model.FrontKey(model.FrontName(gatewayAddrA, int32(portHTTPS)), "secure.example.com")),
			upsertOf("gw/default", newTestCert(t, 2902, "gateway.example.com"), model.FrontKey(model.FrontName(gatewayAddrA, int32(portHTTPS)), "*")),
			// An Ingress certificate of the same name: never on the front.
			upsertOf("ns/ingress", newTestCert(t, 2903, "secure.example.com"), "secure.example.com"),
		}, nil)
		for _, tc := range []struct{ addr, sni, want string }{
			{c, "secure.example.com", "2901"},
			{c, "other.example.com", "2902"},
			{c, "", "2902"},
			{fmt.Sprintf("127.0.0.1:%d", settings.HTTPSPort), "secure.example.com", "2903"},
		} {
			if got := served(leafAt(t, tc.addr, tc.sni)); got != tc.want {
				t.Errorf("SNI %q on %s: certificate %s, want %s", tc.sni, tc.addr, got, tc.want)
			}
		}
		got := sendGateway(t, gatewayRequest{addr: c, https: true, host: "secure.example.com", path: "/"})
		if got.code != http.StatusOK || got.echo.Name != "secure" {
			t.Errorf("https://secure.example.com/ on %s: %d %q, want secure", c, got.code, got.echo.Name)
		}
	})

	t.Run("a new rule is a routes push, no reload", func(t *testing.T) {
		before := dp.status(t)
		next := gatewayRoutesModel(portHTTP, portHTTPS)
		r := next.GatewayRoutes.At(0)
		r.Locations = append([]model.RouteLocation{{Path: "/added", Backend: "ns/added:80"}}, r.Locations...)
		nextCfg, err := Render(next, settings)
		if err != nil {
			t.Fatal(err)
		}
		if nextCfg.Hash != cfg.Hash {
			t.Fatal("a route's new location changed nginx.conf")
		}
		dp.pushRoutes(t, next)
		got := sendGateway(t, gatewayRequest{addr: a, host: "app.example.com", path: "/added/x"})
		if got.code != http.StatusOK || got.echo.Name != "added" {
			t.Errorf("/added after the push: %d %q", got.code, got.echo.Name)
		}
		after := dp.status(t)
		if after.ConfigHash != before.ConfigHash || after.BootID != before.BootID {
			t.Errorf("status moved from %+v to %+v", before, after)
		}
	})

	t.Run("the routes read back as pushed", func(t *testing.T) {
		code, reply := dp.api(t, http.MethodGet, "/routes", nil)
		if code != http.StatusOK {
			t.Fatalf("GET /routes: %d %s", code, reply)
		}
		var body struct{ Routes []luaapi.RoutePayload }
		if err := json.Unmarshal(reply, &body); err != nil {
			t.Fatal(err)
		}
		held := map[string]model.Route{}
		for _, r := range body.Routes {
			held[r.Name] = model.Route{Host: r.Name, HTTPS: r.HTTPS, Locations: r.Locations, Ordered: r.Ordered}
		}
		next := gatewayRoutesModel(portHTTP, portHTTPS)
		next.GatewayRoutes.At(0).Locations = append([]model.RouteLocation{{Path: "/added", Backend: "ns/added:80"}}, next.GatewayRoutes.At(0).Locations...)
		for r := range next.GatewayRoutes.All() {
			h, ok := held[r.Host]
			if !ok || !h.Ordered || len(h.Locations) != len(r.Locations) {
				t.Errorf("route %q: held %+v", r.Host, h)
				continue
			}
			for i := range r.Locations {
				if !h.Locations[i].Equal(r.Locations[i]) {
					t.Errorf("route %q location %d: held %+v, pushed %+v", r.Host, i, h.Locations[i], r.Locations[i])
				}
			}
		}
	})
}

// leafAt is leaf on any address.
func leafAt(t *testing.T, addr, sni string) *x509.Certificate {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{ServerName: sni, InsecureSkipVerify: true})
	if err != nil {
		t.Fatalf("TLS handshake with %s, SNI %q: %v", addr, sni, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

// freeGatewayPort is a port free on gatewayAddrA and gatewayAddrB a
// moment ago.
func freeGatewayPort(t *testing.T) int {
	t.Helper()
	for range 20 {
		l, err := net.Listen("tcp", gatewayAddrA+":0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l2, err := net.Listen("tcp", net.JoinHostPort(gatewayAddrB, strconv.Itoa(port)))
		l.Close()
		if err == nil {
			l2.Close()
			return port
		}
	}
	t.Fatal("no port free on both Gateway addresses")
	return 0
}

// TestDataPlaneGatewayRefused: what is pushed for a Gateway route is
// checked, and a malformed rule is refused with the field and the reason.
func TestDataPlaneGatewayRefused(t *testing.T) {
	dp, _, _ := startDataPlane(t, model.Model{}, nil)
	const front = "127.29.0.1:8080"
	route := func(name, ordered, location string) string {
		return `{"upserts":[{"name":"` + name + `",` + ordered + `"locations":[` + location + `]}]}`
	}
	ok := route(front+" app.example.com", `"ordered":true,`, `{"path":"/","backend":"ns/a:80","rule":{"method":"GET"}}`)
	if code, reply := dp.api(t, http.MethodPost, "/routes", []byte(ok)); code != http.StatusOK {
		t.Fatalf("a good Gateway route: %d %s", code, reply)
	}
	for _, tc := range []struct{ name, body, reason string }{
		{"front without ordered", route(front+" app.example.com", "", `{"path":"/","backend":"ns/a:80"}`), "ordered: a route is ordered exactly when its name has a front"},
		{"ordered without front", route("app.example.com", `"ordered":true,`, `{"path":"/","backend":"ns/a:80"}`), "ordered: a route is ordered exactly"},
		{"bad front", route("host:80 app.example.com", `"ordered":true,`, `{"path":"/","backend":"ns/a:80"}`), "name: a front must be"},
		{"bad host", route(front+" App.example.com", `"ordered":true,`, `{"path":"/","backend":"ns/a:80"}`), "name: must be a lower-case DNS name"},
		{"rule on an Ingress route", route("app.example.com", "", `{"path":"/","backend":"ns/a:80","rule":{}}`), "rule: only in an ordered route's location"},
		{"profile in an ordered route", route(front+" a.example.com", `"ordered":true,`, `{"path":"/","backend":"ns/a:80","profile":"@restysync_p_0123456789abcdef0123456789abcdef"}`), "profile: not in an ordered route's location"},
		{"unknown rule field", route(front+" a.example.com", `"ordered":true,`, `{"path":"/","backend":"ns/a:80","rule":{"mirror":1}}`), "rule.mirror: unknown field"},
		{"method", route(front+" a.example.com", `"ordered":true,`, `{"path":"/","backend":"ns/a:80","rule":{"method":"get"}}`), "rule.method: must be an HTTP method"},
		{"header name", route(front+" a.example.com", `"ordered":true,`, `{"path":"/","backend":"ns/a:80","rule":{"headers":[{"name":"a b","value":"x"}]}}`), "headers[0].name: must be an HTTP header name"},
		{"header value", route(front+" a.example.com", `"ordered":true,`, `{"path":"/","backend":"ns/a:80","rule":{"request_headers":{"set":[{"name":"X","value":"a\r\nInjected: 1"}]}}}`), "request_headers.set[0].value: must not contain control characters"},
		{"regex", route(front+" a.example.com", `"ordered":true,`, `{"path":"/","backend":"ns/a:80","rule":{"query":[{"name":"q","value":"(","regex":true}]}}`), "query[0].value: not a regex PCRE compiles"},
		{"path regex", route(front+" a.example.com", `"ordered":true,`, `{"path":"/a","regex":true,"backend":"ns/a:80"}`), `a regex must start with "^"`},
		{"redirect status", route(front+" a.example.com", `"ordered":true,`, `{"path":"/","rule":{"redirect":{"status":200}}}`), "redirect.status: must be 301, 302, 303, 307 or 308"},
		{"redirect scheme", route(front+" a.example.com", `"ordered":true,`, `{"path":"/","rule":{"redirect":{"scheme":"ftp","status":302}}}`), "redirect.scheme"},
		{"redirect host", route(front+" a.example.com", `"ordered":true,`, `{"path":"/","rule":{"redirect":{"host":"a/b","status":302}}}`), "redirect.host: must be a lower-case DNS name"},
		{"redirect port", route(front+" a.example.com", `"ordered":true,`, `{"path":"/","rule":{"redirect":{"port":70000,"status":302}}}`), "redirect.port"},
		{"redirect path", route(front+" a.example.com", `"ordered":true,`, `{"path":"/","rule":{"redirect":{"path":"x","status":302}}}`), `redirect.path: must start with "/"`},
		{"replace prefix", route(front+" a.example.com", `"ordered":true,`, `{"path":"/","rule":{"rewrite":{"path":"/x","replace_prefix":true}}}`), "rewrite.matched_prefix: must be a string"},
		{"weight", route(front+" a.example.com", `"ordered":true,`, `{"path":"/","rule":{"backends":[{"backend":"ns/a:80","weight":-1}]}}`), "backends[0].weight"},
		{"no backend", route(front+" a.example.com", `"ordered":true,`, `{"path":"/","rule":{"method":"GET"}}`), "backend: must be a string"},
		{"listener of an Ingress route", route("a.example.com", `"listener":"a.example.com",`, `{"path":"/","backend":"ns/a:80"}`), "listener: must be a lower-case DNS name"},
		{"listener not a name", route(front+" a.example.com", `"ordered":true,"listener":"a b",`, `{"path":"/","backend":"ns/a:80"}`), "listener: must be a lower-case DNS name"},
		{"timeout", route(front+" a.example.com", `"ordered":true,`, `{"path":"/","backend":"ns/a:80","rule":{"timeout_ms":-1}}`), "rule.timeout_ms"},
		{"backend header value", route(front+" a.example.com", `"ordered":true,`, `{"path":"/","rule":{"backends":[{"backend":"ns/a:80","weight":1,"request_headers":{"add":[{"name":"X","value":"a\r\nB: 1"}]}}]}}`), "backends[0].request_headers.add[0].value: must not contain control characters"},
		{"cors origin", route(front+" a.example.com", `"ordered":true,`, `{"path":"/","backend":"ns/a:80","rule":{"cors":{"allow_origins":["https://a.com\"; x"],"max_age":5}}}`), "cors.allow_origins[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dp.expectRefused(t, "/routes", tc.body, tc.reason)
		})
	}
	// A certificate's front is checked too.
	c := newTestCert(t, 2910, "a.example.com")
	if code, reply := dp.postCerts(t, []luaapi.CertificatePayload{upsertOf("gw/a", c, "not-a-front a.example.com")}, nil); code != http.StatusBadRequest {
		t.Errorf("a certificate host with a bad front: %d %s, want 400", code, reply)
	}
	if code, reply := dp.postCerts(t, []luaapi.CertificatePayload{upsertOf("gw/a", c, front+" *.a.example.com", front+" *")}, nil); code != http.StatusOK {
		t.Errorf("a front's certificate: %d %s, want 200", code, reply)
	}
}
