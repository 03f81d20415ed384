package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// ModSecurity (annotations enable-modsecurity, enable-owasp-core-rules,
// modsecurity-transaction-id) in Debian's nginx, beside the Lua module,
// with Debian's recommended rules and OWASP Core Rule Set.

// Requests the Core Rule Set blocks: SQL injection and XSS in the query,
// XSS in a form body.
var wafAttacks = []struct {
	name, method, target, body string
}{
	{"sql injection", http.MethodGet, "/?id=" + url.QueryEscape("1' OR '1'='1"), ""},
	{"script in the query", http.MethodGet, "/?q=" + url.QueryEscape("<script>alert(1)</script>"), ""},
	{"script in a form", http.MethodPost, "/form", "comment=" + url.QueryEscape("<script>alert(1)</script>")},
}

// newWAFStack is newStack with Debian's ModSecurity module loaded (unless
// withoutModule), its recommended rules with the audit log in the test's
// folder, and more agent flags. The module's --load-module comes before
// the Lua module's on purpose: loaded first, nginx's master would abort at
// start (libmodsecurity's Lua 5.3 in place of LuaJIT), so the agent must
// write it last.
func newWAFStack(t *testing.T, files map[string]string, withoutModule bool, flags ...string) (*stack, nginxproc.ModSecurity) {
	t.Helper()
	m := nginxproc.ModSecurityModules(t)
	s := &stack{t: t, manifests: t.TempDir()}
	for name, content := range files {
		s.writeFile(name, content)
	}
	args := append([]string{"--source", "file:" + s.manifests, "--modsecurity-rules", m.Rules}, flags...)
	if !withoutModule {
		for _, module := range m.LoadModules {
			args = append(args, "--load-module", module)
		}
	}
	s.start(args...)
	return s, m
}

// wafRequest sends one of wafAttacks (or a harmless request) to host and
// returns the status and body.
func (s *stack) wafRequest(t *testing.T, host, method, target, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+host+target, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, text := s.do(t, req)
	return resp.StatusCode, text
}

// With --modsecurity-rule-engine On, an Ingress with enable-modsecurity
// and enable-owasp-core-rules has each attack answered 403 by nginx,
// without reaching the backend, while harmless requests, a form post
// among them, reach it; an Ingress without the annotations on the same
// nginx is not filtered; the transaction id the annotation names is the
// one ModSecurity logs.
func TestModSecurityBlocks(t *testing.T) {
	const wafIP, plainIP = "127.0.0.140", "127.0.0.141"
	b := startBackends(t, wafIP, plainIP)
	s, m := newWAFStack(t, map[string]string{
		"classes.yaml":   ingressClasses,
		"waf-svc.yaml":   service("waf", b.port, ep(wafIP)),
		"plain-svc.yaml": service("plain", b.port, ep(plainIP)),
		"waf.yaml": ingress("waf", ingressOpts{class: "restysync", host: "waf.test", paths: []path{prefix("/", "waf")},
			annotations: map[string]string{
				"nginx.ingress.kubernetes.io/enable-modsecurity":         "true",
				"nginx.ingress.kubernetes.io/enable-owasp-core-rules":    "true",
				"nginx.ingress.kubernetes.io/modsecurity-transaction-id": "waf-$request_id",
			}}),
		"plain.yaml": ingress("plain", ingressOpts{class: "restysync", host: "plain.test", paths: []path{prefix("/", "plain")}}),
	}, false, "--modsecurity-rule-engine", "On")

	s.eventually("waf.test reaches its backend", func() error { return s.expect("waf.test", "/", wafIP) })
	for _, a := range wafAttacks {
		t.Run(a.name, func(t *testing.T) {
			if status, body := s.wafRequest(t, "waf.test", a.method, a.target, a.body); status != http.StatusForbidden {
				t.Errorf("waf.test %s %s: %d %q, want 403 from ModSecurity", a.method, a.target, status, body)
			}
			if status, body := s.wafRequest(t, "plain.test", a.method, a.target, a.body); status != http.StatusOK || body != plainIP {
				t.Errorf("plain.test %s %s: %d %q, want %s's answer: an Ingress without ModSecurity is not filtered", a.method, a.target, status, body, plainIP)
			}
		})
	}
	for _, ok := range []struct{ method, target, body string }{
		{http.MethodGet, "/?q=" + url.QueryEscape("hello world"), ""},
		{http.MethodGet, "/docs/page?id=42", ""},
		{http.MethodPost, "/form", "comment=hello&name=alice"},
	} {
		if status, body := s.wafRequest(t, "waf.test", ok.method, ok.target, ok.body); status != http.StatusOK || body != wafIP {
			t.Errorf("waf.test %s %s: %d %q, want the backend %s", ok.method, ok.target, status, body, wafIP)
		}
	}
	audit, err := os.ReadFile(m.AuditLog)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(audit), " waf-") || !strings.Contains(string(audit), "949110") {
		t.Errorf("the audit log has no transaction waf-<request id> blocked by the Core Rule Set (949110):\n%.2000s", audit)
	}
}

// Without --modsecurity-rule-engine, the rules file's own engine holds:
// Debian's (as ingress-nginx's) is DetectionOnly, so an attack reaches the
// backend and is logged, as ingress-nginx does without a
// modsecurity-snippet "SecRuleEngine On".
func TestModSecurityDetectionOnly(t *testing.T) {
	const ip = "127.0.0.142"
	b := startBackends(t, ip)
	s, m := newWAFStack(t, map[string]string{
		"classes.yaml": ingressClasses,
		"svc.yaml":     service("app", b.port, ep(ip)),
		"app.yaml": appIngress("app", "detect.test", map[string]string{
			"nginx.ingress.kubernetes.io/enable-modsecurity":      "true",
			"nginx.ingress.kubernetes.io/enable-owasp-core-rules": "true",
		}),
	}, false)
	s.eventually("detect.test reaches its backend", func() error { return s.expect("detect.test", "/", ip) })
	a := wafAttacks[0]
	if status, body := s.wafRequest(t, "detect.test", a.method, a.target, a.body); status != http.StatusOK || body != ip {
		t.Errorf("detect.test %s: %d %q, want the backend (DetectionOnly)", a.target, status, body)
	}
	s.eventually("the attack is in the audit log", func() error {
		audit, err := os.ReadFile(m.AuditLog)
		if err != nil {
			return err
		}
		if !strings.Contains(string(audit), "942100") { // SQL injection detected by libinjection
			return fmt.Errorf("no rule 942100 in the audit log:\n%.2000s", audit)
		}
		return nil
	})
}

// Without the module loaded, an Ingress that asks for ModSecurity fails
// closed (503) with a Problem naming the flag and the package, while the
// Ingress beside it is served: nginx is never given a config it rejects.
func TestModSecurityWithoutModuleFailsClosed(t *testing.T) {
	const wafIP, plainIP = "127.0.0.143", "127.0.0.144"
	b := startBackends(t, wafIP, plainIP)
	s, _ := newWAFStack(t, map[string]string{
		"classes.yaml":   ingressClasses,
		"waf-svc.yaml":   service("waf", b.port, ep(wafIP)),
		"plain-svc.yaml": service("plain", b.port, ep(plainIP)),
		"waf.yaml": ingress("waf", ingressOpts{class: "restysync", host: "waf.test", paths: []path{prefix("/", "waf")},
			annotations: map[string]string{"nginx.ingress.kubernetes.io/enable-modsecurity": "true"}}),
		"plain.yaml": ingress("plain", ingressOpts{class: "restysync", host: "plain.test", paths: []path{prefix("/", "plain")}}),
	}, true, "--modsecurity-rule-engine", "On")
	s.eventually("plain.test is served", func() error { return s.expect("plain.test", "/", plainIP) })
	s.eventually("waf.test fails closed", func() error { return s.expect("waf.test", "/", "503") })
	s.eventually("the Problem names the module", func() error {
		log := s.agent.log.String()
		for _, want := range []string{"enable-modsecurity", "nginx has no ModSecurity module", "libnginx-mod-http-modsecurity",
			"--load-module /usr/share/nginx/modules/ngx_http_modsecurity_module.so"} {
			if !strings.Contains(log, want) {
				return fmt.Errorf("the agent's log does not say %q", want)
			}
		}
		return nil
	})
}
