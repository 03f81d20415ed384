package render

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// configMapCases are golden cases of the http settings the agent's
// ConfigMap sets (Settings.HTTP).
func configMapCases() []goldenCase {
	every := DefaultHTTP()
	every.MaxWorkerConnections = 4096
	every.KeepAlive = 30
	every.KeepAliveRequests = 50
	every.UpstreamKeepaliveConnections = 0 // off: no keepalive line
	every.ClientMaxBodySize = "8m"
	every.ProxyConnectTimeout, every.ProxyReadTimeout, every.ProxySendTimeout = 3, 120, 90
	every.ForwardedForHeader = "X-Real-IP"
	every.ComputeFullForwardedFor = false
	every.AccessLog = true
	every.ErrorLogLevel = "warn"
	every.LogFormat = `$remote_addr "$request" $status ${restysync_backend} $http_user_agent`
	every.SSLProtocols = []string{"TLSv1.3"}
	every.SSLCiphers = "ECDHE+AESGCM:!aNULL"
	every.Gzip, every.GzipLevel, every.GzipMinLength = true, 5, 100
	every.GzipTypes = []string{"text/plain", "application/json"}
	every.ServerTokens = true
	every.ProxyBuffering = true
	every.CustomHTTPErrors = []int{404, 503}
	everySettings := goldenSettings
	everySettings.HTTP = &every
	everySettings.WorkerProcesses = "3"
	// use-forwarded-headers without a list: everyone, as geo's default.
	everySettings.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0"), netip.MustParsePrefix("10.0.0.0/8")}

	noDefault := DefaultHTTP()
	noDefault.ForwardedForHeader = "CF-Connecting-IP"
	noDefault.AccessLog = true
	noDefault.AccessLogPath = "logs/access.log"
	noDefault.CustomHTTPErrors = []int{502}
	noDefaultSettings := goldenSettings
	noDefaultSettings.HTTP = &noDefault

	return []goldenCase{
		{name: "configmap-every-key", settings: everySettings, model: model.Model{
			Default: model.Server{Locations: []model.Location{loc("/", model.PathPrefix, "default/errors:80")}},
			Servers: model.ListOf(&model.Server{Host: "app.example.com", Locations: []model.Location{loc("/", model.PathPrefix, "default/web:80")}}),
		}},
		{name: "configmap-errors-without-default-backend", settings: noDefaultSettings, model: model.Model{
			Servers: model.ListOf(&model.Server{Host: "app.example.com", Locations: []model.Location{loc("/api", model.PathPrefix, "default/api:80")}}),
		}},
	}
}

func TestRenderConfigMapGolden(t *testing.T) {
	for _, tc := range configMapCases() {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Render(tc.model, tc.settings)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", tc.name+".conf")
			if *update {
				if err := os.WriteFile(path, cfg.Bytes, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(cfg.Bytes, want) {
				t.Errorf("nginx.conf differs from %s (go test -update rewrites it):\n%s", path, lineDiff(string(want), string(cfg.Bytes)))
			}
		})
	}
	cfg, err := Render(configMapCases()[0].model, configMapCases()[0].settings)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"worker_connections 4096;",
		"worker_rlimit_nofile 8192;", // twice max-worker-connections
		`log_format restysync_upstream '$remote_addr "$request" $status ${restysync_backend} $http_user_agent';`,
		"server_tokens on;",
		"keepalive_timeout 30s;",
		`client_max_body_size "8m";`,
		`gzip_types "text/plain" "application/json";`,
		`map "$restysync_trusted_proxy:$http_x_real_ip" $restysync_forwarded_for {`,
		"proxy_read_timeout 120s;",
		"grpc_send_timeout 90s;",
		"ssl_protocols TLSv1.3;",
		"default 1;\n        \"10.0.0.0/8\" 1;\n    }",
		"error_page 503 @restysync_error_503;",
		`set $restysync_backend "default/errors:80";`,
	} {
		if !bytes.Contains(cfg.Bytes, []byte(line)) {
			t.Errorf("nginx.conf lacks %s", line)
		}
	}
	if bytes.Contains(cfg.Bytes, []byte("        keepalive ")) {
		t.Error("upstream keepalive 0 still renders a keepalive line")
	}
}

// nginx takes every golden ConfigMap case without a warning.
func TestRenderConfigMapNginxAccepts(t *testing.T) {
	nginxproc.Binary(t)
	for _, tc := range configMapCases() {
		t.Run(tc.name, func(t *testing.T) {
			prefix := nginxproc.TempPrefix(t)
			s := tc.settings
			s.SharedDir = prefix
			s.LoadModules = nginxproc.DebianLoadModules()
			writePrefix(t, prefix, tc.model, s)
			out, err := nginxproc.Test(t, prefix)
			if err != nil {
				t.Fatal(err)
			}
			checkNoWarnings(t, out)
		})
	}
}

// Render is the last guard: settings no ConfigMap parser should let
// through are refused, never written.
func TestRenderConfigMapRefusesHostileSettings(t *testing.T) {
	for name, edit := range map[string]func(*HTTP){
		"log format quote":        func(h *HTTP) { h.LogFormat = `$status'; include /etc/passwd; #` },
		"log format backslash":    func(h *HTTP) { h.LogFormat = `$status\` },
		"log format variable":     func(h *HTTP) { h.LogFormat = `$status $secret` },
		"log format newline":      func(h *HTTP) { h.LogFormat = "$status\n}" },
		"log format bare dollar":  func(h *HTTP) { h.LogFormat = "cost: $" },
		"ciphers":                 func(h *HTTP) { h.SSLCiphers = "HIGH; include x" },
		"protocol":                func(h *HTTP) { h.SSLProtocols = []string{"TLSv1.2;"} },
		"no protocol":             func(h *HTTP) { h.SSLProtocols = nil },
		"gzip type":               func(h *HTTP) { h.GzipTypes = []string{"text/$host"} },
		"body size":               func(h *HTTP) { h.ClientMaxBodySize = "1m; x" },
		"header":                  func(h *HTTP) { h.ForwardedForHeader = "X-A B" },
		"access log path":         func(h *HTTP) { h.AccessLogPath = "/etc/shadow" },
		"access log path escapes": func(h *HTTP) { h.AccessLogPath = "logs/../../x" },
		"error code":              func(h *HTTP) { h.CustomHTTPErrors = []int{200} },
		"error log level":         func(h *HTTP) { h.ErrorLogLevel = "notice; x" },
		"connections":             func(h *HTTP) { h.MaxWorkerConnections = 0 },
		"gzip level":              func(h *HTTP) { h.GzipLevel = 0 },
	} {
		t.Run(name, func(t *testing.T) {
			h := DefaultHTTP()
			edit(&h)
			s := goldenSettings
			s.HTTP = &h
			if _, err := Render(model.Model{}, s); err == nil || !strings.Contains(err.Error(), "ConfigMap settings") {
				t.Errorf("rendered, or failed for another reason: %v", err)
			}
		})
	}
}

// A nil HTTP renders exactly DefaultHTTP.
func TestRenderNilHTTPIsDefault(t *testing.T) {
	h := DefaultHTTP()
	s := goldenSettings
	s.HTTP = &h
	a, err := Render(model.Model{}, goldenSettings)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Render(model.Model{}, s)
	if err != nil {
		t.Fatal(err)
	}
	if a.Hash != b.Hash {
		t.Error("DefaultHTTP renders another nginx.conf than a nil HTTP")
	}
}
