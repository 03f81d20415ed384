package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// The tests of ingress-nginx's remaining balancing keys, end to end: the
// agent on manifests, a real nginx with two workers, Go backends on
// loopback (127.0.0.120 to .129). upstream-hash-by-subset sends a key to
// the endpoints of its subset only; affinity-mode persistent keeps every
// client on its endpoint when endpoints are added, where balanced may move
// some, but only to the new ones; session-cookie-conditional-samesite-none
// leaves SameSite=None out for a User-Agent that refuses it; and a canary's
// affinity is sticky by default, ignored with legacy.

// sendAs GETs host+path with headers (name, value pairs; an empty value is
// left out) and returns the backend that answered and the Set-Cookie header.
func (s *stack) sendAs(t *testing.T, host, path string, headers ...string) (string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+host+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] != "" {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("GET %s%s: %v", host, path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s%s: %d %s", host, path, resp.StatusCode, body)
	}
	return strings.TrimSpace(string(body)), resp.Header.Get("Set-Cookie")
}

// slice returns Service name on pool p with the endpoints addrs.
func (p *pool) slice(name string, addrs ...string) string {
	var eps []endpoint
	for _, a := range addrs {
		eps = append(eps, ep(a))
	}
	return service(name, p.port, eps...)
}

// ingress-nginx's chashsubset example: upstream-hash-by $request_uri onto
// subsets of 3 of 6 endpoints. Each key reaches exactly the 3 endpoints of
// its subset (each worker takes them in turn), different keys different
// subsets; adding a 7th endpoint changes a key's subset by at most one.
func TestHashSubset(t *testing.T) {
	addrs := []string{"127.0.0.120", "127.0.0.121", "127.0.0.122", "127.0.0.123", "127.0.0.124", "127.0.0.125", "127.0.0.126"}
	p := startPool(t, addrs...)
	s := newStack(t, map[string]string{
		"classes.yaml":  ingressClasses,
		"services.yaml": p.slice("nginxhello", addrs[:6]...),
		"web.yaml": ingress("nginxhello-ingress", ingressOpts{class: "restysync", host: "subset.test", paths: []path{prefix("/", "nginxhello")},
			annotations: map[string]string{
				"nginx.ingress.kubernetes.io/upstream-hash-by":             "$request_uri",
				"nginx.ingress.kubernetes.io/upstream-hash-by-subset":      "true",
				"nginx.ingress.kubernetes.io/upstream-hash-by-subset-size": "3",
			}}),
	})
	s.eventually("served", func() error { return s.served("subset.test") })
	s.settle()
	workers := s.steadyWorkers()

	const keys, perKey = 12, 30
	subsetOf := func(k int) map[string]int {
		counts := map[string]int{}
		for range perKey {
			counts[s.answer(t, "subset.test", "/key/"+strconv.Itoa(k))]++
		}
		return counts
	}
	before := make([]map[string]int, keys)
	union := map[string]bool{}
	for k := range keys {
		before[k] = subsetOf(k)
		// 30 requests over 2 workers: one has had at least 15, in turn
		// over the 3, so all 3 answer; no other endpoint ever does.
		if len(before[k]) != 3 {
			t.Errorf("/key/%d reached %d endpoints, want its subset of 3: %v", k, len(before[k]), before[k])
		}
		for a := range before[k] {
			union[a] = true
		}
	}
	t.Logf("%d keys, 3 endpoints each, reached %d of 6 endpoints", keys, len(union))
	if len(union) <= 3 {
		t.Errorf("every key reached the same endpoints %v: want subsets that differ by key", union)
	}

	s.writeFile("services.yaml", p.slice("nginxhello", addrs...))
	s.eventually("the 7th endpoint serves", func() error {
		for k := range 50 {
			if s.answer(t, "subset.test", "/other/"+strconv.Itoa(k)) == addrs[6] {
				return nil
			}
		}
		return fmt.Errorf("no key reached %s", addrs[6])
	})
	changed := 0
	for k := range keys {
		after := subsetOf(k)
		kept := 0
		for a := range after {
			if before[k][a] > 0 {
				kept++
			} else if a != addrs[6] {
				t.Errorf("/key/%d: subset %v, then %v: a member other than the new endpoint", k, before[k], after)
			}
		}
		if len(after) != 3 || kept < 2 {
			t.Errorf("/key/%d: subset %v, then %v: want 3 endpoints, at most one of them new", k, before[k], after)
		}
		if kept == 2 {
			changed++
		}
	}
	t.Logf("adding a 7th endpoint changed the subsets of %d of %d keys", changed, keys)
	s.noReload(t, workers, "subset hashing and an endpoint change")
}

// affinity-mode: with persistent, no client moves when endpoints are
// added; with balanced (the default), a client may move, only to a new
// endpoint, keeping its cookie.
func TestAffinityModes(t *testing.T) {
	addrs := []string{"127.0.0.126", "127.0.0.127", "127.0.0.128", "127.0.0.129"}
	p := startPool(t, addrs...)
	web := func(name, host, mode string) string {
		annotations := map[string]string{
			"nginx.ingress.kubernetes.io/affinity":            "cookie",
			"nginx.ingress.kubernetes.io/session-cookie-name": "route",
		}
		if mode != "" {
			annotations["nginx.ingress.kubernetes.io/affinity-mode"] = mode
		}
		return ingress(name, ingressOpts{class: "restysync", host: host, paths: []path{prefix("/", name)}, annotations: annotations})
	}
	services := func(addrs ...string) string {
		return p.slice("persistent", addrs...) + "---\n" + p.slice("balanced", addrs...)
	}
	s := newStack(t, map[string]string{
		"classes.yaml":    ingressClasses,
		"services.yaml":   services(addrs[:3]...),
		"persistent.yaml": web("persistent", "persistent.test", "persistent"),
		"balanced.yaml":   web("balanced", "balanced.test", ""),
	})
	s.eventually("served", func() error {
		if err := s.served("persistent.test"); err != nil {
			return err
		}
		return s.served("balanced.test")
	})
	s.settle()
	workers := s.steadyWorkers()

	const clients = 100
	pin := func(host string) ([]string, []string) {
		cookies, pinned := make([]string, clients), make([]string, clients)
		for i := range clients {
			body, setCookie := s.sendAs(t, host, "/")
			cookie, _, _ := strings.Cut(setCookie, ";")
			if !strings.HasPrefix(cookie, "route=") {
				t.Fatalf("%s: Set-Cookie %q, want route=…", host, setCookie)
			}
			cookies[i], pinned[i] = cookie, body
		}
		return cookies, pinned
	}
	pCookies, pPinned := pin("persistent.test")
	bCookies, bPinned := pin("balanced.test")
	for i := range clients {
		if body, again := s.sendAs(t, "persistent.test", "/", "Cookie", pCookies[i]); body != pPinned[i] || again != "" {
			t.Fatalf("persistent client %d: %s (Set-Cookie %q), want %s", i, body, again, pPinned[i])
		}
		if body, again := s.sendAs(t, "balanced.test", "/", "Cookie", bCookies[i]); body != bPinned[i] || again != "" {
			t.Fatalf("balanced client %d: %s (Set-Cookie %q), want %s", i, body, again, bPinned[i])
		}
	}

	newest := addrs[3]
	s.writeFile("services.yaml", services(addrs...))
	s.eventually("the new endpoint serves both hosts", func() error {
		for _, host := range []string{"persistent.test", "balanced.test"} {
			if s.spread(t, host, 30)[newest] == 0 {
				return fmt.Errorf("%s: no new client reached %s", host, newest)
			}
		}
		return nil
	})
	for i := range clients {
		if body, again := s.sendAs(t, "persistent.test", "/", "Cookie", pCookies[i]); body != pPinned[i] || again != "" {
			t.Errorf("persistent client %d: %s (Set-Cookie %q) after adding %s, want it kept on %s", i, body, again, newest, pPinned[i])
		}
	}
	moved := 0
	for i := range clients {
		body, again := s.sendAs(t, "balanced.test", "/", "Cookie", bCookies[i])
		if again != "" {
			t.Errorf("balanced client %d got a new cookie %q: its position still holds", i, again)
		}
		if body != bPinned[i] {
			moved++
			if body != newest {
				t.Errorf("balanced client %d moved from %s to %s: only moves to the new %s are allowed", i, bPinned[i], body, newest)
			}
		}
	}
	// How many move is chance (about a quarter); that is not asserted.
	t.Logf("adding a 4th endpoint: 0 of %d persistent and %d of %d balanced clients moved (all to %s)", clients, moved, clients, newest)
	s.noReload(t, workers, "endpoint changes")
}

// session-cookie-conditional-samesite-none: SameSite=None is left out for a
// browser that refuses it, sent to every other.
func TestSameSiteNoneConditional(t *testing.T) {
	addrs := []string{"127.0.0.120", "127.0.0.121"}
	p := startPool(t, addrs...)
	// The Ingress of ingress-nginx's affinity example (ingress-samesite.yaml).
	s := newStack(t, map[string]string{
		"classes.yaml":  ingressClasses,
		"services.yaml": p.slice("http-svc", addrs...),
		"web.yaml": ingress("cookie-samesite-none", ingressOpts{class: "restysync", host: "samesite.test", paths: []path{prefix("/", "http-svc")},
			annotations: map[string]string{
				"nginx.ingress.kubernetes.io/affinity":                                 "cookie",
				"nginx.ingress.kubernetes.io/session-cookie-name":                      "SSNONE",
				"nginx.ingress.kubernetes.io/session-cookie-secure":                    "true",
				"nginx.ingress.kubernetes.io/session-cookie-expires":                   "172800",
				"nginx.ingress.kubernetes.io/session-cookie-max-age":                   "172800",
				"nginx.ingress.kubernetes.io/session-cookie-samesite":                  "None",
				"nginx.ingress.kubernetes.io/session-cookie-conditional-samesite-none": "true",
			}}),
	})
	s.eventually("served", func() error { return s.served("samesite.test") })
	s.settle()

	for _, tc := range []struct {
		ua       string
		samesite bool
	}{
		{"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/60.0.3112.90 Safari/537.36", false},
		{"Mozilla/5.0 (iPhone; CPU iPhone OS 12_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/12.0 Mobile/15E148 Safari/604.1", false},
		{"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_14_6) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/12.1.2 Safari/605.1.15", false},
		{"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36", true},
		{"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Safari/605.1.15", true},
		{"Go-http-client/1.1", true},
	} {
		_, setCookie := s.sendAs(t, "samesite.test", "/", "User-Agent", tc.ua)
		if !strings.HasPrefix(setCookie, "SSNONE=") || !strings.Contains(setCookie, "; Max-Age=172800") ||
			!strings.Contains(setCookie, "; Secure; HttpOnly") || !strings.Contains(setCookie, "; Expires=") {
			t.Errorf("User-Agent %q: Set-Cookie %q lacks the cookie's attributes", tc.ua, setCookie)
		}
		if got := strings.Contains(setCookie, "; SameSite=None"); got != tc.samesite {
			t.Errorf("User-Agent %q: Set-Cookie %q: SameSite=None present %v, want %v", tc.ua, setCookie, got, tc.samesite)
		} else {
			t.Logf("User-Agent %q: %q", tc.ua, setCookie)
		}
	}
}

// affinity-canary-behavior: sticky (the default) keeps a client the canary
// served on the canary, and one the primary served on the primary; legacy
// lets the split decide each request.
func TestCanaryAffinityBehavior(t *testing.T) {
	mainAddrs, canaryAddrs := []string{"127.0.0.122", "127.0.0.123"}, []string{"127.0.0.124", "127.0.0.125"}
	p := startPool(t, append(mainAddrs, canaryAddrs...)...)
	canary := func(behavior string) string {
		annotations := map[string]string{
			"nginx.ingress.kubernetes.io/canary":        "true",
			"nginx.ingress.kubernetes.io/canary-weight": "50",
		}
		if behavior != "" {
			annotations["nginx.ingress.kubernetes.io/affinity-canary-behavior"] = behavior
		}
		return ingress("web-canary", ingressOpts{class: "restysync", host: "sticky-canary.test", paths: []path{prefix("/", "canary")},
			annotations: annotations})
	}
	s := newStack(t, map[string]string{
		"classes.yaml":  ingressClasses,
		"services.yaml": p.slice("main", mainAddrs...) + "---\n" + p.slice("canary", canaryAddrs...),
		"main.yaml": ingress("web", ingressOpts{class: "restysync", host: "sticky-canary.test", paths: []path{prefix("/", "main")},
			annotations: map[string]string{"nginx.ingress.kubernetes.io/affinity": "cookie"}}),
		"canary.yaml": canary(""),
	})
	side := func(addr string) string {
		if addr == canaryAddrs[0] || addr == canaryAddrs[1] {
			return "canary"
		}
		return "main"
	}
	s.eventually("the canary takes part of the traffic", func() error {
		for range 40 {
			if body, _ := s.sendAs(t, "sticky-canary.test", "/"); side(body) == "canary" {
				return nil
			}
		}
		return fmt.Errorf("no request reached the canary")
	})
	s.settle()

	seen := map[string]int{}
	var onMain, onCanary string
	for range 20 {
		first, setCookie := s.sendAs(t, "sticky-canary.test", "/")
		cookie, _, _ := strings.Cut(setCookie, ";")
		if !strings.HasPrefix(cookie, "INGRESSCOOKIE=") {
			t.Fatalf("Set-Cookie %q: want INGRESSCOOKIE on both sides (the canary carries the primary's affinity)", setCookie)
		}
		seen[side(first)]++
		for range 10 {
			if again, _ := s.sendAs(t, "sticky-canary.test", "/", "Cookie", cookie); again != first {
				t.Fatalf("sticky: a client first served by %s (%s) went to %s", first, side(first), again)
			}
		}
		if side(first) == "main" {
			onMain = cookie
		} else {
			onCanary = cookie
		}
	}
	t.Logf("sticky: 20 new clients went %v, and each stayed for 10 more requests", seen)

	s.writeFile("canary.yaml", canary("legacy"))
	for _, tc := range []struct{ what, cookie string }{{"pinned to the primary", onMain}, {"pinned to the canary", onCanary}} {
		if tc.cookie == "" {
			continue // all 20 went one way (a chance of 2 in a million)
		}
		s.eventually("legacy: the split ignores a client "+tc.what, func() error {
			sides := map[string]int{}
			for range 40 {
				body, _ := s.sendAs(t, "sticky-canary.test", "/", "Cookie", tc.cookie)
				sides[side(body)]++
			}
			if sides["main"] == 0 || sides["canary"] == 0 {
				return fmt.Errorf("40 requests went %v, want both sides", sides)
			}
			return nil
		})
	}
}
