package main

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restysync/restysync/agent/internal/model"
)

// Issue 25: check reports as invalid, with the reason, every value that
// holds a character no value may hold (it once froze every tenant's
// config) and every value nginx refuses at start.
func TestCheckRefusesUnrenderableAndNginxRefusedValues(t *testing.T) {
	tests := []struct{ key, value, reason string }{
		{"configuration-snippet", "add_header X-A \"a\u0085b\";", "C1 control character U+0085"}, // the payload
		{"configuration-snippet", "proxy_set_header X-A \"a\u2028b\";", "line separator U+2028"},
		{"server-snippet", "location /x { return 200 \"a\u0085\"; }", "C1 control character U+0085"},
		{"auth-url", "http://auth.default.svc/\u0085", "C1 control character U+0085"},
		{"auth-signin", "https://login.example.com/\u2029", "paragraph separator U+2029"},
		{"auth-request-redirect", "/x\u202e", "bidirectional control U+202E"},
		{"auth-cache-key", "$remote_user\u2066", "bidirectional control U+2066"},
		{"mirror-target", "http://mirror.default.svc/\u0085", "C1 control character U+0085"},
		{"proxy-redirect-to", "http://b/\u200b", "invisible format character U+200B"},
		{"upstream-vhost", "a\xed\xa0\x80.example.com", "is not valid UTF-8"},
		{"custom-http-errors", "404,499", `"499" is not a status code from 400 to 599 that nginx's error_page takes`},
		{"proxy-ssl-ciphers", "NOTACIPHER", `names "NOTACIPHER", which is not an OpenSSL cipher or alias`},
	}
	pathType := networkingv1.PathTypePrefix
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			key := "nginx.ingress.kubernetes.io/" + tt.key
			ing := &networkingv1.Ingress{
				ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-b", Name: "b", Annotations: map[string]string{key: tt.value,
					"nginx.ingress.kubernetes.io/default-backend": "web"}},
				Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "b.test", IngressRuleValue: networkingv1.IngressRuleValue{
					HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &pathType,
						Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}},
				}}}},
			}
			report, _ := checkSnapshot(model.Snapshot{Ingresses: []*networkingv1.Ingress{ing}})
			var got CheckedAnnotation
			for _, a := range report.Ingresses[0].Annotations {
				if a.Key == key {
					got = a
				}
			}
			if got.Status != annotationInvalid || !strings.Contains(got.Reason, tt.reason) {
				t.Errorf("%s %q: %+v, want invalid with %q", key, tt.value, got, tt.reason)
			}
			if report.Ingresses[0].Moves || report.Summary.Invalid == 0 {
				t.Errorf("summary %+v: the Ingress moves", report.Summary)
			}
		})
	}
}

func TestCheckConfigMapRefusesWhatNginxRefuses(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ingress", Name: "restysync"}, Data: map[string]string{
		"ssl-ciphers":          "NOTACIPHER",
		"custom-http-errors":   "404,499",
		"forwarded-for-header": "X-A\u0085",
		"http-snippet":         "add_header X-A \"a\u0085b\";",
		"global-auth-url":      "http://auth/\u2028",
	}}
	got := checkConfigMap("ingress/restysync", cm)
	want := map[string]string{
		"ssl-ciphers":          `names "NOTACIPHER", which is not an OpenSSL cipher or alias`,
		"custom-http-errors":   `names "499"`,
		"forwarded-for-header": "C1 control character U+0085",
		"http-snippet":         "C1 control character U+0085",
		"global-auth-url":      "line separator U+2028",
	}
	for _, k := range got.Keys {
		if k.Status != "invalid" || !strings.Contains(k.Reason, want[k.Key]) {
			t.Errorf("%s: %s %q, want invalid with %q", k.Key, k.Status, k.Reason, want[k.Key])
		}
	}
	if len(got.Keys) != len(want) || got.ok() {
		t.Errorf("keys %+v: want %d invalid, and check failing", got.Keys, len(want))
	}
}
