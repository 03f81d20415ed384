package render

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// The balancing data plane tests run restysync.balancer and its algorithm
// modules in a real nginx (one worker) against Go backends: the policy
// checks of POST /backends, cookie affinity, consistent hashing, EWMA and
// retries with passive health.

// policyBackend is a backend of the config API with a policy.
type policyBackend struct {
	Name      string           `json:"name"`
	Endpoints []model.Endpoint `json:"endpoints"`
	Policy    map[string]any   `json:"policy,omitempty"`
}

func (dp *dataPlane) pushPolicies(t *testing.T, upserts ...policyBackend) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"upserts": upserts})
	if err != nil {
		t.Fatal(err)
	}
	if code, reply := dp.api(t, http.MethodPost, "/backends", body); code != http.StatusOK {
		t.Fatalf("POST /backends: %d %s", code, reply)
	}
}

// startSlowBackend is startEchoBackend whose answers take delay.
func startSlowBackend(t *testing.T, name string, delay time.Duration) echoBackend {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(delay)
			io.WriteString(w, name)
		}),
		ReadHeaderTimeout: 5 * time.Second,
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return echoBackend{name: name, ep: model.Endpoint{Address: "127.0.0.1", Port: int32(l.Addr().(*net.TCPAddr).Port)}}
}

// cookieID is the affinity cookie value restysync.affinity gives ep.
func cookieID(ep model.Endpoint) string {
	sum := md5.Sum([]byte(fmt.Sprintf("%s:%d", ep.Address, ep.Port)))
	return hex.EncodeToString(sum[:])[:16]
}

// request sends GET http://bal.example.com/path with the cookie header
// (if any) and returns the status, body and Set-Cookie header.
func (dp *dataPlane) request(t *testing.T, path, cookie string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://bal.example.com"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cookie != "" {
		req.Header.Set("Cookie", cookie)
	}
	resp, err := dp.client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(body), resp.Header.Get("Set-Cookie")
}

// requestWithHeader sends GET path with one header and returns the body of
// a 200.
func (dp *dataPlane) requestWithHeader(t *testing.T, path, name, value string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://bal.example.com"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(name, value)
	resp, err := dp.client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %q %v", path, resp.StatusCode, body, err)
	}
	return string(body)
}

func TestDataPlaneBalancing(t *testing.T) {
	web := []echoBackend{startEchoBackend(t, "web-1"), startEchoBackend(t, "web-2"), startEchoBackend(t, "web-3")}
	slow := startSlowBackend(t, "slow", 30*time.Millisecond)
	dead := model.Endpoint{Address: "127.0.0.1", Port: int32(nginxproc.FreePort(t))} // nothing listens here
	eps := func(bs ...echoBackend) []model.Endpoint {
		var out []model.Endpoint
		for _, b := range bs {
			out = append(out, b.ep)
		}
		return out
	}

	m := model.Model{Servers: model.ListOf(&model.Server{Host: "bal.example.com", Locations: []model.Location{
		loc("/sticky", model.PathPrefix, "ns/sticky:80"),
		loc("/change", model.PathPrefix, "ns/change:80"),
		loc("/keep", model.PathPrefix, "ns/keep:80"),
		loc("/hash", model.PathPrefix, "ns/hash:80"),
		loc("/ewma", model.PathPrefix, "ns/ewma:80"),
		loc("/health", model.PathPrefix, "ns/health:80"),
		loc("/fallback", model.PathPrefix, "ns/nofb:80"),
	}})}
	dp, _, _ := startDataPlane(t, m, nil)

	t.Run("bad policies are rejected naming the field", func(t *testing.T) {
		tests := []struct{ policy, reason string }{
			{`"ewma"`, "upserts[0].policy: must be an object"},
			{`{"algorithm":"random"}`, "upserts[0].policy.algorithm: is not one of the allowed values"},
			{`{"algorithm":"hash"}`, "upserts[0].policy.hash_by: is required with algorithm hash"},
			{`{"algorithm":"hash","hash_by":"$request_uri"}`, "upserts[0].policy.hash_by: must be one to four nginx variable names"},
			{`{"algorithm":"hash","hash_by":"a b c d e"}`, "upserts[0].policy.hash_by: must be one to four nginx variable names"},
			{`{"tries":0}`, "upserts[0].policy.tries: must be an integer 1..20"},
			{`{"tries":21}`, "upserts[0].policy.tries: must be an integer 1..20"},
			{`{"max_fails":1.5}`, "upserts[0].policy.max_fails: must be an integer 1..1000"},
			{`{"fail_timeout":0}`, "upserts[0].policy.fail_timeout: must be an integer 1..3600"},
			{`{"affinity":"ip"}`, "upserts[0].policy.affinity: is not one of the allowed values"},
			{`{"cookie_name":"a b"}`, "upserts[0].policy.cookie_name: must be a cookie name"},
			{`{"cookie_path":"/a;b"}`, "upserts[0].policy.cookie_path: must be a cookie path"},
			{`{"cookie_samesite":"lax"}`, "upserts[0].policy.cookie_samesite: is not one of the allowed values"},
			{`{"cookie_secure":"true"}`, "upserts[0].policy.cookie_secure: must be true or false"},
			{`{"cookie_domain":"a;b"}`, "upserts[0].policy.cookie_domain: must be a domain name"},
			{`{"cookie_expires":-1}`, "upserts[0].policy.cookie_expires: must be an integer"},
			{`{"weight":1}`, "upserts[0].policy.weight: unknown field"},
		}
		for _, tc := range tests {
			t.Run(tc.policy, func(t *testing.T) {
				body := `{"upserts":[{"name":"ns/bad:80","endpoints":[],"policy":` + tc.policy + `}]}`
				code, reply := dp.api(t, http.MethodPost, "/backends", []byte(body))
				if code != http.StatusBadRequest || !strings.Contains(string(reply), tc.reason) {
					t.Errorf("got %d %s, want 400 with %q", code, reply, tc.reason)
				}
			})
		}
		if got := dp.backends(t); len(got) != 0 {
			t.Errorf("rejected policies stored backends: %+v", got)
		}
	})

	t.Run("cookie affinity", func(t *testing.T) {
		dp.pushPolicies(t, policyBackend{Name: "ns/sticky:80", Endpoints: eps(web...), Policy: map[string]any{
			"affinity": "cookie", "affinity_mode": "persistent", "cookie_name": "SESSION", "cookie_path": "/sticky", "cookie_max_age": 60,
			"cookie_samesite": "Lax", "cookie_secure": true,
		}})
		code, first, setCookie := dp.request(t, "/sticky", "")
		if code != http.StatusOK {
			t.Fatalf("got %d %s", code, first)
		}
		value, attrs, _ := strings.Cut(setCookie, ";")
		name, id, _ := strings.Cut(value, "=")
		pin, tag, _ := strings.Cut(id, ".")
		if name != "SESSION" || len(pin) != 16 || tag != affinityTag("ns/sticky:80") || strings.Contains(setCookie, "127.0.0.1") {
			t.Errorf("Set-Cookie %q: want SESSION=<16 hex digits>.<tag> that does not name the address", setCookie)
		}
		if want := " Path=/sticky; Max-Age=60; SameSite=Lax; Secure; HttpOnly"; attrs != want {
			t.Errorf("cookie attributes %q, want %q", attrs, want)
		}
		for range 12 {
			code, body, again := dp.request(t, "/sticky", value)
			if code != http.StatusOK || body != first || again != "" {
				t.Fatalf("with the cookie: %d %q Set-Cookie %q, want %q and no new cookie", code, body, again, first)
			}
		}
		// A cookie naming no endpoint of the backend re-pins.
		if _, _, again := dp.request(t, "/sticky", "SESSION=0123456789abcdef"); !strings.HasPrefix(again, "SESSION=") {
			t.Errorf("a stale cookie got Set-Cookie %q, want a new one", again)
		}
	})

	t.Run("change on failure", func(t *testing.T) {
		sticky := map[string]any{"affinity": "cookie", "affinity_mode": "persistent", "cookie_name": "S", "max_fails": 1000}
		change := map[string]any{"affinity": "cookie", "affinity_mode": "persistent", "cookie_name": "S", "max_fails": 1000, "cookie_change_on_failure": true}
		dp.pushPolicies(t,
			policyBackend{Name: "ns/change:80", Endpoints: []model.Endpoint{dead, web[0].ep}, Policy: change},
			policyBackend{Name: "ns/keep:80", Endpoints: []model.Endpoint{dead, web[0].ep}, Policy: sticky},
		)
		pinned := "S=" + cookieID(dead)
		code, body, setCookie := dp.request(t, "/change", pinned)
		if code != http.StatusOK || body != "web-1" {
			t.Fatalf("pinned to a dead endpoint: %d %q, want the retry to reach web-1", code, body)
		}
		if want := "S=" + cookieID(web[0].ep) + "." + affinityTag("ns/change:80") + ";"; !strings.HasPrefix(setCookie, want) {
			t.Errorf("Set-Cookie %q after the failure, want it to re-pin to web-1 (%s)", setCookie, want)
		}
		code, body, setCookie = dp.request(t, "/keep", pinned)
		if code != http.StatusOK || body != "web-1" || setCookie != "" {
			t.Errorf("without change on failure: %d %q Set-Cookie %q, want web-1 and the pin kept", code, body, setCookie)
		}
	})

	t.Run("cookie domain and expires", func(t *testing.T) {
		dp.pushPolicies(t, policyBackend{Name: "ns/keep:80", Endpoints: eps(web...), Policy: map[string]any{
			"affinity": "cookie", "cookie_name": "S2", "cookie_domain": ".example.com", "cookie_expires": 3600,
		}})
		_, _, setCookie := dp.request(t, "/keep", "")
		before, expires, ok := strings.Cut(setCookie, "; Expires=")
		if !ok || !strings.HasSuffix(before, "; Path=/; Domain=.example.com; HttpOnly") {
			t.Fatalf("Set-Cookie %q: want Path=/, Domain=.example.com, HttpOnly and Expires", setCookie)
		}
		at, err := http.ParseTime(expires)
		if err != nil || at.Sub(time.Now()) < 3500*time.Second || at.Sub(time.Now()) > 3700*time.Second {
			t.Errorf("Expires=%q (%v): want about an hour from now", expires, err)
		}
	})

	t.Run("consistent hashing", func(t *testing.T) {
		dp.pushPolicies(t, policyBackend{Name: "ns/hash:80", Endpoints: eps(web...), Policy: map[string]any{"algorithm": "hash", "hash_by": "request_uri"}})
		owner := map[string]string{}
		counts := map[string]int{}
		for i := range 90 {
			uri := fmt.Sprintf("/hash/key-%d", i)
			_, body, _ := dp.request(t, uri, "")
			owner[uri] = body
			counts[body]++
		}
		for uri, want := range owner {
			if _, body, _ := dp.request(t, uri, ""); body != want {
				t.Errorf("%s went to %s, then to %s", uri, want, body)
			}
		}
		t.Logf("90 keys over 3 endpoints: %v", counts)
		for _, w := range web {
			if counts[w.name] < 10 {
				t.Errorf("%s owns %d of 90 keys: %v", w.name, counts[w.name], counts)
			}
		}
	})

	t.Run("consistent hashing by a header and by a cookie", func(t *testing.T) {
		for _, tc := range []struct{ hashBy, header string }{{"http_x_user", "X-User"}, {"cookie_user", "Cookie"}} {
			dp.pushPolicies(t, policyBackend{Name: "ns/hash:80", Endpoints: eps(web...), Policy: map[string]any{"algorithm": "hash", "hash_by": tc.hashBy}})
			owner := map[string]string{}
			counts := map[string]int{}
			for round := range 2 {
				for i := range 60 {
					key := fmt.Sprintf("user-%d", i)
					value := key
					if tc.header == "Cookie" {
						value = "user=" + key
					}
					// Another path each time: only the key may decide.
					body := dp.requestWithHeader(t, fmt.Sprintf("/hash/%d/%d", round, i), tc.header, value)
					if round == 0 {
						owner[key] = body
						counts[body]++
					} else if body != owner[key] {
						t.Errorf("%s %s went to %s, then to %s", tc.header, key, owner[key], body)
					}
				}
			}
			t.Logf("hash by $%s: 60 keys over 3 endpoints: %v", tc.hashBy, counts)
			for _, w := range web {
				if counts[w.name] < 5 {
					t.Errorf("hash by $%s: %s owns %d of 60 keys: %v", tc.hashBy, w.name, counts[w.name], counts)
				}
			}
		}
	})

	t.Run("consistent hashing by two variables", func(t *testing.T) {
		dp.pushPolicies(t, policyBackend{Name: "ns/hash:80", Endpoints: eps(web...), Policy: map[string]any{"algorithm": "hash", "hash_by": "http_x_user uri"}})
		owner := map[int]string{}
		counts := map[string]int{}
		moved := 0
		for round := range 2 {
			for i := range 60 {
				body := dp.requestWithHeader(t, fmt.Sprintf("/hash/%d", i), "X-User", fmt.Sprintf("user-%d", i))
				if round == 0 {
					owner[i] = body
					counts[body]++
				} else if body != owner[i] {
					t.Errorf("user-%d on /hash/%d went to %s, then to %s", i, i, owner[i], body)
				}
			}
		}
		for i := range 60 {
			if dp.requestWithHeader(t, "/hash/other", "X-User", fmt.Sprintf("user-%d", i)) != owner[i] {
				moved++
			}
		}
		t.Logf("hash by $http_x_user$uri: 60 keys over 3 endpoints: %v; %d of 60 users went elsewhere on another path", counts, moved)
		for _, w := range web {
			if counts[w.name] < 5 {
				t.Errorf("%s owns %d of 60 keys: %v", w.name, counts[w.name], counts)
			}
		}
		if moved == 0 {
			t.Error("no user went elsewhere on another path: the path is not part of the key")
		}
	})

	t.Run("fallback while a backend has no endpoints", func(t *testing.T) {
		empty := policyBackend{Name: "ns/nofb:80", Endpoints: []model.Endpoint{}, Policy: map[string]any{"fallback": "ns/fb:80"}}
		dp.pushPolicies(t, empty, policyBackend{Name: "ns/fb:80", Endpoints: eps(web[2])})
		if code, body, _ := dp.request(t, "/fallback", ""); code != http.StatusOK || body != "web-3" {
			t.Errorf("no endpoints, a fallback with one: %d %q, want 200 from web-3", code, body)
		}
		dp.pushPolicies(t, policyBackend{Name: "ns/nofb:80", Endpoints: eps(web[0]), Policy: map[string]any{"fallback": "ns/fb:80"}})
		if code, body, _ := dp.request(t, "/fallback", ""); code != http.StatusOK || body != "web-1" {
			t.Errorf("with an endpoint of its own: %d %q, want 200 from web-1", code, body)
		}
		dp.pushPolicies(t, empty, policyBackend{Name: "ns/fb:80", Endpoints: []model.Endpoint{}})
		if code, _, _ := dp.request(t, "/fallback", ""); code != http.StatusServiceUnavailable {
			t.Errorf("no endpoints anywhere: %d, want 503", code)
		}
	})

	t.Run("ewma avoids the slow endpoint", func(t *testing.T) {
		dp.pushPolicies(t, policyBackend{Name: "ns/ewma:80", Endpoints: append(eps(web[0], web[1]), slow.ep), Policy: map[string]any{"algorithm": "ewma"}})
		counts := map[string]int{}
		for range 150 {
			_, body, _ := dp.request(t, "/ewma", "")
			counts[body]++
		}
		t.Logf("150 requests: %v", counts)
		if counts["slow"] > 15 { // round robin would give it 50
			t.Errorf("the slow endpoint got %d of 150 requests: %v", counts["slow"], counts)
		}
		// A push that adds an endpoint keeps the scores of those that
		// remain: the slow one gets nothing. With fresh scores every
		// worker would try it about once in four until it measured it.
		dp.pushPolicies(t, policyBackend{Name: "ns/ewma:80", Endpoints: append(eps(web...), slow.ep), Policy: map[string]any{"algorithm": "ewma"}})
		after := map[string]int{}
		for range 40 {
			_, body, _ := dp.request(t, "/ewma", "")
			after[body]++
		}
		t.Logf("40 requests after adding web-3: %v", after)
		if after["slow"] > 0 || after["web-3"] == 0 {
			t.Errorf("after a push that added web-3: %v, want none for slow (its score kept) and some for web-3", after)
		}
	})

	t.Run("retries and passive health", func(t *testing.T) {
		attempts := func() int {
			n := 0
			for _, line := range strings.Split(dp.errorLog(t), "\n") {
				if strings.Contains(line, "connect() failed") && strings.Contains(line, fmt.Sprintf("upstream: \"http://127.0.0.1:%d/", dead.Port)) {
					n++
				}
			}
			return n
		}
		before := attempts()
		dp.pushPolicies(t, policyBackend{Name: "ns/health:80", Endpoints: []model.Endpoint{dead, web[0].ep, web[1].ep},
			Policy: map[string]any{"max_fails": 2, "fail_timeout": 60}})
		for range 30 {
			if code, body, _ := dp.request(t, "/health", ""); code != http.StatusOK {
				t.Fatalf("got %d %q: the retry did not reach a live endpoint", code, body)
			}
		}
		if n := attempts() - before; n != 2 {
			t.Errorf("%d connection attempts to the dead endpoint, want max_fails = 2", n)
		}
		// tries bounds the endpoints one request tries: with every endpoint
		// dead, each request makes exactly that many attempts.
		deadOnes := []model.Endpoint{dead, {Address: "127.0.0.1", Port: int32(nginxproc.FreePort(t))}, {Address: "127.0.0.1", Port: int32(nginxproc.FreePort(t))}}
		for _, tries := range []int{1, 2, 3} {
			dp.pushPolicies(t, policyBackend{Name: "ns/health:80", Endpoints: deadOnes,
				Policy: map[string]any{"tries": tries, "max_fails": 1000}})
			before := strings.Count(dp.errorLog(t), "connect() failed")
			for range 4 {
				if code, _, _ := dp.request(t, "/health", ""); code != http.StatusBadGateway {
					t.Errorf("tries %d, every endpoint dead: got %d, want 502", tries, code)
				}
			}
			if n := strings.Count(dp.errorLog(t), "connect() failed") - before; n != 4*tries {
				t.Errorf("tries %d: 4 requests made %d connection attempts, want %d", tries, n, 4*tries)
			}
		}
		// Every endpoint down (or failing): still tried, never a 503 of our own.
		dp.pushPolicies(t, policyBackend{Name: "ns/health:80", Endpoints: []model.Endpoint{dead}, Policy: map[string]any{"max_fails": 1, "fail_timeout": 60}})
		for range 3 {
			if code, _, _ := dp.request(t, "/health", ""); code != http.StatusBadGateway {
				t.Errorf("only a dead endpoint: got %d, want 502 (tried anyway)", code)
			}
		}
	})
}

func (dp *dataPlane) errorLog(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dp.nginx.Prefix, ErrorLogName))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
