package render

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
	"github.com/restysync/restysync/templates"
)

// fcgiMirrorModel has a FastCGI location, mirrored ones (with and without
// body, with a variable host) and ones with custom response headers, one
// of them gRPC and one replacing X-Request-ID and HSTS
// (testdata/fcgimirror.conf).
func fcgiMirrorModel() model.Model {
	fcgi := withOptions(withProxy(loc("/", model.PathPrefix, "default/php:9000"), model.ProxySettings{
		FastCGI: model.FastCGI{Index: "index.php",
			Params: "APP_ENV production\nHTTP_PROXY \nSCRIPT_FILENAME ${document_root}${fastcgi_script_name}"},
		ReadTimeout: 30, NextUpstream: "error timeout http_502 http_503", BufferSize: "16k", Buffering: "on",
		ResponseHeaders: "X-Frame-Options: DENY",
	}), false, model.ProtocolFCGI)
	return model.Model{Servers: model.ListOf(&model.Server{
		Host:  "app.example.com",
		HTTPS: true,
		Locations: []model.Location{
			fcgi,
			withProxy(loc("/copy", model.PathPrefix, "default/web:80"), model.ProxySettings{
				Mirror: model.Mirror{Target: "https://test.env.com${request_uri}", Host: "test.env.com"}}),
			withProxy(loc("/copy-head", model.PathPrefix, "default/web:80"), model.ProxySettings{
				Mirror: model.Mirror{Target: "http://${host}/m${is_args}${args}", NoBody: true}}),
			withProxy(loc("/headers", model.PathPrefix, "default/web:80"), model.ProxySettings{
				ResponseHeaders: "Content-Security-Policy: default-src 'self'\nX-Price: costs ${restysync_dollar}5 \"net\" \\o/"}),
			withProxy(loc("/own", model.PathPrefix, "default/web:80"), model.ProxySettings{
				ResponseHeaders: "Strict-Transport-Security: max-age=60\nx-request-id: fixed"}),
			withOptions(withProxy(loc("/grpc.v1.", model.PathRegex, "default/grpc:50051"), model.ProxySettings{
				ResponseHeaders: "X-A: b"}), false, model.ProtocolGRPC),
		},
	})}
}

// TestRenderFastCGIMirrorHeaders compares with testdata/fcgimirror.conf
// (-update rewrites it), looks for the lines that matter, and runs nginx
// -t on it, with HSTS on and off.
func TestRenderFastCGIMirrorHeaders(t *testing.T) {
	cfg, err := Render(fcgiMirrorModel(), goldenSettings)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "fcgimirror.conf")
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
	conf := string(cfg.Bytes)
	for _, line := range []string{
		`fastcgi_pass restysync_upstream;`,
		`fastcgi_index "index.php";`,
		`fastcgi_param "SCRIPT_FILENAME" "${document_root}${fastcgi_script_name}";`,
		`fastcgi_param "QUERY_STRING" "${query_string}";`,
		`fastcgi_param "HTTPS" "${https}" if_not_empty;`,
		`fastcgi_param "HTTP_X_FORWARDED_FOR" "${restysync_forwarded_for}";`,
		`fastcgi_read_timeout 30s;`,
		`fastcgi_next_upstream "error" "timeout" "http_503";`,
		`fastcgi_buffers 4 "16k";`,
		`fastcgi_buffering "on";`,
		`fastcgi_hide_header "X-Frame-Options";`,
		`set $restysync_mirror_target "https://test.env.com${request_uri}";`,
		`mirror /_restysync/mirror;`,
		`mirror_request_body on;`,
		`mirror /_restysync/mirror-without-body;`,
		`mirror_request_body off;`,
		`location = "/_restysync/mirror" {`,
		`location = "/_restysync/mirror-without-body" {`,
		`proxy_pass $restysync_mirror_target;`,
		`add_header "X-Price" "costs ${restysync_dollar}5 \"net\" \\o/" always;`,
		`geo $restysync_dollar {`,
		`add_header "Strict-Transport-Security" "max-age=60" always;`,
		`grpc_hide_header "X-A";`,
	} {
		if !strings.Contains(conf, line) {
			t.Errorf("nginx.conf lacks %s", line)
		}
	}
	// The FastCGI location sends its own HTTP_PROXY, not the standard one
	// too; it has no proxy_* directive of its settings.
	if n := strings.Count(conf, `fastcgi_param "HTTP_PROXY"`); n != 1 {
		t.Errorf("HTTP_PROXY is set %d times, want once", n)
	}
	for _, absent := range []string{`fastcgi_next_upstream "error" "timeout" "http_502"`, `fastcgi_http_version`, `proxy_read_timeout 30s;`} {
		if strings.Contains(conf, absent) {
			t.Errorf("nginx.conf has %s", absent)
		}
	}
	// The profile that sets its own HSTS and X-Request-ID does not repeat
	// the http block's.
	for _, p := range cfg.Profiles {
		if strings.Contains(p.Body, `"max-age=60"`) && (strings.Contains(p.Body, "$restysync_hsts") || strings.Contains(p.Body, "$restysync_request_id")) {
			t.Errorf("a profile with its own HSTS and X-Request-ID repeats the http block's:\n%s", p.Body)
		}
		if strings.Contains(p.Body, `"X-Frame-Options"`) && !strings.Contains(p.Body, "add_header X-Request-ID $restysync_request_id always;") {
			t.Errorf("a profile with custom headers drops the inherited X-Request-ID:\n%s", p.Body)
		}
	}
	// The internal locations the profiles name are those the template writes.
	for _, l := range []string{mirrorLocation, mirrorLocationWithoutBody} {
		if !strings.Contains(templates.NginxConf, `location = "`+l+`" {`) {
			t.Errorf("the template has no location %s", l)
		}
	}

	nginxproc.Binary(t)
	for name, hsts := range map[string]bool{"hsts": true, "no hsts": false} {
		t.Run(name, func(t *testing.T) {
			prefix := nginxproc.TempPrefix(t)
			s := goldenSettings
			s.SharedDir = prefix
			s.LoadModules = nginxproc.DebianLoadModules()
			s.HSTS, s.HSTSMaxAge = hsts, 3600
			s.Resolvers = []string{"127.0.0.53"}
			writePrefix(t, prefix, fcgiMirrorModel(), s)
			out, err := nginxproc.Test(t, prefix)
			if err != nil {
				t.Fatal(err)
			}
			checkNoWarnings(t, out)
		})
	}
}

// Without any mirror or literal "$" the http and server blocks get
// neither the mirror locations nor the geo.
func TestRenderNoMirrorNoDollar(t *testing.T) {
	cfg, err := Render(proxyModel(), goldenSettings)
	if err != nil {
		t.Fatal(err)
	}
	for _, absent := range []string{"_restysync/mirror", "restysync_mirror", "restysync_dollar"} {
		if bytes.Contains(cfg.Bytes, []byte(absent)) {
			t.Errorf("nginx.conf has %s", absent)
		}
	}
}

// A profile kept from an earlier config that names a mirror location
// keeps that location, even when no location of the model mirrors.
func TestRenderKeptMirrorProfile(t *testing.T) {
	first, err := Render(fcgiMirrorModel(), goldenSettings)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Render(proxyModel(), goldenSettings, first.Profiles...)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{`location = "/_restysync/mirror" {`, `location = "/_restysync/mirror-without-body" {`, "geo $restysync_dollar {"} {
		if !bytes.Contains(cfg.Bytes, []byte(line)) {
			t.Errorf("nginx.conf lacks %s, which a kept profile needs", line)
		}
	}
}

// Render refuses what the model would never produce.
func TestRenderFastCGIMirrorHeadersErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		p        model.ProxySettings
		protocol string
	}{
		"param name":          {model.ProxySettings{FastCGI: model.FastCGI{Params: "A;B x"}}, model.ProtocolFCGI},
		"param variable":      {model.ProxySettings{FastCGI: model.FastCGI{Params: "A $x"}}, model.ProtocolFCGI},
		"param quote":         {model.ProxySettings{FastCGI: model.FastCGI{Params: "A \x00"}}, model.ProtocolFCGI},
		"index":               {model.ProxySettings{FastCGI: model.FastCGI{Index: "a b"}}, model.ProtocolFCGI},
		"mirror dollar":       {model.ProxySettings{Mirror: model.Mirror{Target: "http://a/$uri"}}, ""},
		"mirror host":         {model.ProxySettings{Mirror: model.Mirror{Target: "http://a/", Host: "a\nb"}}, ""},
		"header name":         {model.ProxySettings{ResponseHeaders: "X A: b"}, ""},
		"header no colon":     {model.ProxySettings{ResponseHeaders: "X-A"}, ""},
		"header variable":     {model.ProxySettings{ResponseHeaders: "X-A: ${host}"}, ""},
		"header bare dollar":  {model.ProxySettings{ResponseHeaders: "X-A: $host"}, ""},
		"header control char": {model.ProxySettings{ResponseHeaders: "X-A: a\rb"}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			m := model.Model{Servers: model.ListOf(&model.Server{Host: "a.example.com", Locations: []model.Location{
				withOptions(withProxy(loc("/", model.PathPrefix, "ns/a:80"), tc.p), false, tc.protocol),
			}})}
			if _, err := Render(m, goldenSettings); err == nil {
				t.Errorf("Render took %+v", tc.p)
			}
		})
	}
}

// Every hostile value (random_nginx_test.go's hostileValues) as a FastCGI
// parameter's name and value, fastcgi-index, a custom header's name and
// value, mirror-target, mirror-host and mirror-request-body, each on an
// Ingress of its own beside good ones: Build makes a model Render takes,
// and nginx -t takes the config.
func TestFastCGIMirrorHeadersHostileNginxAccepts(t *testing.T) {
	const ns = "default"
	prefixKey := "nginx.ingress.kubernetes.io/"
	port, portName := int32(9000), "http"
	snap := model.Snapshot{
		IngressClass: "restysync",
		IngressClasses: model.ListOf(&networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "restysync"},
			Spec: networkingv1.IngressClassSpec{Controller: model.ControllerName}}),
		Services: model.ListOf(model.ServiceOf(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}})),
		EndpointSlices: model.ListOf(&discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: "web-1", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"127.0.0.1"}}},
		}),
	}
	class := "restysync"
	pathType := networkingv1.PathTypePrefix
	n := 0
	add := func(annotations map[string]string) {
		n++
		snap.Ingresses = model.ListOf(append(snap.Ingresses.Slice(), &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("ing-%d", n), Annotations: annotations},
			Spec: networkingv1.IngressSpec{IngressClassName: &class, Rules: []networkingv1.IngressRule{{
				Host: fmt.Sprintf("h%d.example.com", n),
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
					Path: "/", PathType: &pathType,
					Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web",
						Port: networkingv1.ServiceBackendPort{Name: "http"}}},
				}}}},
			}}},
		})...)
	}
	addConfigMap := func(data map[string]string) string {
		name := fmt.Sprintf("cm-%d", snap.ConfigMaps.Len())
		snap.ConfigMaps = model.ListOf(append(snap.ConfigMaps.Slice(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data})...)
		return name
	}
	values := append([]string{"$document_root$fastcgi_script_name", "index.php", "https://m.test$request_uri", "http://$host/x",
		`default-src 'self' "$x" {y}`, "DENY"}, hostileValues...)
	for _, v := range values {
		fcgi := map[string]string{prefixKey + "backend-protocol": "FCGI"}
		fcgi[prefixKey+"fastcgi-params-configmap"] = addConfigMap(map[string]string{"SCRIPT_FILENAME": v})
		add(fcgi)
		add(map[string]string{prefixKey + "backend-protocol": "FCGI", prefixKey + "fastcgi-params-configmap": addConfigMap(map[string]string{v: "x"})})
		add(map[string]string{prefixKey + "backend-protocol": "FCGI", prefixKey + "fastcgi-index": v})
		add(map[string]string{prefixKey + "custom-headers": addConfigMap(map[string]string{"X-A": v})})
		add(map[string]string{prefixKey + "custom-headers": addConfigMap(map[string]string{v: "b"})})
		add(map[string]string{prefixKey + "mirror-target": v, prefixKey + "mirror-request-body": v})
		add(map[string]string{prefixKey + "mirror-target": "http://m.test/", prefixKey + "mirror-host": v})
	}
	m, _ := model.Build(snap)
	served := 0
	for loc := range m.AllLocations() {
		if loc.AccessSettings().Denied == "" && (loc.ProxySettings().FastCGI.Params != "" || loc.ProxySettings().ResponseHeaders != "" || loc.ProxySettings().Mirror.Target != "") {
			served++
		}
	}
	if served < 10 {
		t.Errorf("only %d locations serve a FastCGI parameter, a custom header or a mirror: the good values are refused", served)
	}

	nginxproc.Binary(t)
	prefix := nginxproc.TempPrefix(t)
	s := goldenSettings
	s.SharedDir = prefix
	s.LoadModules = nginxproc.DebianLoadModules()
	s.HSTS, s.HSTSMaxAge = true, 3600
	cfg := writePrefix(t, prefix, m, s)
	if err := checkLocationTokens(m, cfg.Bytes); err != nil {
		t.Error(err)
	}
	out, err := nginxproc.Test(t, prefix)
	if err != nil {
		t.Fatalf("%v\n%s", err, offendingLines(out, cfg.Bytes))
	}
	checkNoWarnings(t, out)
}
