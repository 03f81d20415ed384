package render

import (
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/model"
)

// Every setting that decides an auth service's answer names its location,
// and the cache key holds the location, the routed host, the method and
// the values of the location's variables before the user's key (issue
// 25, point 3).
func TestAuthLocationIdentity(t *testing.T) {
	base := model.ExternalAuth{URL: "http://auth.test/check", CacheKey: "${cookie_session}", CacheDuration: "200 5m",
		ProxySetHeaders: "X-Required-Group: admins"}
	baseView, err := newAuthLocationView(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change func(*model.ExternalAuth)
	}{
		{"url", func(a *model.ExternalAuth) { a.URL = "http://auth.test/other" }},
		{"method", func(a *model.ExternalAuth) { a.Method = "POST" }},
		{"request redirect", func(a *model.ExternalAuth) { a.RequestRedirect = "/x" }},
		{"user key", func(a *model.ExternalAuth) { a.CacheKey = "${http_x_key}" }},
		{"cache duration", func(a *model.ExternalAuth) { a.CacheDuration = "200 1m" }},
		{"proxy header value", func(a *model.ExternalAuth) { a.ProxySetHeaders = "X-Required-Group: users" }},
		{"proxy header name", func(a *model.ExternalAuth) { a.ProxySetHeaders = "X-Group: admins" }},
		{"one more proxy header", func(a *model.ExternalAuth) { a.ProxySetHeaders += "\nX-Tenant: a" }},
	} {
		a := base
		tc.change(&a)
		v, err := newAuthLocationView(a)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if v.Location == baseView.Location {
			t.Errorf("another %s, the same location %s", tc.name, v.Location)
		}
	}
	if !strings.HasPrefix(baseView.Location, authPrefix) || len(baseView.Location) != len(authPrefix)+32 {
		t.Errorf("location %q: want %s and 32 hex digits", baseView.Location, authPrefix)
	}

	for _, tc := range []struct {
		name string
		auth model.ExternalAuth
		want string // with LOC for the location
	}{
		{"fixed URL and headers", base,
			"${restysync_forwarded_proto}://${restysync_http_host} ${restysync_forwarded_host} ${request_method} LOC ${cookie_session}"},
		{"variables in the URL and a header", model.ExternalAuth{URL: "http://${host}/check", CacheKey: "${cookie_session}",
			CacheDuration: "200 5m", ProxySetHeaders: "X-Client: ${remote_addr}\nX-Group: admins"},
			"${restysync_forwarded_proto}://${restysync_http_host} ${restysync_forwarded_host} ${request_method} LOC ${restysync_auth_target} ${remote_addr} ${cookie_session}"},
		{"no cache", model.ExternalAuth{URL: "http://auth.test/check"}, ""},
	} {
		v, err := newAuthLocationView(tc.auth)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if want := strings.ReplaceAll(tc.want, "LOC", v.Location); v.CacheKey != want {
			t.Errorf("%s: cache key\n got %s\nwant %s", tc.name, v.CacheKey, want)
		}
	}
}
