package render

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/model"
)

// The tests of the balancing keys ingress-nginx has beyond the basic ones,
// in a real nginx (one worker): hashing onto subsets of endpoints,
// balanced and persistent affinity, SameSite=None by User-Agent, and the
// sticky and legacy affinity of canaries.

// affinityTag is the TAG of a backend's affinity cookies
// (restysync.affinity): 8 hex digits of the MD5 of its name up to "+".
func affinityTag(name string) string {
	base, _, _ := strings.Cut(name, "+")
	sum := md5.Sum([]byte(base))
	return hex.EncodeToString(sum[:])[:8]
}

// startEchoOn is startEchoBackend on address addr (a loopback address).
func startEchoOn(t *testing.T, addr, name string) echoBackend {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, name) }),
		ReadHeaderTimeout: 5 * time.Second,
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return echoBackend{name: name, ep: model.Endpoint{Address: addr, Port: int32(l.Addr().(*net.TCPAddr).Port)}}
}

// send GETs bal.example.com/path with headers (name, value pairs) and
// returns the body of a 200 and the Set-Cookie header.
func (dp *dataPlane) send(t *testing.T, path string, headers ...string) (string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://bal.example.com"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] != "" {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	resp, err := dp.client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %q %v", path, resp.StatusCode, body, err)
	}
	return string(body), resp.Header.Get("Set-Cookie")
}

var balancedCookie = regexp.MustCompile(`^[0-9a-f]{8}\.[0-9a-f]{8}$`)

func TestDataPlaneBalancingKeys(t *testing.T) {
	var web []echoBackend
	for i := range 7 {
		web = append(web, startEchoOn(t, fmt.Sprintf("127.0.0.%d", 120+i), fmt.Sprintf("web-%d", i+1)))
	}
	eps := func(bs ...echoBackend) []model.Endpoint {
		var out []model.Endpoint
		for _, b := range bs {
			out = append(out, b.ep)
		}
		return out
	}
	const primary, canaryName = "ns/prim:80@ns/main+ns/can", "ns/can:80@ns/can+ns/main"
	m := model.Model{Servers: model.ListOf(&model.Server{Host: "bal.example.com", Locations: []model.Location{
		loc("/subset", model.PathPrefix, "ns/subset:80"),
		loc("/sticky", model.PathPrefix, "ns/sticky:80"),
		loc("/samesite", model.PathPrefix, "ns/samesite:80"),
		loc("/split", model.PathPrefix, primary),
	}})}
	dp, _, _ := startDataPlane(t, m, nil)

	t.Run("bad policies are refused naming the field", func(t *testing.T) {
		for _, tc := range []struct{ policy, reason string }{
			{`{"algorithm":"hash","hash_by":"uri","hash_subset":0}`, "upserts[0].policy.hash_subset: must be an integer 1..1000"},
			{`{"algorithm":"hash","hash_by":"uri","hash_subset":1001}`, "upserts[0].policy.hash_subset: must be an integer 1..1000"},
			{`{"algorithm":"hash","hash_by":"uri","hash_subset":"3"}`, "upserts[0].policy.hash_subset: must be an integer 1..1000"},
			{`{"algorithm":"hash","hash_by":"uri","hash_subset":2.5}`, "upserts[0].policy.hash_subset: must be an integer 1..1000"},
			{`{"hash_subset":3}`, "upserts[0].policy.hash_subset: is only valid with algorithm hash"},
			{`{"algorithm":"ewma","hash_subset":3}`, "upserts[0].policy.hash_subset: is only valid with algorithm hash"},
			{`{"affinity":"cookie","cookie_name":"a","affinity_mode":"sticky"}`, "upserts[0].policy.affinity_mode: is not one of the allowed values"},
			{`{"affinity_mode":["persistent"]}`, "upserts[0].policy.affinity_mode: is not one of the allowed values"},
			{`{"cookie_conditional_samesite_none":"true"}`, "upserts[0].policy.cookie_conditional_samesite_none: must be true or false"},
			{`{"canary_affinity_legacy":1}`, "upserts[0].policy.canary_affinity_legacy: must be true or false"},
			{`{"canary_affinity_legacy":true}`, "upserts[0].policy.canary_affinity_legacy: is only valid with canary"},
			{`{"canary_affinity_legacy":false}`, "upserts[0].policy.canary_affinity_legacy: is only valid with canary"},
		} {
			t.Run(tc.policy, func(t *testing.T) {
				dp.expectRefused(t, "/backends", `{"upserts":[{"name":"ns/bad:80","endpoints":[],"policy":`+tc.policy+`}]}`, tc.reason)
			})
		}
		for _, b := range dp.backends(t) {
			if b.Name == "ns/bad:80" {
				t.Errorf("a refused policy was stored: %+v", b)
			}
		}
	})

	t.Run("hashing onto subsets", func(t *testing.T) {
		policy := map[string]any{"algorithm": "hash", "hash_by": "uri", "hash_subset": 3}
		dp.pushPolicies(t, policyBackend{Name: "ns/subset:80", Endpoints: eps(web[:6]...), Policy: policy})
		subsets := map[string]map[string]int{}
		served := map[string]bool{}
		for k := range 20 {
			path := fmt.Sprintf("/subset/key-%d", k)
			counts := map[string]int{}
			for range 12 {
				body, _ := dp.send(t, path)
				counts[body]++
				served[body] = true
			}
			// One worker: its turn counts every request, so the 12 are
			// 4 for each member of the subset.
			if len(counts) != 3 {
				t.Errorf("%s went to %d endpoints, want its subset of 3: %v", path, len(counts), counts)
			}
			for name, n := range counts {
				if n != 4 {
					t.Errorf("%s: %s served %d of 12, want 4 (in turn): %v", path, name, n, counts)
				}
			}
			subsets[path] = counts
		}
		if len(served) != 6 {
			t.Errorf("20 keys reached %d of 6 endpoints: %v", len(served), served)
		}
		// A seventh endpoint changes a key's subset by at most one member.
		dp.pushPolicies(t, policyBackend{Name: "ns/subset:80", Endpoints: eps(web...), Policy: policy})
		changed := 0
		for path, before := range subsets {
			after := map[string]int{}
			for range 12 {
				body, _ := dp.send(t, path)
				after[body]++
			}
			kept := 0
			for name := range after {
				if before[name] > 0 {
					kept++
				}
			}
			if len(after) != 3 || kept < 2 {
				t.Errorf("%s: subset %v, then %v: want 3 endpoints, at most one new", path, before, after)
			}
			if kept == 2 {
				changed++
				if after["web-7"] == 0 {
					t.Errorf("%s: subset %v, then %v: the new member should be the new endpoint", path, before, after)
				}
			}
		}
		t.Logf("adding a 7th endpoint changed the subsets of %d of 20 keys", changed)
		// A subset as large as the backend is the whole backend.
		dp.pushPolicies(t, policyBackend{Name: "ns/subset:80", Endpoints: eps(web[:2]...), Policy: policy})
		if counts := dp.spread(t, "bal.example.com", "/subset/one-key", 10); counts["web-1"] != 5 || counts["web-2"] != 5 {
			t.Errorf("subset of 3 over 2 endpoints: %v, want both in turn", counts)
		}
	})

	// clients pins n clients to ns/sticky:80 and returns their cookies and
	// endpoints.
	clients := func(t *testing.T, n int) ([]string, []string) {
		t.Helper()
		cookies, pinned := make([]string, n), make([]string, n)
		for i := range n {
			body, setCookie := dp.send(t, "/sticky")
			value, _, _ := strings.Cut(setCookie, ";")
			cookies[i], pinned[i] = value, body
		}
		return cookies, pinned
	}
	t.Run("balanced affinity moves some sessions to new endpoints", func(t *testing.T) {
		policy := map[string]any{"affinity": "cookie", "cookie_name": "route"}
		dp.pushPolicies(t, policyBackend{Name: "ns/sticky:80", Endpoints: eps(web[:3]...), Policy: policy})
		cookies, pinned := clients(t, 200)
		for i, c := range cookies {
			name, value, _ := strings.Cut(c, "=")
			if name != "route" || !balancedCookie.MatchString(value) || !strings.HasSuffix(value, "."+affinityTag("ns/sticky:80")) {
				t.Fatalf("Set-Cookie %q: want route=<8 hex digits>.<tag>", c)
			}
			if body, again := dp.send(t, "/sticky", "Cookie", c); body != pinned[i] || again != "" {
				t.Fatalf("client %d: %s (Set-Cookie %q), want %s and no new cookie", i, body, again, pinned[i])
			}
		}
		dp.pushPolicies(t, policyBackend{Name: "ns/sticky:80", Endpoints: eps(web[:4]...), Policy: policy})
		moved := 0
		for i, c := range cookies {
			body, again := dp.send(t, "/sticky", "Cookie", c)
			if again != "" {
				t.Errorf("client %d got a new cookie %q: its position still holds", i, again)
			}
			if body != pinned[i] {
				moved++
				if body != "web-4" {
					t.Errorf("client %d moved from %s to %s, want only moves to the new web-4", i, pinned[i], body)
				}
			}
		}
		t.Logf("adding a 4th endpoint moved %d of 200 balanced sessions (1/4 = 50)", moved)
		// A quarter, binomial: 50 ± 6; the new endpoint's share of the
		// ring itself varies by a couple of percent.
		if moved < 15 || moved > 90 {
			t.Errorf("%d of 200 sessions moved, want about a quarter", moved)
		}
		// Hostile and foreign cookies are no pins: served, and re-pinned.
		tag := affinityTag("ns/sticky:80")
		for _, bad := range []string{"zz", "ffffffff", "ffffffff.", "ffffffff.00000000", "fffffffff." + tag, "ffff-fff." + tag,
			strings.Repeat("f", 4000), "ffffffff." + tag + ".x", "%00ffffff." + tag} {
			if _, again := dp.send(t, "/sticky", "Cookie", "route="+bad); !strings.HasPrefix(again, "route=") {
				t.Errorf("cookie route=%.40q: Set-Cookie %q, want a new pin", bad, again)
			}
		}
		// The highest position wraps around the ring to the first point.
		if _, again := dp.send(t, "/sticky", "Cookie", "route=ffffffff."+tag); again != "" {
			t.Errorf("the highest position: Set-Cookie %q, want it to pin", again)
		}
		// The endpoint of a session goes: its position falls to another.
		dp.pushPolicies(t, policyBackend{Name: "ns/sticky:80", Endpoints: eps(web[1:4]...), Policy: policy})
		for i, c := range cookies {
			if body, _ := dp.send(t, "/sticky", "Cookie", c); body == "web-1" {
				t.Errorf("client %d still on the removed web-1", i)
			}
		}
	})

	t.Run("persistent affinity keeps every session", func(t *testing.T) {
		policy := map[string]any{"affinity": "cookie", "cookie_name": "route", "affinity_mode": "persistent"}
		dp.pushPolicies(t, policyBackend{Name: "ns/sticky:80", Endpoints: eps(web[:3]...), Policy: policy})
		cookies, pinned := clients(t, 100)
		dp.pushPolicies(t, policyBackend{Name: "ns/sticky:80", Endpoints: eps(web[:5]...), Policy: policy})
		for i, c := range cookies {
			if body, again := dp.send(t, "/sticky", "Cookie", c); body != pinned[i] || again != "" {
				t.Errorf("client %d: %s (Set-Cookie %q) after adding endpoints, want %s and no new cookie", i, body, again, pinned[i])
			}
		}
		// A balanced cookie is no persistent pin, nor is another backend's:
		// both re-pin.
		for _, stale := range []string{"route=0000abcd." + affinityTag("ns/sticky:80"), "route=" + cookieID(web[0].ep) + ".00000000"} {
			if _, again := dp.send(t, "/sticky", "Cookie", stale); !strings.HasPrefix(again, "route=") {
				t.Errorf("cookie %q: Set-Cookie %q, want a new pin", stale, again)
			}
		}
	})

	t.Run("SameSite=None left out for clients that refuse it", func(t *testing.T) {
		dp.pushPolicies(t, policyBackend{Name: "ns/samesite:80", Endpoints: eps(web[:2]...), Policy: map[string]any{
			"affinity": "cookie", "cookie_name": "S", "cookie_samesite": "None", "cookie_secure": true,
			"cookie_conditional_samesite_none": true,
		}})
		incompatible := []string{
			"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/51.0.2704.103 Safari/537.36",
			"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/66.0.3359.181 Safari/537.36",
			"Mozilla/5.0 (iPhone; CPU iPhone OS 12_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/12.1.2 Mobile/15E148 Safari/604.1",
			"Mozilla/5.0 (iPad; CPU OS 12_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/13.0 Mobile/15E148 Safari/604.1",
			"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_14_6) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/12.1.2 Safari/605.1.15",
		}
		compatible := []string{
			"", // no User-Agent
			"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/80.0.3987.87 Safari/537.36",
			"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36",
			"Mozilla/5.0 (iPhone; CPU iPhone OS 13_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/13.0 Mobile/15E148 Safari/604.1",
			"Mozilla/5.0 (iPhone; CPU iPhone OS 120_0 like Mac OS X) AppleWebKit/605.1.15",
			"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_2) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/13.0.4 Safari/605.1.15",
			"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_14_6) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/79.0.3945.117 Safari/537.36",
			"Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0",
			"curl/8.5.0",
			// hostile ones
			strings.Repeat("Chrome/", 1000),
			"Chrome/99999999999999999999999999",
			"\xff\xfe CPU iPhone OS 1" + strings.Repeat("2", 100),
		}
		for _, ua := range incompatible {
			_, setCookie := dp.send(t, "/samesite", "User-Agent", ua)
			if strings.Contains(setCookie, "SameSite") || !strings.HasSuffix(setCookie, "; Path=/; Secure; HttpOnly") {
				t.Errorf("User-Agent %q: Set-Cookie %q, want no SameSite (and Secure, HttpOnly)", ua, setCookie)
			}
		}
		for _, ua := range compatible {
			_, setCookie := dp.send(t, "/samesite", "User-Agent", ua)
			if !strings.HasSuffix(setCookie, "; Path=/; SameSite=None; Secure; HttpOnly") {
				t.Errorf("User-Agent %q: Set-Cookie %q, want SameSite=None", ua, setCookie)
			}
		}
		// Without the annotation every client gets SameSite=None.
		dp.pushPolicies(t, policyBackend{Name: "ns/samesite:80", Endpoints: eps(web[:2]...), Policy: map[string]any{
			"affinity": "cookie", "cookie_name": "S", "cookie_samesite": "None", "cookie_secure": true,
		}})
		if _, setCookie := dp.send(t, "/samesite", "User-Agent", incompatible[0]); !strings.Contains(setCookie, "; SameSite=None;") {
			t.Errorf("unconditional: Set-Cookie %q, want SameSite=None", setCookie)
		}
	})

	t.Run("canary affinity, sticky and legacy", func(t *testing.T) {
		affinity := map[string]any{"affinity": "cookie", "cookie_name": "route"}
		split := func(extra map[string]any) policyBackend {
			p := map[string]any{"canary": canaryName, "canary_weight": 50, "canary_header": "X-Canary"}
			for k, v := range affinity {
				p[k] = v
			}
			for k, v := range extra {
				p[k] = v
			}
			return policyBackend{Name: primary, Endpoints: eps(web[0], web[1]), Policy: p}
		}
		canaryBackend := policyBackend{Name: canaryName, Endpoints: eps(web[5], web[6]), Policy: affinity}
		side := func(body string) string {
			if body == "web-6" || body == "web-7" {
				return "canary"
			}
			return "primary"
		}
		dp.pushPolicies(t, split(nil), canaryBackend)
		seen := map[string]int{}
		var onPrimary, onCanary string
		for range 30 {
			body, setCookie := dp.send(t, "/split")
			cookie, _, _ := strings.Cut(setCookie, ";")
			first := side(body)
			seen[first]++
			for range 10 {
				again, _ := dp.send(t, "/split", "Cookie", cookie)
				if again != body {
					t.Fatalf("sticky: a client first served by %s (%s) went to %s", body, first, again)
				}
			}
			if first == "primary" {
				onPrimary = cookie
			} else {
				onCanary = cookie
			}
		}
		t.Logf("30 new clients, canary weight 50: %v; each stayed for 10 more requests", seen)
		if onPrimary == "" || onCanary == "" {
			t.Fatalf("30 clients all went one way: %v", seen)
		}
		if tag := affinityTag(primary); !strings.HasSuffix(onPrimary, "."+tag) {
			t.Errorf("primary cookie %q, want the tag of ns/prim:80@ns/main (%s)", onPrimary, tag)
		}
		// Sticky: the pin goes before the header, as in ingress-nginx.
		if body, _ := dp.send(t, "/split", "Cookie", onPrimary, "X-Canary", "always"); side(body) != "primary" {
			t.Errorf("sticky, pinned to the primary with X-Canary: always: served by the %s", side(body))
		}
		if body, _ := dp.send(t, "/split", "Cookie", onCanary, "X-Canary", "never"); side(body) != "canary" {
			t.Errorf("sticky, pinned to the canary with X-Canary: never: served by the %s", side(body))
		}

		// Legacy: the split ignores the cookie; the canary is not sticky
		// (its own affinity: none).
		dp.pushPolicies(t, split(map[string]any{"canary_affinity_legacy": true}),
			policyBackend{Name: canaryName, Endpoints: eps(web[5], web[6])})
		legacy := map[string]int{}
		for range 40 {
			body, _ := dp.send(t, "/split", "Cookie", onPrimary)
			legacy[side(body)]++
		}
		t.Logf("legacy, 40 requests of a client pinned to the primary: %v", legacy)
		if legacy["canary"] == 0 || legacy["primary"] == 0 {
			t.Errorf("legacy: a pinned client went %v, want both sides by weight", legacy)
		}
		if body, _ := dp.send(t, "/split", "Cookie", onPrimary, "X-Canary", "always"); side(body) != "canary" {
			t.Errorf("legacy, X-Canary: always: served by the %s", side(body))
		}
	})

	t.Run("a pin made before the canary came holds after", func(t *testing.T) {
		// The location's backend before the canary Ingress: the primary
		// variant without "+ns/can"; its clients keep their pins after.
		before := model.Model{Servers: model.ListOf(&model.Server{Host: "bal.example.com", Locations: []model.Location{
			loc("/split", model.PathPrefix, "ns/prim:80@ns/main"),
		}})}
		dp.pushPolicies(t, policyBackend{Name: "ns/prim:80@ns/main", Endpoints: eps(web[0], web[1]), Policy: map[string]any{"affinity": "cookie", "cookie_name": "route"}})
		dp.pushRoutes(t, before)
		body, setCookie := dp.send(t, "/split")
		cookie, _, _ := strings.Cut(setCookie, ";")
		dp.pushPolicies(t, policyBackend{Name: primary, Endpoints: eps(web[0], web[1]), Policy: map[string]any{
			"affinity": "cookie", "cookie_name": "route", "canary": canaryName, "canary_weight": 100}},
			policyBackend{Name: canaryName, Endpoints: eps(web[5], web[6]), Policy: map[string]any{"affinity": "cookie", "cookie_name": "route"}})
		dp.pushRoutes(t, m)
		for range 10 {
			if again, _ := dp.send(t, "/split", "Cookie", cookie); again != body {
				t.Fatalf("a client pinned to %s before the canary went to %s (canary weight 100)", body, again)
			}
		}
		if got, _ := dp.send(t, "/split"); got != "web-6" && got != "web-7" {
			t.Errorf("a new client went to %s, want the canary (weight 100)", got)
		}
	})
}
