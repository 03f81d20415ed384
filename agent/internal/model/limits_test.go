package model

import (
	"fmt"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
)

// A body size over the platform's maximum is a Problem naming the
// Ingress and the key, and the default is used; at or under it, or with
// no maximum, the value holds.
func TestBodySizeLimits(t *testing.T) {
	limits := Limits{MaxProxyBodySize: 100 << 20, MaxClientBodyBufferSize: 1 << 20}
	cases := []struct {
		name        string
		limits      Limits
		annotations map[string]string
		body, buf   string
		problem     string
	}{
		{"under", limits, map[string]string{nginxPrefix + "proxy-body-size": "100m", nginxPrefix + "client-body-buffer-size": "1m"}, "100m", "1m", ""},
		{"body over", limits, map[string]string{nginxPrefix + "proxy-body-size": "101m"}, "", "",
			`annotation nginx.ingress.kubernetes.io/proxy-body-size "101m": is over the platform's maximum of 104857600 bytes (--max-proxy-body-size)`},
		{"no limit over a maximum", limits, map[string]string{nginxPrefix + "proxy-body-size": "0"}, "", "", "--max-proxy-body-size"},
		{"buffer over", limits, map[string]string{nginxPrefix + "client-body-buffer-size": "999999999m"}, "", "",
			`annotation nginx.ingress.kubernetes.io/client-body-buffer-size "999999999m": is over the platform's maximum of 1048576 bytes (--max-client-body-buffer-size)`},
		{"snippet over", limits, map[string]string{nginxPrefix + "configuration-snippet": "client_body_buffer_size 2m;"}, "", "",
			`snippet client_body_buffer_size "2m": is over the platform's maximum`},
		{"no maximum", Limits{}, map[string]string{nginxPrefix + "proxy-body-size": "0", nginxPrefix + "client-body-buffer-size": "999999999m"}, "0", "999999999m", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := snapshotOf(annotated(tc.annotations))
			s.Limits = tc.limits
			m, problems := Build(s)
			var loc *Location
			for l := range m.AllLocations() {
				loc = l
			}
			if loc == nil {
				t.Fatalf("no location; problems %v", problems)
			}
			if loc.ProxySettings().BodySize != tc.body || loc.ProxySettings().ClientBodyBufferSize != tc.buf {
				t.Errorf("body size %q, buffer %q; want %q, %q", loc.ProxySettings().BodySize, loc.ProxySettings().ClientBodyBufferSize, tc.body, tc.buf)
			}
			problemWith(t, problems, tc.problem)
		})
	}
}

// The regex paths of one host are capped, oldest Ingress first; the rest
// are Problems naming their Ingress, and other hosts keep their own.
func TestRegexPathsPerHost(t *testing.T) {
	regexPaths := func(host string, from, n int) ingressOption {
		var paths []networkingv1.HTTPIngressPath
		for i := from; i < from+n; i++ {
			paths = append(paths, httpPath(implType, fmt.Sprintf("/r%d/(a+)+$", i), backend("web", 80)))
		}
		return rule(host, paths...)
	}
	older := newIngress("tenant-b", "first", createdAt(1), annotation(nginxPrefix+"use-regex", "true"), regexPaths("b.test", 0, 3))
	newer := newIngress("tenant-b", "second", createdAt(2), annotation(nginxPrefix+"use-regex", "true"), regexPaths("b.test", 3, 2))
	other := newIngress("tenant-a", "app", createdAt(3), annotation(nginxPrefix+"use-regex", "true"), regexPaths("a.test", 0, 4))
	s := snapshotOf(older, newer, other)
	s.Limits = Limits{MaxRegexPathsPerHost: 4}
	m, problems := Build(s)
	counts := map[string]int{}
	for srv := range m.Servers.All() {
		for _, loc := range srv.Locations {
			if loc.PathType == PathRegex {
				counts[srv.Host]++
			}
		}
	}
	if counts["b.test"] != 4 || counts["a.test"] != 4 {
		t.Errorf("regex paths %v, want 4 on each host", counts)
	}
	var capped []Problem
	for _, p := range problems {
		if strings.Contains(p.Reason, "regex paths") {
			capped = append(capped, p)
		}
	}
	if len(capped) != 1 || capped[0].Name != "second" {
		t.Fatalf("problems %v, want one on tenant-b/second", capped)
	}
	problemWith(t, capped, `annotation nginx.ingress.kubernetes.io/use-regex "true": spec.rules[0].http.paths[1].path "/r4/(a+)+$": host "b.test" already has 4 regex paths, the most one host may have (--max-regex-paths-per-host); path left out`)
}
