package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// Issue 25, attacks 3 and 7, as tenant B writes them on a running stack
// beside tenant A: a configuration-snippet whose add_header holds a C1
// control (it once failed every render: a freeze for every tenant), a
// mirror-target holding U+2028, custom-http-errors "404,499" (nginx
// refused 499 on every cold start), and in the ConfigMap ssl-ciphers
// NOTACIPHER (a cold start never came up; while running, every reload
// failed and tenants' changed Ingresses were quarantined as culprits).
// Each is a Problem naming B's Ingress or the ConfigMap's key; A's new
// Ingress is served and A's endpoints move; no sync fails and no Ingress
// is quarantined; after an nginx cold start A's hosts answer and /readyz
// is true.
func TestHostileValuesFreezeNoOne(t *testing.T) {
	const ipA, ipA2, ipB = "127.0.0.244", "127.0.0.245", "127.0.0.246"
	b := startBackends(t, ipA, ipA2, ipB)
	services := func(a string) string { return service("a", b.port, ep(a)) + "---\n" + service("b", b.port, ep(ipB)) }
	s := newConfigMapStack(t, map[string]string{
		"classes.yaml":   ingressClasses,
		"services.yaml":  services(ipA),
		"a.yaml":         ingress("a", ingressOpts{class: "restysync", host: "a.test", paths: []path{prefix("/", "a")}}),
		"b.yaml":         ingress("b", ingressOpts{class: "restysync", host: "b.test", paths: []path{prefix("/", "b")}}),
		"configmap.yaml": configMap(nil),
	})
	s.eventually("a.test and b.test served", func() error {
		return cmpErr(s.expect("a.test", "/", ipA), s.expect("b.test", "/", ipB))
	})

	// B's payloads, and the ConfigMap's, while A adds an Ingress and its
	// endpoints move.
	s.writeFile("b.yaml", ingress("b", ingressOpts{class: "restysync", host: "b.test", paths: []path{prefix("/", "b")},
		annotations: map[string]string{
			"nginx.ingress.kubernetes.io/configuration-snippet": "add_header X-A \"a\u0085b\";",
			"nginx.ingress.kubernetes.io/mirror-target":         "http://mirror.default.svc/\u2028",
			"nginx.ingress.kubernetes.io/custom-http-errors":    "404,499",
		}}))
	s.writeFile("configmap.yaml", configMap(map[string]string{"ssl-ciphers": "NOTACIPHER"}))
	s.writeFile("a2.yaml", ingress("a2", ingressOpts{class: "restysync", host: "a2.test", paths: []path{prefix("/", "a")}}))
	s.writeFile("services.yaml", services(ipA2))
	s.eventually("A's new Ingress served, A's endpoints moved", func() error {
		return cmpErr(s.expect("a2.test", "/", ipA2), s.expect("a.test", "/", ipA2))
	})

	want := map[string][]string{
		"Ingress default/b": {
			"configuration-snippet", "C1 control character U+0085",
			"mirror-target", "line separator U+2028",
			"custom-http-errors", `"499" is not a status code from 400 to 599 that nginx's error_page takes`,
		},
		"ConfigMap " + cmName: {"ssl-ciphers", `names "NOTACIPHER", which is not an OpenSSL cipher or alias`},
	}
	s.eventually("each payload is a Problem naming its object and key", func() error {
		problems := s.debugState().Problems
		for object, parts := range want {
			for i := 0; i < len(parts); i += 2 {
				found := false
				for _, p := range problems {
					found = found || (p.Object == object && strings.Contains(p.Reason, parts[i]) && strings.Contains(p.Reason, parts[i+1]))
				}
				if !found {
					return fmt.Errorf("no problem of %s with %q and %q in %+v", object, parts[i], parts[i+1], problems)
				}
			}
		}
		return nil
	})
	if q := s.debugState().Quarantined; len(q) != 0 {
		t.Errorf("quarantined %v", q)
	}
	if err := s.expectAdmin("/readyz", 200); err != nil {
		t.Errorf("/readyz: %v", err)
	}
	if log := s.agent.log.String(); strings.Contains(log, "sync failed") {
		t.Errorf("a sync failed:\n%s", log)
	}

	// An nginx cold start comes up on the same config, and A is served.
	s.nginx.Stop(t)
	s.nginx = nginxproc.Start(t, s.shared)
	s.eventually("A served after nginx's cold start", func() error {
		return cmpErr(s.expect("a.test", "/", ipA2), s.expect("a2.test", "/", ipA2), s.expectAdmin("/readyz", 200))
	})
	if q := s.debugState().Quarantined; len(q) != 0 {
		t.Errorf("quarantined %v after the cold start", q)
	}
}
