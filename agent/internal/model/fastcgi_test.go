package model

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const nginxPrefix = "nginx.ingress.kubernetes.io/"

// buildOne builds ing with the ConfigMaps and returns its one location,
// and the problems.
func buildOne(t *testing.T, ing *networkingv1.Ingress, configMaps ...*corev1.ConfigMap) (Location, []Problem) {
	t.Helper()
	s := snapshotOf(ing)
	s.ConfigMaps = ListOf(configMaps...)
	m, problems := Build(s)
	var locs []Location
	for loc := range m.AllLocations() {
		locs = append(locs, *loc)
	}
	if len(locs) != 1 {
		t.Fatalf("locations %v, problems %v", locs, problems)
	}
	return locs[0], problems
}

func configMapOf(namespace, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: data}
}

func annotated(annotations map[string]string) *networkingv1.Ingress {
	opts := []ingressOption{rule("app.example.com", prefix("/", "web", 80))}
	for k, v := range annotations {
		opts = append(opts, annotation(k, v))
	}
	return newIngress("default", "app", opts...)
}

// problemWith fails unless exactly the wanted problems are there: one
// containing want, or none when want is "".
func problemWith(t *testing.T, problems []Problem, want string) {
	t.Helper()
	if want == "" {
		if len(problems) > 0 {
			t.Errorf("unexpected problems %v", problems)
		}
		return
	}
	for _, p := range problems {
		if strings.Contains(p.Reason, want) {
			return
		}
	}
	t.Errorf("no problem says %q: %v", want, problems)
}

func TestFastCGI(t *testing.T) {
	params := configMapOf("default", "fcgi-params", map[string]string{
		"SCRIPT_FILENAME": "$document_root$fastcgi_script_name",
		"APP_ENV":         "production",
		"HTTP_PROXY":      "",
		"PATH_ROOT":       "/srv/app/${uri}",
	})
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		configMaps  []*corev1.ConfigMap
		want        FastCGI
		protocol    string
		denied      bool
		missing     string
		problem     string
	}{{
		name: "ingress-nginx's example",
		annotations: map[string]string{nginxPrefix + "backend-protocol": "FCGI", nginxPrefix + "fastcgi-index": "index.php",
			nginxPrefix + "fastcgi-params-configmap": "fcgi-params"},
		configMaps: []*corev1.ConfigMap{params},
		protocol:   ProtocolFCGI,
		want: FastCGI{Index: "index.php", Params: "APP_ENV production\nHTTP_PROXY \nPATH_ROOT /srv/app/${uri}\n" +
			"SCRIPT_FILENAME ${document_root}${fastcgi_script_name}"},
	}, {
		name:        "namespace/name of its own namespace, lower-case protocol",
		annotations: map[string]string{nginxPrefix + "backend-protocol": "fcgi", "restysync.io/fastcgi-params-configmap": "default/fcgi-params"},
		configMaps:  []*corev1.ConfigMap{params},
		protocol:    ProtocolFCGI,
		want: FastCGI{Params: "APP_ENV production\nHTTP_PROXY \nPATH_ROOT /srv/app/${uri}\n" +
			"SCRIPT_FILENAME ${document_root}${fastcgi_script_name}"},
	}, {
		name:        "FCGI alone: the standard parameters",
		annotations: map[string]string{nginxPrefix + "backend-protocol": "FCGI"},
		protocol:    ProtocolFCGI,
	}, {
		name:        "without FCGI the fastcgi keys do nothing",
		annotations: map[string]string{nginxPrefix + "fastcgi-index": "index.php", nginxPrefix + "fastcgi-params-configmap": "nope"},
	}, {
		name:        "a missing ConfigMap fails closed, as missing-object",
		annotations: map[string]string{nginxPrefix + "backend-protocol": "FCGI", nginxPrefix + "fastcgi-params-configmap": "nope"},
		protocol:    ProtocolFCGI, denied: true, missing: "ConfigMap default/nope", problem: "ConfigMap default/nope not found",
	}, {
		name:        "another namespace fails closed",
		annotations: map[string]string{nginxPrefix + "backend-protocol": "FCGI", nginxPrefix + "fastcgi-params-configmap": "other/fcgi-params"},
		configMaps:  []*corev1.ConfigMap{configMapOf("other", "fcgi-params", map[string]string{"A": "b"})},
		protocol:    ProtocolFCGI, denied: true, problem: "must name a ConfigMap in the Ingress's own namespace",
	}, {
		name:        "a variable not on the list fails closed",
		annotations: map[string]string{nginxPrefix + "backend-protocol": "FCGI", nginxPrefix + "fastcgi-params-configmap": "bad"},
		configMaps:  []*corev1.ConfigMap{configMapOf("default", "bad", map[string]string{"SECRET": "$ssl_client_raw_cert"})},
		protocol:    ProtocolFCGI, denied: true, problem: "variable $ssl_client_raw_cert, which is not allowed",
	}, {
		name:        "an injection in a value fails closed",
		annotations: map[string]string{nginxPrefix + "backend-protocol": "FCGI", nginxPrefix + "fastcgi-params-configmap": "bad"},
		configMaps:  []*corev1.ConfigMap{configMapOf("default", "bad", map[string]string{"A": `x"; } location /x { return 200; #`})},
		protocol:    ProtocolFCGI, denied: true, problem: `parameter "A" has a value with characters`,
	}, {
		name:        "an injection in a name fails closed",
		annotations: map[string]string{nginxPrefix + "backend-protocol": "FCGI", nginxPrefix + "fastcgi-params-configmap": "bad"},
		configMaps:  []*corev1.ConfigMap{configMapOf("default", "bad", map[string]string{"A B;": "x"})},
		protocol:    ProtocolFCGI, denied: true, problem: "is not a parameter name",
	}, {
		name:        "a bad index is a problem, the rest is served",
		annotations: map[string]string{nginxPrefix + "backend-protocol": "FCGI", nginxPrefix + "fastcgi-index": "index.php; return 200"},
		protocol:    ProtocolFCGI, problem: "fastcgi-index",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			loc, problems := buildOne(t, annotated(tc.annotations), tc.configMaps...)
			if loc.Protocol != tc.protocol {
				t.Errorf("protocol %q, want %q", loc.Protocol, tc.protocol)
			}
			if tc.denied != (loc.AccessSettings().Denied != "") {
				t.Errorf("denied %q, want denied %v", loc.AccessSettings().Denied, tc.denied)
			}
			if !tc.denied && loc.ProxySettings().FastCGI != tc.want {
				t.Errorf("FastCGI\n got %+v\nwant %+v", loc.ProxySettings().FastCGI, tc.want)
			}
			if tc.protocol == ProtocolFCGI && loc.Plain() {
				t.Error("an FCGI location is plain: the router would proxy_pass it")
			}
			problemWith(t, problems, tc.problem)
			if tc.missing != "" && (len(problems) != 1 || problems[0].Missing != tc.missing) {
				t.Errorf("want one problem with Missing %q: %+v", tc.missing, problems)
			}
		})
	}
}

func TestMirror(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        Mirror
		problem     string
	}{{
		name:        "ingress-nginx's example",
		annotations: map[string]string{nginxPrefix + "mirror-target": "https://test.env.com$request_uri"},
		want:        Mirror{Target: "https://test.env.com${request_uri}", Host: "test.env.com"},
	}, {
		name: "an address with mirror-host, without body",
		annotations: map[string]string{nginxPrefix + "mirror-target": "http://1.2.3.4:8080/copy$is_args$args",
			nginxPrefix + "mirror-host": "Test.Env.com", nginxPrefix + "mirror-request-body": "off"},
		want: Mirror{Target: "http://1.2.3.4:8080/copy${is_args}${args}", Host: "test.env.com", NoBody: true},
	}, {
		name:        "the host a variable: nginx's Host",
		annotations: map[string]string{nginxPrefix + "mirror-target": "http://$host/mirror$request_uri"},
		want:        Mirror{Target: "http://${host}/mirror${request_uri}"},
	}, {
		name:        "an IPv6 target",
		annotations: map[string]string{nginxPrefix + "mirror-target": "http://[2001:db8::1]:9000/"},
		want:        Mirror{Target: "http://[2001:db8::1]:9000/", Host: "[2001:db8::1]"},
	}, {
		name:        "mirror-request-body is on or off, as ingress-nginx",
		annotations: map[string]string{nginxPrefix + "mirror-target": "http://m.test/", nginxPrefix + "mirror-request-body": "false"},
		want:        Mirror{Target: "http://m.test/", Host: "m.test"}, problem: `is not "on" or "off"`,
	}, {
		name:        "a bad mirror-host is a problem, the target's host is sent",
		annotations: map[string]string{nginxPrefix + "mirror-target": "http://m.test/", nginxPrefix + "mirror-host": "a b\"; }"},
		want:        Mirror{Target: "http://m.test/", Host: "m.test"}, problem: "mirror-host",
	}, {
		name:        "a variable not allowed: no mirror",
		annotations: map[string]string{nginxPrefix + "mirror-target": "http://m.test/$http_authorization"},
		problem:     "variable $http_authorization, which is not allowed",
	}, {
		name:        "an injection: no mirror",
		annotations: map[string]string{nginxPrefix + "mirror-target": "http://m.test/\"; } location /x { return 200; #"},
		problem:     "mirror-target",
	}, {
		name:        "not http: no mirror",
		annotations: map[string]string{nginxPrefix + "mirror-target": "ftp://m.test/"},
		problem:     "absolute http or https URL",
	}, {
		name:        "a wildcard host: no mirror",
		annotations: map[string]string{nginxPrefix + "mirror-target": "http://*.m.test/"},
		problem:     "neither a DNS name nor an IP address",
	}, {
		name:        "an upstream block's name: no mirror",
		annotations: map[string]string{nginxPrefix + "mirror-target": "http://restysync_upstream/"},
		problem:     "neither a DNS name nor an IP address",
	}, {
		name:        "mirror-host without a target does nothing",
		annotations: map[string]string{nginxPrefix + "mirror-host": "m.test"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			loc, problems := buildOne(t, annotated(tc.annotations))
			if loc.ProxySettings().Mirror != tc.want {
				t.Errorf("Mirror\n got %+v\nwant %+v", loc.ProxySettings().Mirror, tc.want)
			}
			if tc.want.Target != "" && loc.Plain() {
				t.Error("a mirrored location is plain: the router would serve it without the mirror")
			}
			problemWith(t, problems, tc.problem)
		})
	}
}

func TestCustomHeaders(t *testing.T) {
	good := configMapOf("default", "headers", map[string]string{
		"X-Frame-Options":         "DENY",
		"Content-Security-Policy": "default-src 'self'; img-src *",
		"X-Price":                 "costs $5 {not a var}",
	})
	for _, tc := range []struct {
		name       string
		ref        string
		configMaps []*corev1.ConfigMap
		want       string
		denied     bool
		missing    string
		problem    string
	}{{
		name: "good", ref: "headers", configMaps: []*corev1.ConfigMap{good},
		want: "Content-Security-Policy: default-src 'self'; img-src *\nX-Frame-Options: DENY\nX-Price: costs ${restysync_dollar}5 {not a var}",
	}, {
		name: "namespace/name", ref: "default/headers", configMaps: []*corev1.ConfigMap{good},
		want: "Content-Security-Policy: default-src 'self'; img-src *\nX-Frame-Options: DENY\nX-Price: costs ${restysync_dollar}5 {not a var}",
	}, {
		name: "missing: fails closed, missing-object", ref: "nope",
		denied: true, missing: "ConfigMap default/nope", problem: "ConfigMap default/nope not found",
	}, {
		name: "another namespace fails closed", ref: "other/headers",
		configMaps: []*corev1.ConfigMap{configMapOf("other", "headers", map[string]string{"X-A": "b"})},
		denied:     true, problem: "own namespace",
	}, {
		name: "a control character fails closed", ref: "bad",
		configMaps: []*corev1.ConfigMap{configMapOf("default", "bad", map[string]string{"X-A": "a\r\nSet-Cookie: x=1"})},
		denied:     true, problem: `entry "X-A" contains the control character U+000D at byte 1`,
	}, {
		name: "a name that is not a token fails closed", ref: "bad",
		configMaps: []*corev1.ConfigMap{configMapOf("default", "bad", map[string]string{"X-A: b\"; return 200; #": "x"})},
		denied:     true, problem: "is not a header name",
	}, {
		name: "a framing header fails closed", ref: "bad",
		configMaps: []*corev1.ConfigMap{configMapOf("default", "bad", map[string]string{"Content-Length": "0"})},
		denied:     true, problem: "framing",
	}, {
		name: "an empty value fails closed", ref: "bad",
		configMaps: []*corev1.ConfigMap{configMapOf("default", "bad", map[string]string{"X-A": ""})},
		denied:     true, problem: "empty value",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			loc, problems := buildOne(t, annotated(map[string]string{nginxPrefix + "custom-headers": tc.ref}), tc.configMaps...)
			if tc.denied != (loc.AccessSettings().Denied != "") {
				t.Errorf("denied %q, want denied %v", loc.AccessSettings().Denied, tc.denied)
			}
			if !tc.denied {
				if loc.ProxySettings().ResponseHeaders != tc.want {
					t.Errorf("ResponseHeaders\n got %q\nwant %q", loc.ProxySettings().ResponseHeaders, tc.want)
				}
				if loc.Plain() {
					t.Error("a location with custom headers is plain")
				}
			}
			problemWith(t, problems, tc.problem)
			if tc.missing != "" && (len(problems) != 1 || problems[0].Missing != tc.missing) {
				t.Errorf("want one problem with Missing %q: %+v", tc.missing, problems)
			}
		})
	}
}

func TestConfigMapRefsFastCGIAndCustomHeaders(t *testing.T) {
	ing := annotated(map[string]string{
		nginxPrefix + "backend-protocol":         "FCGI",
		nginxPrefix + "fastcgi-params-configmap": "params",
		nginxPrefix + "custom-headers":           "default/headers",
		nginxPrefix + "auth-proxy-set-headers":   "headers",
	})
	want := []types.NamespacedName{{Namespace: "default", Name: "headers"}, {Namespace: "default", Name: "params"}}
	if got := ConfigMapRefs(ing); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("ConfigMapRefs = %v, want %v", got, want)
	}
	// Without FCGI the params ConfigMap is not read; another namespace never is.
	ing = annotated(map[string]string{
		nginxPrefix + "fastcgi-params-configmap": "params",
		nginxPrefix + "custom-headers":           "other/headers",
	})
	if got := ConfigMapRefs(ing); len(got) != 0 {
		t.Errorf("ConfigMapRefs = %v, want none", got)
	}
}

// FuzzMirrorTarget: whatever mirrorTarget lets through is one nginx
// string with only allowed variables, and a Host without syntax.
func FuzzMirrorTarget(f *testing.F) {
	for _, s := range []string{"https://test.env.com$request_uri", "http://$host/x", "http://[::1]:80/", "http://a/\"; }", "http://a/${", "$"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		target, host, reason := mirrorTarget(value)
		if reason != "" {
			return
		}
		rest := target
		for _, v := range mirrorVariables {
			rest = strings.ReplaceAll(rest, "${"+v+"}", "")
		}
		if strings.ContainsAny(rest, "\"'\\{};$` \t\r\n") {
			t.Fatalf("%q became %q", value, target)
		}
		if strings.ContainsAny(host, "\"'\\{};$` \t\r\n/") {
			t.Fatalf("%q: host %q", value, host)
		}
	})
}

// FuzzCustomHeaderAndFastCGIParam: what gets through has no control
// character, and "$" only as an allowed variable.
func FuzzCustomHeaderAndFastCGIParam(f *testing.F) {
	for _, s := range []string{"DENY", "a$b", "${x}", "a\r\nb", "$document_root$fastcgi_script_name", `"; }`} {
		f.Add("X-A", s)
	}
	f.Fuzz(func(t *testing.T, name, value string) {
		if v, reason := parseCustomHeader(name, value); reason == "" {
			rest := strings.ReplaceAll(v, dollarVariable, "")
			if strings.ContainsAny(rest, "$\r\n\x00") || !isVariableHeaderName(name) {
				t.Fatalf("header %q %q became %q", name, value, v)
			}
		}
		if v, reason := parseFastCGIParam(name, value); reason == "" {
			rest := v
			for _, nginx := range fastCGIVariables {
				rest = strings.ReplaceAll(rest, "${"+nginx+"}", "")
			}
			if strings.ContainsAny(rest, "\"'\\{};$` \t\r\n") {
				t.Fatalf("param %q %q became %q", name, value, v)
			}
		}
	})
}
