package configmap

import (
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
)

// flags are the settings the agent's flags give, the base of every case.
var flags = render.Settings{
	SharedDir: "/srv/restysync", HTTPPort: 80, HTTPSPort: 443, WorkerProcesses: "2",
	HSTS: true, HSTSMaxAge: 31536000, HSTSIncludeSubdomains: true,
	TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
}

// Every supported key is wired: a good value of each reaches the
// settings, and the table below names every key Apply knows.
func TestEveryKeyIsApplied(t *testing.T) {
	all := []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}
	cases := []struct {
		key, value string
		check      func(r Result) bool
	}{
		{"worker-processes", "4", func(r Result) bool { return r.Render.WorkerProcesses == "4" }},
		{"max-worker-connections", "4096", func(r Result) bool { return r.Render.HTTP.MaxWorkerConnections == 4096 }},
		{"keep-alive", "0", func(r Result) bool { return r.Render.HTTP.KeepAlive == 0 }},
		{"keep-alive-requests", "50", func(r Result) bool { return r.Render.HTTP.KeepAliveRequests == 50 }},
		{"upstream-keepalive-connections", "0", func(r Result) bool { return r.Render.HTTP.UpstreamKeepaliveConnections == 0 }},
		{"upstream-keepalive-timeout", "30", func(r Result) bool { return r.Render.HTTP.UpstreamKeepaliveTimeout == 30 }},
		{"proxy-body-size", "8m", func(r Result) bool { return r.Render.HTTP.ClientMaxBodySize == "8m" }},
		{"max-proxy-body-size", "10g", func(r Result) bool { return r.Render.Limits.MaxProxyBodySize == 10<<30 }},
		{"max-client-body-buffer-size", "256k", func(r Result) bool { return r.Render.Limits.MaxClientBodyBufferSize == 256<<10 }},
		{"max-regex-paths-per-host", "20", func(r Result) bool { return r.Render.Limits.MaxRegexPathsPerHost == 20 }},
		{"proxy-connect-timeout", "10", func(r Result) bool { return r.Render.HTTP.ProxyConnectTimeout == 10 }},
		{"proxy-read-timeout", "120", func(r Result) bool { return r.Render.HTTP.ProxyReadTimeout == 120 }},
		{"proxy-send-timeout", "90", func(r Result) bool { return r.Render.HTTP.ProxySendTimeout == 90 }},
		{"proxy-real-ip-cidr", "192.168.0.0/16, 10.1.1.1", func(r Result) bool {
			return slices.Equal(r.Render.TrustedProxies, flags.TrustedProxies) // only with use-forwarded-headers
		}},
		{"use-forwarded-headers", "false", func(r Result) bool { return len(r.Render.TrustedProxies) == 0 }},
		{"forwarded-for-header", "CF-Connecting-IP", func(r Result) bool { return r.Render.HTTP.ForwardedForHeader == "CF-Connecting-IP" }},
		{"compute-full-forwarded-for", "false", func(r Result) bool { return !r.Render.HTTP.ComputeFullForwardedFor }},
		{"enable-access-log", "true", func(r Result) bool { return r.Render.HTTP.AccessLog }},
		{"disable-access-log", "false", func(r Result) bool { return r.Render.HTTP.AccessLog }},
		{"access-log-path", "logs/access.log", func(r Result) bool { return r.Render.HTTP.AccessLogPath == "logs/access.log" }},
		{"error-log-level", "warn", func(r Result) bool { return r.Render.HTTP.ErrorLogLevel == "warn" }},
		{"log-format-upstream", `$remote_addr "$request" $status [$proxy_upstream_name] $req_id`, func(r Result) bool {
			return r.Render.HTTP.LogFormat == `$remote_addr "$request" $status [$restysync_backend] $restysync_request_id`
		}},
		{"log-format-escape-json", "true", func(r Result) bool { return r.Render.HTTP.LogEscape == "json" }},
		{"log-format-escape-none", "true", func(r Result) bool { return r.Render.HTTP.LogEscape == "none" }},
		{"skip-access-log-urls", "/healthz, /metrics?x=1", func(r Result) bool {
			return slices.Equal(r.Render.HTTP.SkipAccessLogURLs, []string{"/healthz", "/metrics?x=1"})
		}},
		{"ssl-protocols", "TLSv1.3 TLSv1.2 TLSv1.3", func(r Result) bool {
			return slices.Equal(r.Render.HTTP.SSLProtocols, []string{"TLSv1.2", "TLSv1.3"})
		}},
		{"ssl-ciphers", "ECDHE+AESGCM:!aNULL", func(r Result) bool { return r.Render.HTTP.SSLCiphers == "ECDHE+AESGCM:!aNULL" }},
		{"hsts", "false", func(r Result) bool { return !r.Render.HSTS }},
		{"hsts-max-age", "600", func(r Result) bool { return r.Render.HSTSMaxAge == 600 }},
		{"hsts-include-subdomains", "false", func(r Result) bool { return !r.Render.HSTSIncludeSubdomains }},
		{"hsts-preload", "true", func(r Result) bool { return r.Render.HSTSPreload }},
		{"proxy-buffering", "on", func(r Result) bool { return r.Render.HTTP.ProxyBuffering }},
		{"use-gzip", "true", func(r Result) bool { return r.Render.HTTP.Gzip }},
		{"gzip-level", "6", func(r Result) bool { return r.Render.HTTP.GzipLevel == 6 }},
		{"gzip-min-length", "1000", func(r Result) bool { return r.Render.HTTP.GzipMinLength == 1000 }},
		{"gzip-types", "text/plain, application/JSON text/html", func(r Result) bool {
			return slices.Equal(r.Render.HTTP.GzipTypes, []string{"text/plain", "application/json"})
		}},
		{"server-tokens", "true", func(r Result) bool { return r.Render.HTTP.ServerTokens }},
		{"custom-http-errors", "503, 404,404", func(r Result) bool { return slices.Equal(r.Render.HTTP.CustomHTTPErrors, []int{404, 503}) }},
		{"service-upstream", "true", func(r Result) bool { return r.ServiceUpstream }},
		{"load-balance", "ewma", func(r Result) bool { return r.LoadBalance == model.AlgorithmEWMA }},
		// ModSecurity, which the model applies (model.ModSecurityGlobal)
		{"enable-modsecurity", "true", func(r Result) bool { return r.Render.ModSecurityGlobal().Enabled }},
		{"enable-owasp-modsecurity-crs", "true", func(r Result) bool { return r.Render.ModSecurityGlobal().CoreRules }},
		// the proxy keys (proxykeys.go)
		{"proxy-buffer-size", "16k", func(r Result) bool { return r.Render.HTTP.ProxyBufferSize == "16k" }},
		{"proxy-buffers-number", "8", func(r Result) bool { return r.Render.HTTP.ProxyBuffersNumber == 8 }},
		{"proxy-busy-buffers-size", "8k", func(r Result) bool { return r.Render.HTTP.ProxyBusyBuffersSize == "8k" }},
		{"proxy-max-temp-file-size", "0", func(r Result) bool { return r.Render.HTTP.ProxyMaxTempFileSize == "0" }},
		{"client-body-buffer-size", "160k", func(r Result) bool { return r.Render.HTTP.ClientBodyBufferSize == "160k" }},
		{"proxy-cookie-domain", "a.internal example.com", func(r Result) bool { return r.Render.HTTP.ProxyCookieDomain == "a.internal example.com" }},
		{"proxy-cookie-path", "off", func(r Result) bool { return r.Render.HTTP.ProxyCookiePath == "off" }},
		{"proxy-redirect-from", "off", func(r Result) bool { return r.Render.HTTP.ProxyRedirectFrom == "off" }},
		{"proxy-redirect-to", "/x", func(r Result) bool { return r.Render.HTTP.ProxyRedirectTo == "" }}, // nothing without a from
		{"limit-rate", "100", func(r Result) bool { return r.Render.HTTP.LimitRate == "100k" }},
		{"limit-rate-after", "0", func(r Result) bool { return r.Render.HTTP.LimitRateAfter == "0" }},
	}
	var tested []string
	for _, tc := range cases {
		tested = append(tested, tc.key)
		t.Run(tc.key, func(t *testing.T) {
			r := Apply(flags, "ingress", "restysync", map[string]string{tc.key: tc.value})
			if len(r.Problems) != 0 {
				t.Fatalf("problems: %v", r.Problems)
			}
			if want := []Key{{Key: tc.key, Status: StatusSupported}}; !reflect.DeepEqual(r.Keys, want) {
				t.Errorf("keys %v, want %v", r.Keys, want)
			}
			if !tc.check(r) {
				t.Errorf("%s: %q is not in the settings: %+v %+v", tc.key, tc.value, r.Render, *r.Render.HTTP)
			}
			if _, err := render.Render(model.Model{}, r.Render); err != nil {
				t.Errorf("the settings do not render: %v", err)
			}
		})
	}
	if !slices.Equal(tested, SupportedKeys()) {
		t.Errorf("keys tested %v\nwant every supported key, in order: %v", tested, SupportedKeys())
	}

	// use-forwarded-headers true trusts proxy-real-ip-cidr, else the
	// flag's networks, else everyone.
	for _, tc := range []struct {
		base render.Settings
		data map[string]string
		want []netip.Prefix
	}{
		{flags, map[string]string{"use-forwarded-headers": "true"}, flags.TrustedProxies},
		{render.Settings{}, map[string]string{"use-forwarded-headers": "true"}, all},
		{flags, map[string]string{"use-forwarded-headers": "true", "proxy-real-ip-cidr": "192.168.0.0/16,10.1.1.1"},
			[]netip.Prefix{netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("10.1.1.1/32")}},
	} {
		if got := Apply(tc.base, "ns", "cm", tc.data).Render.TrustedProxies; !slices.Equal(got, tc.want) {
			t.Errorf("%v over %v: trusted %v, want %v", tc.data, tc.base.TrustedProxies, got, tc.want)
		}
	}
}

// A bad value is a Problem naming the ConfigMap and the key, and keeps
// that setting's default; the other keys still apply.
func TestBadValuesKeepTheDefault(t *testing.T) {
	bad := map[string]string{
		"worker-processes":               "0",
		"max-worker-connections":         "10",
		"keep-alive":                     "-1",
		"keep-alive-requests":            "1e3",
		"upstream-keepalive-connections": "lots",
		"upstream-keepalive-timeout":     "0",
		"proxy-body-size":                "1t",
		"proxy-connect-timeout":          "76",
		"proxy-read-timeout":             "10s",
		"proxy-send-timeout":             " ",
		"proxy-real-ip-cidr":             "10.0.0.0/33",
		"use-forwarded-headers":          "yes",
		"forwarded-for-header":           "X-Forwarded-For\nX: y",
		"compute-full-forwarded-for":     "maybe",
		"enable-access-log":              "on",
		"access-log-path":                "/etc/passwd",
		"error-log-level":                "verbose",
		"log-format-upstream":            "$remote_addr $secret_variable",
		"log-format-escape-json":         "sure",
		"skip-access-log-urls":           "/ok, /a$host",
		"ssl-protocols":                  "SSLv3 TLSv1.2",
		"ssl-ciphers":                    "HIGH;include /etc/x",
		"hsts":                           "1x",
		"hsts-max-age":                   "99999999999",
		"hsts-include-subdomains":        "",
		"hsts-preload":                   "Y",
		"use-gzip":                       "si",
		"gzip-level":                     "10",
		"gzip-min-length":                "-5",
		"gzip-types":                     "text/$x",
		"server-tokens":                  "on",
		"custom-http-errors":             "404,200",
		"load-balance":                   "least_conn",
	}
	good := map[string]string{"disable-access-log": "false"}
	data := map[string]string{}
	for k, v := range bad {
		data[k] = v
	}
	for k, v := range good {
		data[k] = v
	}
	r := Apply(flags, "ingress", "restysync", data)
	def := Apply(flags, "ingress", "restysync", nil)

	problems := map[string]string{}
	for _, p := range r.Problems {
		if p.Kind != "ConfigMap" || p.Namespace != "ingress" || p.Name != "restysync" {
			t.Errorf("problem %v does not name ConfigMap ingress/restysync", p)
		}
		key, reason, _ := strings.Cut(strings.TrimPrefix(p.Reason, "key "), ": ")
		problems[key] = reason
	}
	for k := range bad {
		if problems[k] == "" {
			t.Errorf("%s %q: no problem", k, bad[k])
		} else if !strings.Contains(problems[k], "default is kept") {
			t.Errorf("%s: reason %q does not say the default is kept", k, problems[k])
		}
	}
	if len(problems) != len(bad) {
		t.Errorf("%d problems for %d bad keys: %v", len(problems), len(bad), problems)
	}
	for _, k := range r.Keys {
		want := StatusInvalid
		if _, ok := good[k.Key]; ok {
			want = StatusSupported
		}
		if k.Status != want {
			t.Errorf("key %s: %s, want %s", k.Key, k.Status, want)
		}
	}
	// The good key applied; the bad ones left the defaults.
	wantHTTP := *def.Render.HTTP
	wantHTTP.AccessLog = true
	if !reflect.DeepEqual(*r.Render.HTTP, wantHTTP) {
		t.Errorf("settings %+v\nwant the defaults with the access log on %+v", *r.Render.HTTP, wantHTTP)
	}
	if r.Render.WorkerProcesses != "2" || !r.Render.HSTS || r.Render.HSTSMaxAge != flags.HSTSMaxAge || r.LoadBalance != "" {
		t.Errorf("bad keys changed the flags' settings: %+v, load-balance %q", r.Render, r.LoadBalance)
	}
	if _, err := render.Render(model.Model{}, r.Render); err != nil {
		t.Errorf("the settings do not render: %v", err)
	}
}

func TestUnknownAndRefusedKeys(t *testing.T) {
	r := Apply(flags, "ns", "cm", map[string]string{
		"use-gzip": "true", "http-snippet": "location /x {}", "enable-brotli": "true", "allow-snippet-annotations": "true",
	})
	want := []Key{
		{Key: "allow-snippet-annotations", Status: StatusSupported},
		{Key: "enable-brotli", Status: StatusUnknown},
		{Key: "http-snippet", Status: StatusRefused}, // a location block: server-snippet annotations only
		{Key: "use-gzip", Status: StatusSupported},
	}
	if len(r.Keys) != len(want) {
		t.Fatalf("keys %v", r.Keys)
	}
	for i, k := range r.Keys {
		if k.Key != want[i].Key || k.Status != want[i].Status || (k.Status != StatusSupported) != (k.Reason != "") {
			t.Errorf("key %d: %+v, want %+v with a reason unless supported", i, k, want[i])
		}
	}
	if len(r.Problems) != 2 || !r.Render.HTTP.Gzip {
		t.Errorf("problems %v, gzip %t", r.Problems, r.Render.HTTP.Gzip)
	}
}

// Without a ConfigMap the flags are the settings, and the defaults render
// the nginx.conf a nil HTTP renders.
func TestNoConfigMapIsTheFlags(t *testing.T) {
	r := Apply(flags, "ns", "cm", nil)
	if len(r.Problems) != 0 || len(r.Keys) != 0 || r.LoadBalance != "" {
		t.Fatalf("%+v", r)
	}
	withHTTP, err := render.Render(model.Model{}, r.Render)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := render.Render(model.Model{}, flags)
	if err != nil {
		t.Fatal(err)
	}
	if withHTTP.Hash != plain.Hash {
		t.Error("the defaults render another nginx.conf than no ConfigMap")
	}
	if flags.HTTP != nil {
		t.Error("Apply changed its base")
	}
}

func TestAccessLogKeys(t *testing.T) {
	for _, tc := range []struct {
		data map[string]string
		on   bool
		bad  bool
	}{
		{map[string]string{}, false, false},
		{map[string]string{"disable-access-log": "false"}, true, false},
		{map[string]string{"disable-access-log": "true"}, false, false},
		{map[string]string{"enable-access-log": "true"}, true, false},
		{map[string]string{"enable-access-log": "true", "disable-access-log": "false"}, true, false},
		{map[string]string{"enable-access-log": "true", "disable-access-log": "true"}, true, true},
	} {
		r := Apply(flags, "ns", "cm", tc.data)
		if r.Render.HTTP.AccessLog != tc.on || (len(r.Problems) > 0) != tc.bad {
			t.Errorf("%v: access log %t, problems %v; want %t, problem %t", tc.data, r.Render.HTTP.AccessLog, r.Problems, tc.on, tc.bad)
		}
	}
}

// FuzzApply: whatever a ConfigMap holds, the settings it gives render,
// and every value that is not applied is a Problem.
func FuzzApply(f *testing.F) {
	f.Add("log-format-upstream", `$remote_addr "$request"`, "gzip-types", "text/plain")
	f.Add("ssl-ciphers", "HIGH:!aNULL", "custom-http-errors", "404,503")
	f.Add("forwarded-for-header", "X-Real-IP", "access-log-path", "logs/a.log")
	f.Add("proxy-body-size", "0", "log-format-upstream", "${http_x}'")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		r := Apply(flags, "ns", "cm", map[string]string{k1: v1, k2: v2})
		if _, err := render.Render(model.Model{}, r.Render); err != nil {
			t.Fatalf("%q=%q %q=%q: the settings do not render: %v", k1, v1, k2, v2, err)
		}
		bad := 0
		for _, k := range r.Keys {
			if k.Status != StatusSupported {
				bad++
			}
		}
		if bad != len(r.Problems) {
			t.Fatalf("%d keys not applied, %d problems", bad, len(r.Problems))
		}
	})
}

func TestGlobalAuthKeys(t *testing.T) {
	r := Apply(render.Settings{}, "ingress", "restysync", map[string]string{
		"global-auth-url":              "https://$host/oauth2/auth",
		"global-auth-signin":           "https://$host/oauth2/start",
		"global-auth-response-headers": "X-Auth-Request-User",
		"global-auth-method":           "BREW",
	})
	if r.GlobalAuthDenied != "" || r.GlobalAuth.URL != "https://${host}/oauth2/auth" || r.GlobalAuth.ResponseHeaders != "X-Auth-Request-User" ||
		!strings.HasPrefix(r.GlobalAuth.Signin, "https://${host}/oauth2/start?rd=") {
		t.Errorf("global auth %+v (denied %q)", r.GlobalAuth, r.GlobalAuthDenied)
	}
	statuses := map[string]string{}
	for _, k := range r.Keys {
		statuses[k.Key] = k.Status
	}
	if statuses["global-auth-url"] != StatusSupported || statuses["global-auth-method"] != StatusInvalid {
		t.Errorf("statuses %v", statuses)
	}
	if len(r.Problems) != 1 || !strings.Contains(r.Problems[0].Reason, "global-auth-method") {
		t.Errorf("problems %v, want one about global-auth-method", r.Problems)
	}
	bad := Apply(render.Settings{}, "ingress", "restysync", map[string]string{"global-auth-url": `http://a/";`})
	if bad.GlobalAuthDenied == "" || bad.GlobalAuth.URL != "" {
		t.Errorf("a bad global-auth-url: %+v denied %q, want every guarded Ingress closed", bad.GlobalAuth, bad.GlobalAuthDenied)
	}
}

// modsecurity-snippet is refused with a reason of its own: ModSecurity
// rules, not nginx directives, and the flag that does what most of them do.
func TestModSecuritySnippetRefused(t *testing.T) {
	r := Apply(flags, "ns", "cm", map[string]string{"modsecurity-snippet": "SecRuleEngine On", "enable-modsecurity": "true"})
	want := []Key{{Key: "enable-modsecurity", Status: StatusSupported}, {Key: "modsecurity-snippet", Status: StatusRefused}}
	if len(r.Keys) != 2 || r.Keys[0] != want[0] || r.Keys[1].Status != StatusRefused ||
		!strings.Contains(r.Keys[1].Reason, "ModSecurity rules are refused") || !strings.Contains(r.Keys[1].Reason, "--modsecurity-rule-engine On") {
		t.Errorf("keys %+v, want %+v with ModSecurity's reason", r.Keys, want)
	}
	if len(r.Problems) != 1 || !r.Render.ModSecurity.Enable {
		t.Errorf("problems %v, enable-modsecurity %t", r.Problems, r.Render.ModSecurity.Enable)
	}
}
