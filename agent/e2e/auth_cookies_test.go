package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// The cookies of a split session, as oauth2-proxy sets them: values with
// "=", attributes, and an Expires date with a comma in it.
var (
	sessionCookies = []string{
		"_oauth2_proxy_0=c2Vzc2lvbi1wYXJ0LTA=; Path=/; Expires=Wed, 21 Oct 2037 07:28:00 GMT; HttpOnly; Secure; SameSite=Lax",
		"_oauth2_proxy_1=cGFydC0x==; Path=/; Expires=Wed, 21 Oct 2037 07:28:00 GMT; HttpOnly; Secure; SameSite=Lax",
	}
	// What oauth2-proxy sets with a 401: the sign-in's state.
	csrfCookies = []string{
		"_oauth2_proxy_csrf=a=b=c; Path=/; Expires=Thu, 01 Jan 2037 00:00:00 GMT; HttpOnly",
		"_oauth2_proxy_csrf_1=d=e; Path=/oauth2; HttpOnly",
	}
	backendCookie = "backend=own; Path=/"
)

// Every Set-Cookie of the auth service reaches the client as its own
// header, intact, beside the backend's own cookie: on a 2xx of the auth
// service, on its 401 through auth-signin's redirect, with
// auth-always-set-cookie on an error of the backend and on the auth
// service's 403, and with the auth cache. nginx's $upstream_http_set_cookie
// would give only the first (nginx 1.22) or one cookie joined with ", "
// (nginx 1.23 and later).
func TestAuthCookies(t *testing.T) {
	const ip = "127.0.0.201"
	var asked atomic.Int64
	authPort := nginxproc.FreePort(t)
	serve(t, ip, authPort, cookieAuthService(&asked))
	backendPort := nginxproc.FreePort(t)
	serve(t, ip, backendPort, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Set-Cookie", backendCookie)
		if r.URL.Path == "/fail" {
			w.WriteHeader(http.StatusInternalServerError)
		}
		fmt.Fprint(w, "backend")
	})
	authURL := fmt.Sprintf("http://%s:%d/oauth2/auth", ip, authPort)
	annotations := map[string]map[string]string{
		"signin": {"auth-signin": "https://login.test/oauth2/start?rd=$escaped_request_uri"},
		"always": {"auth-always-set-cookie": "true"},
		"cached": {"auth-cache-key": "$cookie_session", "auth-cache-duration": "200 202 401 1m"},
	}
	files := map[string]string{"classes.yaml": ingressClasses, "services.yaml": service("app", backendPort, ep(ip))}
	for name, keys := range annotations {
		full := map[string]string{"nginx.ingress.kubernetes.io/auth-url": authURL}
		for key, value := range keys {
			full["nginx.ingress.kubernetes.io/"+key] = value
		}
		files[name+".yaml"] = appIngress(name, name+".test", full)
	}
	s := newStack(t, files)
	session := http.Header{"Cookie": {"session=valid"}}
	s.eventually("signin.test serves", func() error {
		resp, _ := s.do(t, accessRequest(t, http.MethodGet, "http://signin.test/", session))
		if resp.StatusCode != http.StatusOK {
			return errorf("status %d", resp.StatusCode)
		}
		return nil
	})
	check := func(what, host, path string, header http.Header, status int, want ...string) {
		t.Helper()
		resp, _ := s.do(t, accessRequest(t, http.MethodGet, "http://"+host+path, header))
		got := resp.Header.Values("Set-Cookie")
		if resp.StatusCode != status || !slices.Equal(got, want) {
			t.Errorf("%s: %d with Set-Cookie %q\nwant %d with %q", what, resp.StatusCode, got, status, want)
		}
	}
	both := append([]string{backendCookie}, sessionCookies...)

	check("signed in", "signin.test", "/", session, http.StatusOK, both...)
	check("no session: the sign-in redirect", "signin.test", "/x", nil, http.StatusFound, csrfCookies...)
	check("backend error without auth-always-set-cookie", "signin.test", "/fail", session, http.StatusInternalServerError, backendCookie)

	check("auth-always-set-cookie, signed in", "always.test", "/", session, http.StatusOK, both...)
	check("auth-always-set-cookie, backend error", "always.test", "/fail", session, http.StatusInternalServerError, both...)
	check("auth-always-set-cookie, 403 of the auth service", "always.test", "/",
		http.Header{"Cookie": {"session=forbidden"}}, http.StatusForbidden, sessionCookies...)
	check("auth-always-set-cookie, 401 of the auth service", "always.test", "/", nil, http.StatusUnauthorized, csrfCookies...)

	// nginx caches no answer that sets a cookie: each request asks, and
	// each gets the cookies.
	before := asked.Load()
	for i := range 2 {
		check(fmt.Sprintf("auth cache, request %d", i), "cached.test", "/", session, http.StatusOK, both...)
	}
	if n := asked.Load() - before; n != 2 {
		t.Errorf("auth cache: the auth service was asked %d times for 2 answers that set cookies, want 2", n)
	}
}

// cookieAuthService answers as oauth2-proxy does: 202 with the session's
// cookies for a session, 403 with them for a "forbidden" one, 401 with the
// sign-in's state cookies without one. It counts the requests in asked.
func cookieAuthService(asked *atomic.Int64) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		status, cookies := http.StatusAccepted, sessionCookies
		if session, _ := r.Cookie("session"); session == nil {
			status, cookies = http.StatusUnauthorized, csrfCookies
		} else if session.Value == "forbidden" {
			status = http.StatusForbidden
		}
		for _, c := range cookies {
			w.Header().Add("Set-Cookie", c)
		}
		w.WriteHeader(status)
	}
}
