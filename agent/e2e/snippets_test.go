package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// End-to-end tests of the snippet annotations (model/snippet.go): real
// requests through real nginx to real backends on loopback. Snippets are
// read as typed directives against an allowlist; what they may do is
// done (headers set and hidden, locations of a server-snippet with their
// own answer, auth_request_set for the sign-in URL), and a hostile one is
// refused with its reason while the rest of the Ingress is served.

// headerEcho answers with the request's headers as JSON, and response
// headers a snippet may hide, clear or replace.
func headerEcho(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Hide-Me", "backend")
	w.Header().Set("X-Clear-Me", "backend")
	w.Header().Set("X-Backend-Secret", "original")
	w.Header().Set("X-Kept", "yes")
	seen := map[string]string{"Host": r.Host}
	for name, values := range r.Header {
		seen[name] = strings.Join(values, ",")
	}
	json.NewEncoder(w).Encode(seen)
}

// snippetStack serves the snippet Ingresses of these tests; agentArgs
// are more flags for the agent.
type snippetWorld struct {
	files                   map[string]string
	echoPort, pagePort      int
	authPort                int
	headersHost, pagesHost  string
	crlfHost, aliasHost     string
	vouchHost, vouchBackend string
}

const (
	snippetEchoIP = "127.0.0.100"
	snippetPageIP = "127.0.0.101"
	snippetAuthIP = "127.0.0.102"
)

func newSnippetWorld(t *testing.T) *snippetWorld {
	t.Helper()
	w := &snippetWorld{headersHost: "headers.test", pagesHost: "pages.test", crlfHost: "crlf.test", aliasHost: "alias.test",
		vouchHost: "vouch.test"}
	w.echoPort = nginxproc.FreePort(t)
	serve(t, snippetEchoIP, w.echoPort, headerEcho)
	w.pagePort = nginxproc.FreePort(t)
	serve(t, snippetPageIP, w.pagePort, func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "backend %s", r.URL.Path) })
	// A vouch-proxy: 401 with the reason in a header the sign-in URL quotes.
	w.authPort = nginxproc.FreePort(t)
	serve(t, snippetAuthIP, w.authPort, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Cookie") == "vouch=ok" {
			w.Header().Set("X-Vouch-User", "alice")
			return
		}
		w.Header().Set("X-Vouch-Err", "no-session")
		w.Header().Set("X-Vouch-Failcount", "3")
		w.WriteHeader(http.StatusUnauthorized)
	})
	ann := func(kv ...string) map[string]string {
		out := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			out["nginx.ingress.kubernetes.io/"+kv[i]] = kv[i+1]
		}
		return out
	}
	w.files = map[string]string{
		"classes.yaml":  ingressClasses,
		"services.yaml": service("snip-echo", w.echoPort, ep(snippetEchoIP)) + "---\n" + service("snip-page", w.pagePort, ep(snippetPageIP)),
		"headers.yaml": ingress("headers", ingressOpts{class: "restysync", host: w.headersHost, paths: []path{prefix("/", "snip-echo")},
			annotations: ann("configuration-snippet", `more_set_headers "X-Snippet-Set: one" "X-Backend-Secret: replaced";
add_header X-Added "$service_name/$namespace/$ingress_name:$service_port" always;
proxy_set_header X-To-Backend "hello $host";
proxy_set_header Host rewritten.internal;
proxy_hide_header X-Hide-Me;
more_clear_headers X-Clear-Me;
more_set_input_headers "X-Input: in";`)}),
		// corpus 050/051, 065, 066: locations with their own answers.
		"pages.yaml": ingress("pages", ingressOpts{class: "restysync", host: w.pagesHost, paths: []path{prefix("/", "snip-page")},
			annotations: ann("server-snippet", `server_tokens off;
location ~ ^/(ping|ready|prometheus) {
  deny all;
  return 404;
}
location /robots.txt {
  add_header Content-Type "text/plain";
  return 200 "User-agent: *\nDisallow: /";
}
location /.well-known/assetlinks.json {
  add_header Content-Type "application/json";
  return 200 '[{"relation": ["delegate_permission/common.handle_all_urls"]}]';
}
location = /old { return 301 https://$host/new; }
location ^~ /static/ { return 403; }
location ~* \.css$ { add_header X-Css yes; return 200 "css"; }`)}),
		// corpus 022: a CRLF in a header value.
		"crlf.yaml": ingress("crlf", ingressOpts{class: "restysync", host: w.crlfHost, paths: []path{prefix("/", "snip-page")},
			annotations: ann("server-snippet", "add_header X-Safe-Header \"Safe Content\";\nadd_header X-Vuln-Header \"Benign\\r\nHTTP/1.1 200 OK\nContent-Type: text/html\n<script>alert('XSS');</script>\n--------\";\nreturn 200 \"Original Content\";\n")}),
		// corpus 041: alias, CVE-2021-25742.
		"alias.yaml": ingress("alias", ingressOpts{class: "restysync", host: w.aliasHost, paths: []path{prefix("/test", "snip-page")},
			annotations: ann("server-snippet", "location ^~ \"/test\" {\n  default_type 'text/plain';\n  alias /var/run;\n}\n")}),
		// corpus 039: vouch-proxy's auth_request_set in the sign-in URL.
		"vouch.yaml": ingress("vouch", ingressOpts{class: "restysync", host: w.vouchHost, paths: []path{prefix("/", "snip-page")},
			annotations: ann(
				"auth-url", fmt.Sprintf("http://%s:%d/validate", snippetAuthIP, w.authPort),
				"auth-signin", "https://login.test/login?url=$scheme://$http_host$request_uri&vouch-failcount=$auth_resp_failcount&error=$auth_resp_err",
				"auth-snippet", "# these return values are used by the sign-in\nauth_request_set $auth_resp_err $upstream_http_x_vouch_err;\nauth_request_set $auth_resp_failcount $upstream_http_x_vouch_failcount;\n",
				"configuration-snippet", "proxy_set_header X-Vouch-Err $auth_resp_err;")}),
	}
	return w
}

// get sends GET with the headers given and returns the response and body.
func snippetGet(t *testing.T, s *stack, url string, header http.Header) (*http.Response, string) {
	t.Helper()
	return s.do(t, accessRequest(t, http.MethodGet, url, header))
}

func TestSnippets(t *testing.T) {
	w := newSnippetWorld(t)
	s := newStack(t, w.files)
	s.eventually("pages.test serves", func() error { return s.expect(w.pagesHost, "/app", "backend /app") })

	t.Run("headers", func(t *testing.T) {
		resp, body := snippetGet(t, s, "http://"+w.headersHost+"/x", nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		for name, want := range map[string][]string{
			"X-Snippet-Set":    {"one"},
			"X-Backend-Secret": {"replaced"},                     // more_set_headers replaces the backend's
			"X-Added":          {"snip-echo/default/headers:80"}, // $service_name and friends, substituted
			"X-Kept":           {"yes"},
			"X-Hide-Me":        nil, // proxy_hide_header
			"X-Clear-Me":       nil, // more_clear_headers
		} {
			if got := resp.Header.Values(name); strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("response header %s: %q, want %q", name, got, want)
			}
		}
		if id := resp.Header.Values("X-Request-ID"); len(id) != 1 || len(id[0]) != 32 {
			t.Errorf("X-Request-ID %q: the http block's header must stay, once", id)
		}
		var seen map[string]string
		if err := json.Unmarshal([]byte(body), &seen); err != nil {
			t.Fatalf("backend answer %q: %v", body, err)
		}
		for name, want := range map[string]string{
			"X-To-Backend":      "hello headers.test",
			"Host":              "rewritten.internal", // the snippet's Host replaces the standard one
			"X-Input":           "in",
			"X-Forwarded-Host":  "headers.test", // the standard ones stay
			"X-Forwarded-Proto": "http",
		} {
			if seen[name] != want {
				t.Errorf("backend got %s %q, want %q (all: %v)", name, seen[name], want, seen)
			}
		}
		if seen["X-Request-Id"] != resp.Header.Get("X-Request-ID") {
			t.Errorf("backend got X-Request-ID %q, the response says %q", seen["X-Request-Id"], resp.Header.Get("X-Request-ID"))
		}
	})

	t.Run("server-snippet locations", func(t *testing.T) {
		resp, body := snippetGet(t, s, "http://"+w.pagesHost+"/robots.txt", nil)
		if resp.StatusCode != http.StatusOK || body != "User-agent: *\nDisallow: /" {
			t.Errorf("robots.txt: %d %q", resp.StatusCode, body)
		}
		if ct := resp.Header.Values("Content-Type"); len(ct) != 1 || ct[0] != "text/plain" {
			t.Errorf("robots.txt Content-Type %q, want one text/plain", ct)
		}
		if server := resp.Header.Get("Server"); server != "nginx" {
			t.Errorf("Server %q: server_tokens off hides the version", server)
		}
		resp, body = snippetGet(t, s, "http://"+w.pagesHost+"/.well-known/assetlinks.json", nil)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(body, `[{"relation"`) || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("assetlinks.json: %d %q %q", resp.StatusCode, body, resp.Header.Get("Content-Type"))
		}
		for _, p := range []string{"/ping", "/readyz", "/prometheus/metrics"} {
			// return runs before deny: 404, not 403.
			if resp, body := snippetGet(t, s, "http://"+w.pagesHost+p, nil); resp.StatusCode != http.StatusNotFound {
				t.Errorf("%s: %d %q, want 404", p, resp.StatusCode, body)
			}
		}
		if resp, body := snippetGet(t, s, "http://"+w.pagesHost+"/PING", nil); resp.StatusCode != http.StatusOK || body != "backend /PING" {
			t.Errorf("/PING: %d %q: \"location ~\" is case-sensitive", resp.StatusCode, body)
		}
		resp, _ = snippetGet(t, s, "http://"+w.pagesHost+"/old", nil)
		if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "https://pages.test/new" {
			t.Errorf("/old: %d %q", resp.StatusCode, resp.Header.Get("Location"))
		}
		// "^~" keeps the regexes from being tried; elsewhere the regex wins over the prefix "/".
		if resp, _ := snippetGet(t, s, "http://"+w.pagesHost+"/static/a.css", nil); resp.StatusCode != http.StatusForbidden {
			t.Errorf("/static/a.css: %d, want 403", resp.StatusCode)
		}
		if resp, body := snippetGet(t, s, "http://"+w.pagesHost+"/x/a.CSS", nil); resp.StatusCode != http.StatusOK || body != "css" || resp.Header.Get("X-Css") != "yes" {
			t.Errorf("/x/a.CSS: %d %q", resp.StatusCode, body)
		}
		if err := s.expect(w.pagesHost, "/app/page", "backend /app/page"); err != nil {
			t.Error(err)
		}
	})

	t.Run("refused snippets", func(t *testing.T) {
		for _, c := range []struct{ host, path, reason string }{
			{w.crlfHost, "/", "refused: add_header (line 2): X-Vuln-Header: the value holds a CR or LF"},
			{w.aliasHost, "/test", "refused: alias (line 3): reads files outside the config (CVE-2021-25742)"},
		} {
			if err := s.expect(c.host, c.path, "backend "+c.path); err != nil {
				t.Errorf("the Ingress is not served without its snippet: %v", err)
			}
			logged := false
			for _, line := range strings.Split(s.agent.log.String(), "\n") {
				logged = logged || strings.Contains(line, "level=WARN msg=problem") && strings.Contains(line, "reason=") && strings.Contains(line, c.reason)
			}
			if !logged {
				t.Errorf("no problem logged with %q", c.reason)
			}
		}
		resp, _ := snippetGet(t, s, "http://"+w.crlfHost+"/", nil)
		if resp.Header.Get("X-Safe-Header") != "" || resp.Header.Get("X-Vuln-Header") != "" {
			t.Errorf("a refused snippet's header was sent: %v", resp.Header)
		}
		if resp, body := snippetGet(t, s, "http://"+w.aliasHost+"/test/nginx.pid", nil); resp.StatusCode != http.StatusOK || body != "backend /test/nginx.pid" {
			t.Errorf("/test/nginx.pid: %d %q, want the backend", resp.StatusCode, body)
		}
	})

	t.Run("auth_request_set", func(t *testing.T) {
		resp, _ := snippetGet(t, s, "http://"+w.vouchHost+"/page?a=1", nil)
		want := "https://login.test/login?url=http://vouch.test/page?a=1&vouch-failcount=3&error=no-session"
		if resp.StatusCode != http.StatusFound || !strings.HasPrefix(resp.Header.Get("Location"), want) {
			t.Errorf("no session: %d %q, want a 302 to %q", resp.StatusCode, resp.Header.Get("Location"), want)
		}
		resp, body := snippetGet(t, s, "http://"+w.vouchHost+"/page", http.Header{"Cookie": {"vouch=ok"}})
		if resp.StatusCode != http.StatusOK || body != "backend /page" {
			t.Errorf("a session: %d %q", resp.StatusCode, body)
		}
	})
}

// --allow-snippet-annotations=false refuses every snippet annotation,
// with its reason; the Ingresses are served without them.
func TestSnippetsTurnedOff(t *testing.T) {
	w := newSnippetWorld(t)
	s := &stack{t: t, manifests: t.TempDir()}
	for name, content := range w.files {
		s.writeFile(name, content)
	}
	s.start("--source", "file:"+s.manifests, "--allow-snippet-annotations=false")
	s.eventually("pages.test serves", func() error { return s.expect(w.pagesHost, "/app", "backend /app") })

	resp, body := snippetGet(t, s, "http://"+w.headersHost+"/x", nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Snippet-Set") != "" || resp.Header.Get("X-Hide-Me") != "backend" {
		t.Errorf("headers.test: %d %v %q: the snippet applied", resp.StatusCode, resp.Header, body)
	}
	if resp, body := snippetGet(t, s, "http://"+w.pagesHost+"/robots.txt", nil); resp.StatusCode != http.StatusOK || body != "backend /robots.txt" {
		t.Errorf("robots.txt: %d %q, want the backend", resp.StatusCode, body)
	}
	log := s.agent.log.String()
	for _, name := range []string{"headers", "pages", "crlf", "alias", "vouch"} {
		want := "annotation nginx.ingress.kubernetes.io/"
		found := false
		for _, line := range strings.Split(log, "\n") {
			found = found || strings.Contains(line, "msg=problem") && strings.Contains(line, "Ingress default/"+name) &&
				strings.Contains(line, want) && strings.Contains(line, "snippet annotations are turned off (--allow-snippet-annotations=false")
		}
		if !found {
			t.Errorf("Ingress %s: no problem says its snippets are turned off", name)
		}
	}
}

// The ConfigMap's http-snippet and friends give every location their
// headers; a refused one is logged with its reason; its
// allow-snippet-annotations "false" refuses the snippet annotations until
// it is taken back.
func TestSnippetsConfigMap(t *testing.T) {
	w := newSnippetWorld(t)
	files := map[string]string{"classes.yaml": w.files["classes.yaml"], "services.yaml": w.files["services.yaml"],
		"headers.yaml": w.files["headers.yaml"], "pages.yaml": w.files["pages.yaml"]}
	data := map[string]string{
		"http-snippet":              "add_header X-Global g always;\nmore_clear_headers X-Kept;",
		"location-snippet":          "alias /etc;",
		"allow-snippet-annotations": "false",
	}
	files["configmap.yaml"] = configMap(data)
	s := newConfigMapStack(t, files)
	s.eventually("pages.test serves", func() error { return s.expect(w.pagesHost, "/app", "backend /app") })

	for _, host := range []string{w.headersHost, w.pagesHost} {
		resp, body := snippetGet(t, s, "http://"+host+"/x", nil)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Global") != "g" {
			t.Errorf("%s: %d %q, X-Global %q, want the http-snippet's header", host, resp.StatusCode, body, resp.Header.Get("X-Global"))
		}
	}
	resp, _ := snippetGet(t, s, "http://"+w.headersHost+"/x", nil)
	if resp.Header.Get("X-Kept") != "" || resp.Header.Get("X-Snippet-Set") != "" {
		t.Errorf("headers.test: %v: X-Kept is cleared, the annotation is off", resp.Header)
	}
	log := s.agent.log.String()
	for _, want := range []string{"key location-snippet: refused: alias (line 1): reads files outside the config (CVE-2021-25742)",
		"snippet annotations are turned off"} {
		if !strings.Contains(log, want) {
			t.Errorf("the agent's log lacks %q", want)
		}
	}

	delete(data, "allow-snippet-annotations")
	s.writeFile("configmap.yaml", configMap(data))
	s.eventually("the snippet annotation applies", func() error {
		resp, _ := snippetGet(t, s, "http://"+w.headersHost+"/x", nil)
		if got := resp.Header.Get("X-Snippet-Set"); got != "one" {
			return fmt.Errorf("X-Snippet-Set %q", got)
		}
		if got := resp.Header.Get("X-Global"); got != "g" {
			return fmt.Errorf("X-Global %q", got)
		}
		return nil
	})
}
