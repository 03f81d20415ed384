package configmap

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
	"github.com/restysync/restysync/lua"
)

// nginxValues are values of the keys nginx parses: good ones at the edges
// and ones nginx refuses. A value marked "!" must be invalid.
var nginxValues = map[string][]string{
	"worker-processes":               {"1", "auto", "!0", "!x"},
	"max-worker-connections":         {"1024", "16384", "!10"},
	"keep-alive":                     {"0", "75", "!-1"},
	"keep-alive-requests":            {"1", "100000", "!1e3"},
	"upstream-keepalive-connections": {"0", "320"},
	"upstream-keepalive-timeout":     {"1", "60", "!0"},
	"proxy-body-size":                {"0", "1m", "8M", "1g", "10k", "!1t", "!1.5m", "!m"},
	"proxy-connect-timeout":          {"1", "60", "75", "!76", "!10s"},
	"proxy-read-timeout":             {"1", "3600", "!10s"},
	"proxy-send-timeout":             {"1", "3600", "!-1"},
	"proxy-real-ip-cidr":             {"10.0.0.0/8,fd00::/8", "1.2.3.4", "!10.0.0.0/33"},
	"use-forwarded-headers":          {"true", "false", "!yes"},
	"forwarded-for-header":           {"X-Real-IP", "CF-Connecting-IP", "!X-A\u0085", "!X\u202eA"},
	"compute-full-forwarded-for":     {"true", "false"},
	"enable-access-log":              {"true", "false"},
	"log-format-upstream":            {`$remote_addr - $status`, `$time_iso8601 "$request" $request_time`, "!$status\u2028"},
	"ssl-protocols":                  {"TLSv1.2 TLSv1.3", "TLSv1", "TLSv1.1 TLSv1.2", "!SSLv3", "!TLSv1.4"},
	"ssl-ciphers": {"HIGH:!aNULL:!MD5", "DEFAULT", "ECDHE+AESGCM:@SECLEVEL=1", "HIGH:@STRENGTH", "EECDH+AESGCM:EDH+AESGCM",
		"!NOTACIPHER", "!RC4", "!HIGH:-ALL", "!TLS_AES_128_GCM_SHA256", "!HIGH:@SECLEVEL=9", "!HIGH;AES"},
	"hsts":                     {"true", "false"},
	"hsts-max-age":             {"0", "31536000", "!-1"},
	"hsts-include-subdomains":  {"true", "false"},
	"hsts-preload":             {"true", "false"},
	"proxy-buffering":          {"on", "off", "!true"},
	"use-gzip":                 {"true", "false"},
	"gzip-level":               {"1", "9", "!0", "!10"},
	"gzip-min-length":          {"0", "20", "1000000", "!-5"},
	"gzip-types":               {"text/plain application/json", "*", "!text/$x"},
	"server-tokens":            {"true", "false"},
	"custom-http-errors":       {"404,503", "300,599", "404 , 502", "!499", "!404,499", "!600", "!299"},
	"proxy-buffer-size":        {"4k", "16k", "1m", "!0", "!x"},
	"proxy-buffers-number":     {"3", "4", "8", "!2", "!1", "!0"},
	"proxy-busy-buffers-size":  {"8k", "!1t"},
	"proxy-max-temp-file-size": {"0", "1024m", "!-1"},
	"client-body-buffer-size":  {"8k", "1m", "!x"},
	"proxy-cookie-domain":      {"off", "a.internal example.com", "!a\u0085 b"},
	"proxy-cookie-path":        {"off", "/a /b"},
	"proxy-redirect-from":      {"off", "http://a/", "default"},
	"limit-rate":               {"0", "100", "1000000", "!100k", "!1x"},
	"limit-rate-after":         {"0", "10", "!10m"},
	"http-snippet":             {`add_header X-A "b";`, `more_set_headers "X: y";`, "server_tokens off;", "!add_header X-A \"a\u0085b\";"},
	"server-snippet":           {`add_header X-S "b" always;`, "!add_header X-A \"\xed\xa0\x80\";"},
	"location-snippet":         {`proxy_set_header X-L "b";`, "!proxy_set_header X-L \"a\u2029b\";"},
	"global-auth-url":          {"http://auth.default.svc.cluster.local/verify", "!http://auth\u0085/verify"},
}

// TestValuesNginxAccepts applies each value of nginxValues alone to the
// agent's flags and, when Apply accepts it, renders nginx.conf and runs the
// real `nginx -t` on it: what the ConfigMap check lets through, nginx
// takes. Values marked "!" must be invalid, with a reason.
func TestValuesNginxAccepts(t *testing.T) {
	nginxproc.Binary(t)
	prefix := nginxproc.TempPrefix(t)
	if err := lua.WriteTo(prefix, os.WriteFile); err != nil {
		t.Fatal(err)
	}
	if _, err := render.WriteFallbackCertificate(prefix); err != nil {
		t.Fatal(err)
	}
	base := flags
	base.SharedDir = prefix
	base.LoadModules = nginxproc.DebianLoadModules()
	// An Ingress with a path, so per-location settings and the global
	// snippets and auth are written.
	prefixType := networkingv1.PathTypePrefix
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "app.example.com", IngressRuleValue: networkingv1.IngressRuleValue{
			HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &prefixType,
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}},
		}}}}}
	accepted := 0
	for _, key := range slices.Sorted(maps.Keys(nginxValues)) {
		for _, value := range nginxValues[key] {
			value, wantInvalid := strings.CutPrefix(value, "!")
			t.Run(fmt.Sprintf("%s=%q", key, value), func(t *testing.T) {
				r := Apply(base, "ingress", "restysync", map[string]string{key: value})
				k := keyOf(r.Keys, key)
				if wantInvalid {
					if k.Status != StatusInvalid || k.Reason == "" {
						t.Errorf("status %q (%s), want invalid with a reason", k.Status, k.Reason)
					}
					return
				}
				if k.Status != StatusSupported {
					t.Fatalf("status %q: %s", k.Status, k.Reason)
				}
				m, _ := model.Build(model.Snapshot{Ingresses: model.ListOf(ing), WatchWithoutClass: true,
					GlobalSnippets: r.GlobalSnippets, GlobalAuth: r.GlobalAuth, GlobalAuthDenied: r.GlobalAuthDenied})
				cfg, err := render.Render(m, r.Render)
				if err != nil {
					t.Fatalf("Render refused what Apply accepted: %v", err)
				}
				if err := os.WriteFile(filepath.Join(prefix, render.ConfigName), cfg.Bytes, 0o644); err != nil {
					t.Fatal(err)
				}
				if out, err := nginxproc.Test(t, prefix); err != nil {
					t.Fatalf("nginx -t refused what Apply accepted: %v\n%s", err, out)
				}
				accepted++
			})
		}
	}
	t.Logf("%d accepted values checked by nginx -t", accepted)
}

func keyOf(keys []Key, name string) Key {
	for _, k := range keys {
		if k.Key == name {
			return k
		}
	}
	return Key{}
}
