package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// End-to-end tests of the agent knowing which nginx it drives
// (render/nginx.go): it reads the version and modules from the Lua status
// API and renders for them. Here that is Debian's nginx 1.22.1: "listen
// ... ssl http2" (not "http2 on"), and snippets' more_set_headers and
// more_clear_headers written as themselves when the agent loads Debian's
// headers-more module, emulated when it does not.

const ipHeadersMore = "127.0.0.181"

// headersMoreFiles are an echo backend and two Ingresses: "own" replaces
// headers nginx writes itself (only headers-more can), "plain" replaces
// and clears the backend's.
func headersMoreFiles(t *testing.T) map[string]string {
	t.Helper()
	port := nginxproc.FreePort(t)
	serve(t, ipHeadersMore, port, headerEcho)
	ann := func(snippet string) map[string]string {
		return map[string]string{"nginx.ingress.kubernetes.io/configuration-snippet": snippet}
	}
	return map[string]string{
		"classes.yaml":  ingressClasses,
		"services.yaml": service("hm-echo", port, ep(ipHeadersMore)),
		"own.yaml": ingress("own", ingressOpts{class: "restysync", host: "own.test", paths: []path{prefix("/", "hm-echo")},
			annotations: ann(`more_set_headers "Server: edge" "Content-Type: text/x-edge" "X-Backend-Secret: replaced";
more_clear_headers Date X-Clear-Me;`)}),
		"plain.yaml": ingress("plain", ingressOpts{class: "restysync", host: "plain.test", paths: []path{prefix("/", "hm-echo")},
			annotations: ann(`more_set_headers "X-Backend-Secret: replaced" "X-Request-ID: mine";
more_clear_headers X-Clear-Me;`)}),
	}
}

// nginxState is the nginx part of /debug/state, and its problems.
type nginxState struct {
	Nginx struct {
		Detected    bool     `json:"detected"`
		Version     string   `json:"version"`
		LuaVersion  string   `json:"lua_nginx_module"`
		BuiltIn     []string `json:"built_in_modules"`
		LoadModules []string `json:"load_modules"`
		HTTP2       string   `json:"http2"`
		HeadersMore string   `json:"headers_more"`
	} `json:"nginx"`
	Problems []struct{ Object, Reason string } `json:"problems"`
}

func (s *stack) nginxState(t *testing.T) nginxState {
	t.Helper()
	body, code, err := s.adminGet("/debug/state")
	var st nginxState
	if err != nil || code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil {
		t.Fatalf("GET /debug/state: %d %v\n%s", code, err, body)
	}
	return st
}

// headersStack starts the agent, with extra flags, and nginx on files.
func headersStack(t *testing.T, files map[string]string, flags ...string) *stack {
	t.Helper()
	s := &stack{t: t, manifests: t.TempDir()}
	for name, content := range files {
		s.writeFile(name, content)
	}
	s.start(append([]string{"--source", "file:" + s.manifests}, flags...)...)
	return s
}

func TestHeadersMoreNative(t *testing.T) {
	// Debian's module (the test fails under CI=true without it).
	modules := nginxproc.HeadersMoreLoadModules(t)
	var flags []string
	for _, m := range modules {
		flags = append(flags, "--load-module", m)
	}
	s := headersStack(t, headersMoreFiles(t), flags...)
	s.eventually("own.test answers with headers-more", func() error {
		if st := s.nginxState(t); st.Nginx.HeadersMore != "native" {
			return errorf("headers_more %q", st.Nginx.HeadersMore)
		}
		resp, _ := snippetGet(t, s, "http://own.test/x", nil)
		if got := resp.Header.Get("Server"); got != "edge" {
			return errorf("Server %q", got)
		}
		return nil
	})

	st := s.nginxState(t)
	if !st.Nginx.Detected || st.Nginx.Version != "1.22.1" || st.Nginx.LuaVersion != "0.10.23" || st.Nginx.HTTP2 != "listen ... http2" {
		t.Errorf("/debug/state nginx: %+v; want Debian's 1.22.1, lua-nginx-module 0.10.23, listen ... http2", st.Nginx)
	}
	for _, p := range st.Problems {
		if strings.Contains(p.Object, "own") || strings.Contains(p.Object, "plain") {
			t.Errorf("problem with headers-more loaded: %s: %s", p.Object, p.Reason)
		}
	}

	resp, body := snippetGet(t, s, "http://own.test/x", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("own.test: %d %s", resp.StatusCode, body)
	}
	for name, want := range map[string][]string{
		"Server":           {"edge"},
		"Content-Type":     {"text/x-edge"},
		"X-Backend-Secret": {"replaced"},
		"X-Kept":           {"yes"},
		"Date":             nil,
		"X-Clear-Me":       nil,
	} {
		if got := resp.Header.Values(name); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("own.test header %s: %q, want %q", name, got, want)
		}
	}
	resp, _ = snippetGet(t, s, "http://plain.test/x", nil)
	for name, want := range map[string][]string{
		"X-Backend-Secret": {"replaced"},
		"X-Request-ID":     {"mine"}, // once: the http block's add_header is left out
		"X-Clear-Me":       nil,
	} {
		if got := resp.Header.Values(name); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("plain.test header %s: %q, want %q", name, got, want)
		}
	}
	conf, err := os.ReadFile(filepath.Join(s.shared, "nginx.conf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`more_set_headers "Server: edge";`, `more_clear_headers "Date";`, `ssl http2`} {
		if !strings.Contains(string(conf), want) {
			t.Errorf("nginx.conf lacks %s", want)
		}
	}

	// A cold-started nginx reports itself anew (a new boot); the same
	// one is met with the same config.
	s.nginx.Stop(t)
	s.nginx = nginxproc.Start(t, s.shared)
	s.eventually("own.test answers with headers-more again", func() error {
		resp, _ := snippetGet(t, s, "http://own.test/x", nil)
		if got := resp.Header.Get("Server"); got != "edge" {
			return errorf("Server %q", got)
		}
		return nil
	})

	// restysync inspect says the same.
	out, err := exec.Command(agentBinary, "inspect", "--admin", s.admin).CombinedOutput()
	if err != nil {
		t.Fatalf("inspect: %v\n%s", err, out)
	}
	for _, want := range []string{"version        1.22.1, lua-nginx-module 0.10.23", "HTTP/2         listen ... http2", "headers-more   native"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("inspect lacks %q:\n%s", want, out)
		}
	}
}

// TestHeadersMoreEmulated: without the module, more_set_headers and
// more_clear_headers of the backend's headers are emulated, and those of
// nginx's own headers are refused with a Problem naming the Ingress.
func TestHeadersMoreEmulated(t *testing.T) {
	s := headersStack(t, headersMoreFiles(t))
	s.eventually("plain.test answers, emulated", func() error {
		resp, _ := snippetGet(t, s, "http://plain.test/x", nil)
		if got := resp.Header.Values("X-Backend-Secret"); strings.Join(got, "|") != "replaced" {
			return errorf("X-Backend-Secret %q", got)
		}
		if st := s.nginxState(t); !st.Nginx.Detected {
			return errorf("nginx not detected yet")
		}
		return nil
	})
	st := s.nginxState(t)
	if st.Nginx.HeadersMore != "emulated" || st.Nginx.Version != "1.22.1" {
		t.Errorf("/debug/state nginx: %+v; want 1.22.1, headers-more emulated", st.Nginx)
	}
	refused := false
	for _, p := range st.Problems {
		if strings.Contains(p.Object, "default/own") && strings.Contains(p.Reason, "Server is written by nginx itself") &&
			strings.Contains(p.Reason, "headers-more") {
			refused = true
		}
	}
	if !refused {
		t.Errorf("no Problem naming Ingress default/own and why Server cannot be replaced: %+v", st.Problems)
	}
	resp, _ := snippetGet(t, s, "http://plain.test/x", nil)
	for name, want := range map[string][]string{
		"X-Backend-Secret": {"replaced"},
		"X-Request-ID":     {"mine"},
		"X-Clear-Me":       nil,
	} {
		if got := resp.Header.Values(name); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("plain.test header %s: %q, want %q", name, got, want)
		}
	}
	// own.test is served without its refused snippet.
	resp, _ = snippetGet(t, s, "http://own.test/x", nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Server") == "edge" || resp.Header.Get("X-Clear-Me") != "backend" {
		t.Errorf("own.test: %d Server %q X-Clear-Me %q; want served without its snippet", resp.StatusCode, resp.Header.Get("Server"), resp.Header.Get("X-Clear-Me"))
	}
	conf, err := os.ReadFile(filepath.Join(s.shared, "nginx.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(conf), "more_set_headers") || strings.Contains(string(conf), "more_clear_headers") {
		t.Error("nginx.conf names headers-more directives, without the module")
	}
}
