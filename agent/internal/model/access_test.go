package model

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// accessOf builds one Ingress "default/app" with the annotations (each key
// given without prefix, set under prefix) on app.test "/" and returns the
// access settings of its location, the model and the problems.
func accessOf(t *testing.T, prefix string, annotations map[string]string, extra ...any) (AccessSettings, Model, []Problem) {
	t.Helper()
	opts := []ingressOption{rule("app.test", prefix2("/", "web", 80))}
	for k, v := range annotations {
		opts = append(opts, annotation(prefix+k, v))
	}
	s := snapshotOf(newIngress("default", "app", opts...))
	for _, e := range extra {
		switch o := e.(type) {
		case *corev1.Secret:
			s.Secrets = ListOf(append(s.Secrets.Slice(), o)...)
		case *Service:
			s.Services = ListOf(append(s.Services.Slice(), o)...)
		}
	}
	m, problems := Build(s)
	if m.Servers.Len() != 1 || len(m.Servers.At(0).Locations) != 1 {
		t.Fatalf("want one server with one location, got %s", dump(m))
	}
	return m.Servers.At(0).Locations[0].AccessSettings(), m, problems
}

// prefix2 is helpers_test's prefix, renamed here where prefix is a string.
var prefix2 = prefix

var bothPrefixes = []string{"restysync.io/", "nginx.ingress.kubernetes.io/"}

func authSecret(name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Type: corev1.SecretTypeOpaque, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func TestAccessDefaults(t *testing.T) {
	a, m, problems := accessOf(t, "restysync.io/", nil)
	if a != (AccessSettings{}) || len(m.AuthFiles) != 0 || len(problems) != 0 {
		t.Errorf("no annotations: access %+v, auth files %v, problems %v; want none", a, m.AuthFiles, problems)
	}
}

func TestAccessSourceRanges(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		want        AccessSettings
		problem     string
	}{
		{name: "allowlist, masked, sorted, deduplicated",
			annotations: map[string]string{"allowlist-source-range": " 10.1.2.3/8, 192.168.0.1 ,10.0.0.0/8,fd00::1/8"},
			want:        AccessSettings{AllowSources: "10.0.0.0/8,192.168.0.1/32,fd00::/8"}},
		{name: "whitelist is the older name",
			annotations: map[string]string{"whitelist-source-range": "127.0.0.1"},
			want:        AccessSettings{AllowSources: "127.0.0.1/32"}},
		{name: "allowlist wins over whitelist",
			annotations: map[string]string{"whitelist-source-range": "127.0.0.1", "allowlist-source-range": "10.0.0.0/8"},
			want:        AccessSettings{AllowSources: "10.0.0.0/8"}},
		{name: "denylist",
			annotations: map[string]string{"denylist-source-range": "127.0.0.0/8", "allowlist-source-range": "127.0.0.1"},
			want:        AccessSettings{AllowSources: "127.0.0.1/32", DenySources: "127.0.0.0/8"}},
		{name: "bad allowlist fails closed",
			annotations: map[string]string{"allowlist-source-range": "10.0.0.0/8,not-an-ip"},
			want:        AccessSettings{Denied: "%sallowlist-source-range is invalid"},
			problem:     `"not-an-ip" is not a CIDR or IP address; the Ingress's paths answer 503 until it is fixed`},
		{name: "empty allowlist fails closed",
			annotations: map[string]string{"allowlist-source-range": " , "},
			want:        AccessSettings{Denied: "%sallowlist-source-range is invalid"},
			problem:     "holds no CIDR"},
		{name: "bad denylist fails closed",
			annotations: map[string]string{"denylist-source-range": "10.0.0.0/33"},
			want:        AccessSettings{Denied: "%sdenylist-source-range is invalid"},
			problem:     `"10.0.0.0/33" is not a CIDR`},
		{name: "zone refused",
			annotations: map[string]string{"denylist-source-range": "fe80::1%eth0"},
			want:        AccessSettings{Denied: "%sdenylist-source-range is invalid"},
			problem:     "is not a CIDR"},
	}
	for _, prefix := range bothPrefixes {
		for _, tt := range tests {
			t.Run(prefix+tt.name, func(t *testing.T) {
				got, _, problems := accessOf(t, prefix, tt.annotations)
				want := tt.want
				if want.Denied != "" {
					want.Denied = strings.ReplaceAll(want.Denied, "%s", prefix)
				}
				if got != want {
					t.Errorf("access = %+v, want %+v", got, want)
				}
				checkProblem(t, problems, tt.problem)
			})
		}
	}
}

// checkProblem wants exactly one problem containing fragment, or none
// when fragment is "".
func checkProblem(t *testing.T, problems []Problem, fragment string) {
	t.Helper()
	if fragment == "" {
		if len(problems) != 0 {
			t.Errorf("problems = %v, want none", problems)
		}
		return
	}
	if len(problems) != 1 || !strings.Contains(problems[0].Reason, fragment) || problems[0].Name != "app" {
		t.Errorf("problems = %v, want one on Ingress app containing %q", problems, fragment)
	}
}

func TestAccessCORS(t *testing.T) {
	defaults := CORS{Enabled: true, AllowOrigins: "*", AllowMethods: DefaultCORSAllowMethods,
		AllowHeaders: DefaultCORSAllowHeaders, AllowCredentials: true, MaxAge: DefaultCORSMaxAge}
	with := func(f func(*CORS)) CORS { c := defaults; f(&c); return c }
	tests := []struct {
		name        string
		annotations map[string]string
		want        CORS
		problem     string
	}{
		{name: "off by default", annotations: map[string]string{"cors-allow-origin": "https://a.test"}},
		{name: "defaults", annotations: map[string]string{"enable-cors": "true"}, want: defaults},
		{name: "everything set", annotations: map[string]string{
			"enable-cors":            "true",
			"cors-allow-origin":      "https://b.test, HTTPS://A.test:8443,http://*.wild.test, https://a.test:8443",
			"cors-allow-methods":     "GET,post , PUT",
			"cors-allow-headers":     "X-Custom, Content-Type",
			"cors-expose-headers":    "*, X-Total",
			"cors-allow-credentials": "false",
			"cors-max-age":           "600",
		}, want: CORS{Enabled: true, AllowOrigins: "http://*.wild.test,https://a.test:8443,https://b.test",
			AllowMethods: "GET, post, PUT", AllowHeaders: "X-Custom, Content-Type", ExposeHeaders: "*, X-Total", MaxAge: 600}},
		{name: "star anywhere is any origin", annotations: map[string]string{"enable-cors": "true", "cors-allow-origin": "https://a.test, *"},
			want: defaults},
		{name: "bad origin left out", annotations: map[string]string{"enable-cors": "true", "cors-allow-origin": "https://a.test, https://a.test/path"},
			want: with(func(c *CORS) { c.AllowOrigins = "https://a.test" }), problem: `"https://a.test/path" is not an origin`},
		{name: "no good origin: no CORS", annotations: map[string]string{"enable-cors": "true", "cors-allow-origin": "javascript:alert(1)"},
			problem: "allows no origin (want origins such as"},
		{name: "bad methods: default", annotations: map[string]string{"enable-cors": "true", "cors-allow-methods": "GET, P0ST"},
			want: defaults, problem: "is not a list of methods"},
		{name: "header with $ refused", annotations: map[string]string{"enable-cors": "true", "cors-allow-headers": "X-A, $host"},
			want: defaults, problem: "is not a list of header names"},
		{name: "header with quote refused", annotations: map[string]string{"enable-cors": "true", "cors-expose-headers": `X-A"`},
			want: defaults, problem: "is not a list of header names"},
		{name: "max age out of range", annotations: map[string]string{"enable-cors": "true", "cors-max-age": "-1"},
			want: defaults, problem: "is not an integer from 0 to"},
		{name: "bad enable-cors", annotations: map[string]string{"enable-cors": "yes"}, problem: "is not true or false"},
	}
	for _, prefix := range bothPrefixes {
		for _, tt := range tests {
			t.Run(prefix+tt.name, func(t *testing.T) {
				got, _, problems := accessOf(t, prefix, tt.annotations)
				if got.CORS != tt.want {
					t.Errorf("CORS = %+v, want %+v", got.CORS, tt.want)
				}
				checkProblem(t, problems, tt.problem)
			})
		}
	}
}

func TestParseOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"https://example.com":       "https://example.com",
		"HTTP://Example.COM:8080":   "http://example.com:8080",
		"https://*.example.com":     "https://*.example.com",
		"myapp://example.com:1199":  "myapp://example.com:1199",
		"http://10.0.0.1:80":        "http://10.0.0.1:80",
		"https://example.com/":      "",
		"https://user@example.com":  "",
		"https://example.com:0":     "",
		"https://example.com:":      "",
		"https://example.com:08080": "",
		"https://[::1]":             "",
		"https://*.10.0.0.1":        "",
		"https://exa$mple.com":      "",
		"https://exa\"mple.com":     "",
		"example.com":               "",
		"https://":                  "",
		"https://*":                 "",
		"https://example.com?x=1":   "",
	} {
		got, ok := parseOrigin(in)
		if got != want || ok != (want != "") {
			t.Errorf("parseOrigin(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

func TestAccessBasicAuth(t *testing.T) {
	const htpasswd = "alice:{PLAIN}secret\n# comment\n\nbob:$apr1$x$y\n"
	good := authSecret("users", map[string]string{"auth": htpasswd, "other": "dropped"})
	tests := []struct {
		name        string
		annotations map[string]string
		secrets     []any
		want        AccessSettings
		wantFiles   []AuthFile
		problem     string
	}{
		{name: "basic", annotations: map[string]string{"auth-type": "basic", "auth-secret": "users", "auth-realm": "Staff only"},
			secrets:   []any{good},
			want:      AccessSettings{BasicAuth: BasicAuth{File: "auth/default_users", Realm: "Staff only"}},
			wantFiles: []AuthFile{{Name: "auth/default_users", Content: htpasswd}}},
		{name: "namespace/name in the Ingress namespace, auth-file", annotations: map[string]string{"auth-type": "basic", "auth-secret": "default/users", "auth-secret-type": "auth-file"},
			secrets:   []any{good},
			want:      AccessSettings{BasicAuth: BasicAuth{File: "auth/default_users"}},
			wantFiles: []AuthFile{{Name: "auth/default_users", Content: htpasswd}}},
		{name: "missing secret fails closed", annotations: map[string]string{"auth-type": "basic", "auth-secret": "nope"},
			want: AccessSettings{Denied: "%sauth-secret is not usable"}, problem: "Secret default/nope not found; the Ingress's paths answer 503"},
		{name: "no auth-secret fails closed", annotations: map[string]string{"auth-type": "basic"},
			want: AccessSettings{Denied: "auth-secret is missing"}, problem: "auth-type needs auth-secret"},
		{name: "other namespace fails closed", annotations: map[string]string{"auth-type": "basic", "auth-secret": "kube-system/users"},
			secrets: []any{good},
			want:    AccessSettings{Denied: "%sauth-secret is not usable"}, problem: "names a Secret in another namespace"},
		{name: "no auth key fails closed", annotations: map[string]string{"auth-type": "basic", "auth-secret": "users"},
			secrets: []any{authSecret("users", map[string]string{"password": "x"})},
			want:    AccessSettings{Denied: "%sauth-secret is not usable"}, problem: `has no "auth" key`},
		{name: "bad htpasswd fails closed", annotations: map[string]string{"auth-type": "basic", "auth-secret": "users"},
			secrets: []any{authSecret("users", map[string]string{"auth": "alice\n"})},
			want:    AccessSettings{Denied: "%sauth-secret is not usable"}, problem: `line 1 is not "user:password-hash"`},
		{name: "digest fails closed", annotations: map[string]string{"auth-type": "digest", "auth-secret": "users"},
			secrets: []any{good},
			want:    AccessSettings{Denied: "%sauth-type is not usable"}, problem: "digest is not supported"},
		{name: "auth-map fails closed", annotations: map[string]string{"auth-type": "basic", "auth-secret": "users", "auth-secret-type": "auth-map"},
			secrets: []any{good},
			want:    AccessSettings{Denied: "%sauth-secret-type is not usable"}, problem: `"auth-map" is not supported`},
		{name: "realm off refused", annotations: map[string]string{"auth-type": "basic", "auth-secret": "users", "auth-realm": "off"},
			secrets:   []any{good},
			want:      AccessSettings{BasicAuth: BasicAuth{File: "auth/default_users"}},
			wantFiles: []AuthFile{{Name: "auth/default_users", Content: htpasswd}}, problem: `"off" would turn authentication off`},
		{name: "realm with quote refused", annotations: map[string]string{"auth-type": "basic", "auth-secret": "users", "auth-realm": `a"b`},
			secrets:   []any{good},
			want:      AccessSettings{BasicAuth: BasicAuth{File: "auth/default_users"}},
			wantFiles: []AuthFile{{Name: "auth/default_users", Content: htpasswd}}, problem: "printable ASCII"},
	}
	for _, prefix := range bothPrefixes {
		for _, tt := range tests {
			t.Run(prefix+tt.name, func(t *testing.T) {
				got, m, problems := accessOf(t, prefix, tt.annotations, tt.secrets...)
				want := tt.want
				want.Denied = strings.ReplaceAll(want.Denied, "%s", prefix)
				if got != want {
					t.Errorf("access = %+v, want %+v", got, want)
				}
				if len(m.AuthFiles) != len(tt.wantFiles) || (len(tt.wantFiles) > 0 && m.AuthFiles[0] != tt.wantFiles[0]) {
					t.Errorf("auth files = %+v, want %+v", m.AuthFiles, tt.wantFiles)
				}
				checkProblem(t, problems, tt.problem)
			})
		}
	}
}

func TestAccessRateLimit(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		want        RateLimit
		problem     string
	}{
		{name: "rps with the default multiplier", annotations: map[string]string{"limit-rps": "10"}, want: RateLimit{RPS: 10, BurstMultiplier: 5}},
		{name: "everything", annotations: map[string]string{"limit-rps": "10", "limit-rpm": "300", "limit-connections": "4",
			"limit-burst-multiplier": "2", "limit-whitelist": "10.0.0.0/8, 127.0.0.1"},
			want: RateLimit{RPS: 10, RPM: 300, BurstMultiplier: 2, Connections: 4, Exempt: "10.0.0.0/8,127.0.0.1/32"}},
		{name: "connections only", annotations: map[string]string{"limit-connections": "4"}, want: RateLimit{Connections: 4}},
		{name: "multiplier alone means nothing", annotations: map[string]string{"limit-burst-multiplier": "3"}},
		{name: "bad rps: no limit", annotations: map[string]string{"limit-rps": "ten"}, problem: "is not an integer from 1 to"},
		{name: "zero rps: no limit", annotations: map[string]string{"limit-rps": "0"}, problem: "is not an integer from 1 to"},
		{name: "bad multiplier: default", annotations: map[string]string{"limit-rps": "1", "limit-burst-multiplier": "0"},
			want: RateLimit{RPS: 1, BurstMultiplier: 5}, problem: "is not an integer from 1 to 1000"},
		{name: "bad whitelist: nobody exempt", annotations: map[string]string{"limit-rpm": "60", "limit-whitelist": "x"},
			want: RateLimit{RPM: 60, BurstMultiplier: 5}, problem: "no client is exempt"},
	}
	for _, prefix := range bothPrefixes {
		for _, tt := range tests {
			t.Run(prefix+tt.name, func(t *testing.T) {
				got, _, problems := accessOf(t, prefix, tt.annotations)
				if got.RateLimit != tt.want {
					t.Errorf("rate limit = %+v, want %+v", got.RateLimit, tt.want)
				}
				checkProblem(t, problems, tt.problem)
			})
		}
	}
}

func TestAccessCustomErrors(t *testing.T) {
	errorsService := service("default", "errors", servicePort("http", 8080))
	tests := []struct {
		name        string
		annotations map[string]string
		want        CustomErrors
		backends    int // in the model
		problem     string
	}{
		{name: "codes sorted, first port", annotations: map[string]string{"custom-http-errors": "503, 404,404", "default-backend": "errors"},
			want: CustomErrors{Codes: "404,503", Backend: "default/errors:http"}, backends: 2},
		{name: "no default backend", annotations: map[string]string{"custom-http-errors": "404"}, backends: 1,
			problem: "needs default-backend"},
		// Alone it is the fallback of the Ingress's backends (policy.go).
		{name: "default backend alone", annotations: map[string]string{"default-backend": "errors"}, backends: 2},
		{name: "bad code", annotations: map[string]string{"custom-http-errors": "404,200", "default-backend": "errors"}, backends: 2,
			problem: `"200" is not a status code from 400 to 599`},
		{name: "missing service", annotations: map[string]string{"custom-http-errors": "404", "default-backend": "gone"}, backends: 1,
			problem: "Service default/gone not found"},
		{name: "bad service name", annotations: map[string]string{"custom-http-errors": "404", "default-backend": "ns/errors"}, backends: 1,
			problem: "is not a Service name"},
	}
	for _, prefix := range bothPrefixes {
		for _, tt := range tests {
			t.Run(prefix+tt.name, func(t *testing.T) {
				got, m, problems := accessOf(t, prefix, tt.annotations, errorsService)
				if got.Errors != tt.want {
					t.Errorf("errors = %+v, want %+v", got.Errors, tt.want)
				}
				if m.Backends.Len() != tt.backends {
					t.Errorf("backends = %v, want %d", m.Backends, tt.backends)
				}
				checkProblem(t, problems, tt.problem)
			})
		}
	}
}

// Every location of the Ingress gets the settings, and its keys are
// reported as supported under both prefixes.
func TestAccessKeysSupported(t *testing.T) {
	for _, key := range []string{"whitelist-source-range", "allowlist-source-range", "denylist-source-range",
		"enable-cors", "cors-allow-origin", "cors-allow-methods", "cors-allow-headers", "cors-allow-credentials",
		"cors-max-age", "cors-expose-headers", "auth-type", "auth-secret", "auth-secret-type", "auth-realm",
		"limit-rps", "limit-rpm", "limit-connections", "limit-burst-multiplier", "limit-whitelist",
		"custom-http-errors", "default-backend"} {
		for _, prefix := range bothPrefixes {
			if got := AnnotationStatus(prefix + key); got != AnnotationSupported {
				t.Errorf("AnnotationStatus(%s%s) = %q", prefix, key, got)
			}
		}
	}
	ing := newIngress("default", "app", annotation("nginx.ingress.kubernetes.io/limit-rps", "3"),
		rule("app.test", prefix("/a", "web", 80), exact("/b", "web", 80)))
	other := newIngress("default", "other", createdAt(1), rule("app.test", prefix("/c", "web", 80)))
	m, problems := Build(snapshotOf(ing, other))
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	for _, l := range m.Servers.At(0).Locations {
		want := RateLimit{RPS: 3, BurstMultiplier: 5}
		if l.Ingress == "default/other" {
			want = RateLimit{}
		}
		if l.AccessSettings().RateLimit != want {
			t.Errorf("%s: rate limit %+v, want %+v", l.Path, l.AccessSettings().RateLimit, want)
		}
	}
}

func FuzzSourceRanges(f *testing.F) {
	for _, s := range []string{"10.0.0.0/8", "127.0.0.1, ::1", "fe80::1%eth0", "1.2.3.4/33", ",,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		out, reason := parseSourceRanges(value)
		if reason != "" {
			return
		}
		for _, part := range strings.Split(out, ",") {
			if p, reason := parsePrefix(part); reason != "" || p.String() != part {
				t.Fatalf("%q gave %q, whose %q is not canonical", value, out, part)
			}
		}
	})
}

func FuzzParseOrigin(f *testing.F) {
	for _, s := range []string{"https://a.test", "http://*.a.test:8080", "x://1.2.3.4", "https://a.test/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		out, ok := parseOrigin(value)
		if !ok {
			return
		}
		if strings.ContainsAny(out, "\"\\$ \t\r\n;{}'/?#@") && !strings.Contains(out, "://") {
			t.Fatalf("%q gave %q", value, out)
		}
		_, rest, _ := strings.Cut(out, "://")
		if strings.ContainsAny(rest, "\"\\$ \t\r\n;{}'/?#@[]()|^+") {
			t.Fatalf("%q gave %q, with a character a regex or nginx would read", value, out)
		}
	})
}
