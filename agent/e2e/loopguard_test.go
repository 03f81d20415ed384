package e2e

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/restysync/restysync/agent/internal/testenv/dnsserver"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

const ipLoopApp = "127.0.0.171"

// A tenant's mirror-target and auth-url whose name resolves to nginx itself
// (here 127.0.0.1, where nginx listens) do not loop: the request nginx
// sends comes back carrying this nginx's token, and the location that
// would send another answers 508 (restysync.loop), counted. An auth
// service behind the same nginx (auth-url to a host without auth of its
// own) still answers, A's host is untouched, and a client's
// X-Restysync-Proxied never reaches a backend.
func TestLoopGuard(t *testing.T) {
	dns := dnsserver.Start(t)
	dns.Set("mloop.test", "127.0.0.1")
	dns.Set("aloop.test", "127.0.0.1")
	dns.Set("oauth.test", "127.0.0.1")

	var mu sync.Mutex
	hits := map[string]int{}
	appPort := nginxproc.FreePort(t)
	serve(t, ipLoopApp, appPort, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.Host]++
		mu.Unlock()
		fmt.Fprintf(w, "%s proxied=%q", r.Host, r.Header.Get("X-Restysync-Proxied"))
	})
	count := func(host string) int {
		mu.Lock()
		defer mu.Unlock()
		return hits[host]
	}

	s := &stack{t: t, manifests: t.TempDir()}
	s.writeFile("classes.yaml", ingressClasses)
	s.writeFile("app.yaml", service("app", appPort, ep(ipLoopApp)))
	// The names carry the port nginx listens on, known only at start:
	// start the agent, then add the Ingresses.
	s.start("--source", "file:"+s.manifests, "--dns-server", dns.Addr)
	port := strconv.Itoa(s.port)
	plain := func(name string) string {
		return ingress(name, ingressOpts{class: "restysync", host: name + ".test", paths: []path{prefix("/", "app")}})
	}
	s.writeFile("a.yaml", plain("a"))
	s.writeFile("oauth.yaml", plain("oauth"))
	s.writeFile("mloop.yaml", ingress("mloop", ingressOpts{class: "restysync", host: "mloop.test", paths: []path{prefix("/", "app")},
		annotations: map[string]string{"nginx.ingress.kubernetes.io/mirror-target": "http://mloop.test:" + port + "/mirrored"}}))
	s.writeFile("aloop.yaml", ingress("aloop", ingressOpts{class: "restysync", host: "aloop.test", paths: []path{prefix("/", "app")},
		annotations: map[string]string{"nginx.ingress.kubernetes.io/auth-url": "http://aloop.test:" + port + "/auth"}}))
	s.writeFile("guarded.yaml", ingress("guarded", ingressOpts{class: "restysync", host: "guarded.test", paths: []path{prefix("/", "app")},
		annotations: map[string]string{"nginx.ingress.kubernetes.io/auth-url": "http://oauth.test:" + port + "/oauth2/auth"}}))

	s.eventually("a.test answers", func() error { return s.expect("a.test", "/", `a.test proxied=""`) })

	// An auth service behind this same nginx: one hop into itself is no loop.
	s.eventually("guarded.test answers through oauth.test", func() error {
		return s.expect("guarded.test", "/", `guarded.test proxied=""`)
	})
	if count("oauth.test") == 0 {
		t.Error("the auth request of guarded.test did not reach oauth.test's backend")
	}

	// mirror-target into nginx itself: the client is answered, the mirror
	// comes back once and is refused.
	before, err := s.scrape()
	if err != nil {
		t.Fatal(err)
	}
	s.eventually("mloop.test answers", func() error { return s.expect("mloop.test", "/m", `mloop.test proxied=""`) })
	s.metricAtLeast("the mirror loop is counted", "restysync_lua_loop_refused_total", before["restysync_lua_loop_refused_total"]+1)

	// auth-url into nginx itself, to a location with the same auth-url:
	// the auth request is refused (508), so the client gets nginx's 500
	// for a failed auth request, at once.
	mid, err := s.scrape()
	if err != nil {
		t.Fatal(err)
	}
	if status, body, err := s.get("aloop.test", "/"); err != nil || status != http.StatusInternalServerError {
		t.Errorf("aloop.test: %d %q %v, want 500 (its auth request refused as a loop)", status, body, err)
	}
	s.metricAtLeast("the auth loop is counted", "restysync_lua_loop_refused_total", mid["restysync_lua_loop_refused_total"]+1)
	if n := count("aloop.test"); n != 0 {
		t.Errorf("aloop.test's backend got %d requests, want 0 (auth never let one in)", n)
	}

	// A client that sends the header itself: a backend never sees it, and
	// one with this nginx's token is refused only where it would loop.
	req, err := http.NewRequest(http.MethodGet, "http://a.test/", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Restysync-Proxied", "0123456789abcdef0123456789abcdef")
	resp, body := s.do(t, req)
	if resp.StatusCode != http.StatusOK || body != `a.test proxied=""` {
		t.Errorf("a.test with a client's X-Restysync-Proxied: %d %q, want 200 without the header", resp.StatusCode, body)
	}
	req.Host = "mloop.test"
	many := "00000000000000000000000000000001 00000000000000000000000000000002 00000000000000000000000000000003 00000000000000000000000000000004"
	req.Header.Set("X-Restysync-Proxied", many)
	resp, body = s.do(t, req)
	if resp.StatusCode != 508 {
		t.Errorf("mloop.test with %d tokens: %d %q, want 508", 4, resp.StatusCode, body)
	}

	// A is untouched.
	if err := s.expect("a.test", "/", `a.test proxied=""`); err != nil {
		t.Errorf("a.test after the loops: %v", err)
	}
}
