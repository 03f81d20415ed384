package model

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestExternalAuth(t *testing.T) {
	const p = "nginx.ingress.kubernetes.io/"
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        ExternalAuth
		denied      bool
		problem     string
	}{{
		name: "oauth2-proxy as its docs write it",
		annotations: map[string]string{
			p + "auth-url":              "https://$host/oauth2/auth",
			p + "auth-signin":           "https://$host/oauth2/start?rd=$escaped_request_uri",
			p + "auth-response-headers": "X-Auth-Request-User, X-Auth-Request-Email",
		},
		want: ExternalAuth{URL: "https://${host}/oauth2/auth",
			Signin:          "https://${host}/oauth2/start?rd=${restysync_escaped_request_uri}",
			ResponseHeaders: "X-Auth-Request-User,X-Auth-Request-Email"},
	}, {
		name: "sign-in without rd gets it; method, cache, cookie",
		annotations: map[string]string{
			p + "auth-url":                   "http://auth.auth.svc:4180/check?a=b",
			p + "auth-signin":                "http://login.example.com/start",
			p + "auth-signin-redirect-param": "next",
			p + "auth-method":                "post",
			p + "auth-cache-key":             "$cookie__oauth2_proxy$remote_addr",
			p + "auth-cache-duration":        "200 30s",
			p + "auth-always-set-cookie":     "true",
			p + "auth-request-redirect":      "https://$best_http_host$request_uri",
		},
		want: ExternalAuth{URL: "http://auth.auth.svc:4180/check?a=b", Method: "POST",
			Signin:          "http://login.example.com/start?next=${restysync_forwarded_proto}://${restysync_http_host}${restysync_escaped_request_uri}",
			CacheKey:        "${cookie__oauth2_proxy}${remote_addr}",
			CacheDuration:   "200 30s",
			AlwaysSetCookie: true,
			RequestRedirect: "https://${restysync_forwarded_host}${request_uri}"},
	}, {
		name:        "a variable not allowed fails closed",
		annotations: map[string]string{p + "auth-url": "http://auth.test/$http_authorization"},
		denied:      true, problem: "variable $http_authorization, which is not allowed",
	}, {
		name:        "an injection attempt fails closed (CVE-2025-24514)",
		annotations: map[string]string{p + "auth-url": "http://auth.test/#;}\nlocation /x { return 200; }"},
		denied:      true, problem: "auth-url",
	}, {
		name:        "a quote fails closed",
		annotations: map[string]string{p + "auth-url": `http://auth.test/"`},
		denied:      true, problem: "contains",
	}, {
		// The routed host, never a Host header that disagrees with an
		// absolute request line (issue 25, point 10).
		name: "$http_host is the host the router matched",
		annotations: map[string]string{
			p + "auth-url":    "http://auth.test/auth?for=$http_host",
			p + "auth-signin": "https://login.test/?u=$http_host",
		},
		want: ExternalAuth{URL: "http://auth.test/auth?for=${restysync_http_host}",
			Signin: "https://login.test/?u=${restysync_http_host}&rd=${restysync_forwarded_proto}://${restysync_http_host}${restysync_escaped_request_uri}"},
	}, {
		// $http_host holds the client's port: nginx would connect where
		// the client says (issue 25, point 2).
		name:        "$http_host in the host fails closed",
		annotations: map[string]string{p + "auth-url": "http://$http_host/auth"},
		denied:      true, problem: "has a variable in its host or port",
	}, {
		name:        "not a URL fails closed",
		annotations: map[string]string{p + "auth-url": "auth.test/check"},
		denied:      true, problem: "absolute http or https URL",
	}, {
		name: "bad extras are problems, auth stays on",
		annotations: map[string]string{
			p + "auth-url":              "http://auth.test/",
			p + "auth-method":           "BREW",
			p + "auth-response-headers": "X-Ok, Bad Header",
			p + "auth-signin":           "javascript:alert(1)",
		},
		want:    ExternalAuth{URL: "http://auth.test/"},
		problem: "auth-method",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			opts := []ingressOption{rule("app.example.com", prefix("/", "web", 80))}
			for k, v := range tc.annotations {
				opts = append(opts, annotation(k, v))
			}
			m, problems := Build(snapshotOf(newIngress("default", "app", opts...)))
			var locs []Location
			for srv := range m.Servers.All() {
				locs = append(locs, srv.Locations...)
			}
			if len(locs) != 1 {
				t.Fatalf("locations %v, problems %v", locs, problems)
			}
			a := locs[0].AccessSettings()
			if tc.denied != (a.Denied != "") {
				t.Errorf("denied %q, want denied %v", a.Denied, tc.denied)
			}
			if !tc.denied && a.ExternalAuth != tc.want {
				t.Errorf("ExternalAuth\n got %+v\nwant %+v", a.ExternalAuth, tc.want)
			}
			if !tc.denied && locs[0].Plain() {
				t.Error("a location with external auth is plain: it would skip the auth")
			}
			found := tc.problem == ""
			for _, pr := range problems {
				if tc.problem != "" && strings.Contains(pr.Reason, tc.problem) {
					found = true
				}
				if tc.problem == "" {
					t.Errorf("unexpected problem %s", pr)
				}
			}
			if !found {
				t.Errorf("no problem says %q: %v", tc.problem, problems)
			}
		})
	}
}

func FuzzExternalAuthURL(f *testing.F) {
	for _, s := range []string{"https://$host/oauth2/auth", "http://a/${request_uri}", "http://a/\"; }", "http://a/$x", "${", "$"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		canonical, reason := authURL(value)
		if reason != "" {
			return
		}
		// What gets through can be quoted as one nginx string: no quote,
		// backslash, brace outside ${var}, semicolon, space or control
		// character, and only allowed variables.
		rest := canonical
		for _, v := range authVariables {
			rest = strings.ReplaceAll(rest, "${"+v+"}", "")
		}
		if strings.ContainsAny(rest, "\"'\\{};$` \t\r\n") {
			t.Fatalf("%q became %q", value, canonical)
		}
	})
}

func TestAuthProxySetHeaders(t *testing.T) {
	headers := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "auth-headers"},
		Data: map[string]string{"X-Tenant": " a-team ", "X-Original-Host": "$host"}}
	bad := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "bad"},
		Data: map[string]string{"X-A": "a\" ; b"}}
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "auth-headers"},
		Data: map[string]string{"X-A": "b"}}
	withHeaders := func(name, ref string) *networkingv1.Ingress {
		return newIngress("default", name, rule(name+".example.com", prefix("/", "web", 80)),
			annotation("nginx.ingress.kubernetes.io/auth-url", "http://auth.test/check"),
			annotation("nginx.ingress.kubernetes.io/auth-proxy-set-headers", ref))
	}
	s := snapshotOf(withHeaders("good", "auth-headers"), withHeaders("qualified", "default/auth-headers"),
		withHeaders("bad", "bad"), withHeaders("missing", "nope"), withHeaders("elsewhere", "other/auth-headers"))
	s.ConfigMaps = ListOf(headers, bad, other)
	m, problems := Build(s)
	want := "X-Original-Host: ${host}\nX-Tenant: a-team"
	for srv := range m.Servers.All() {
		a := srv.Locations[0].AccessSettings()
		switch srv.Host {
		case "good.example.com", "qualified.example.com":
			if a.ExternalAuth.ProxySetHeaders != want || a.Denied != "" {
				t.Errorf("%s: headers %q, denied %q; want %q", srv.Host, a.ExternalAuth.ProxySetHeaders, a.Denied, want)
			}
		default:
			if a.Denied == "" {
				t.Errorf("%s: not failed closed: %+v", srv.Host, a)
			}
		}
	}
	for _, part := range []string{`ConfigMap default/bad: header "X-A" contains '"'`, `ConfigMap default/nope not found`,
		`must name a ConfigMap in the Ingress's own namespace`} {
		found := false
		for _, p := range problems {
			found = found || strings.Contains(p.Reason, part)
		}
		if !found {
			t.Errorf("no problem with %q in %v", part, problems)
		}
	}
	refs := ConfigMapRefs(withHeaders("x", "other/auth-headers"))
	if len(refs) != 0 {
		t.Errorf("a ConfigMap of another namespace is read: %v", refs)
	}
	if refs := ConfigMapRefs(withHeaders("x", "auth-headers")); len(refs) != 1 || refs[0].Namespace != "default" {
		t.Errorf("refs %v", refs)
	}
}
