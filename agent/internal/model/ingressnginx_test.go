package model

import (
	"strings"
	"testing"
)

func TestIngressNginxIgnores(t *testing.T) {
	for key, want := range map[string]string{
		"nginx.ingress.kubernetes.io/hsts":                  "ConfigMap",
		"nginx.ingress.kubernetes.io/add-base-url":          "removed",
		"nginx.ingress.kubernetes.io/websocket-services":    "nginx.org",
		"nginx.ingress.kubernetes.io/proxy-body-sise":       "typo of proxy-body-size",
		"nginx.ingress.kubernetes.io/something-else-entire": "not an ingress-nginx annotation",
	} {
		why, ignored := ingressNginxIgnores(key)
		if !ignored || !strings.Contains(why, want) {
			t.Errorf("%s: %q, %v; want ignored, saying %q", key, why, ignored, want)
		}
		wantStatus := AnnotationIgnoredByIngressNginx
		if strings.Contains(want, "typo") {
			wantStatus = AnnotationTypo
		}
		if status, reason, _ := AnnotationStatusReason(key); status != wantStatus || reason != why {
			t.Errorf("%s: status %q (%q), want %q", key, status, reason, wantStatus)
		}
	}
	for _, key := range []string{
		"nginx.ingress.kubernetes.io/auth-url",        // ingress-nginx reads it
		"nginx.ingress.kubernetes.io/proxy-body-size", // both read it
		"restysync.io/whatever",                       // not ingress-nginx's prefix
		"example.com/hsts",
	} {
		if why, ignored := ingressNginxIgnores(key); ignored {
			t.Errorf("%s: ignored (%s), want read by ingress-nginx or not its prefix", key, why)
		}
	}
	// Two names within two edits: no guess.
	if near := nearestIngressNginxAnnotation("limit-rpx"); near != "" {
		t.Errorf("limit-rpx: guessed %q between limit-rps and limit-rpm", near)
	}
}

// A typo names the key its author meant, prefix included: under
// ingress-nginx's prefix as status typo, under restysync's as a suggestion
// beside status unknown (restysync.io/ keys are not ingress-nginx's to
// ignore).
func TestAnnotationTypoSuggestion(t *testing.T) {
	for key, want := range map[string][2]string{
		"nginx.ingress.kubernetes.io/rewrite-targt":   {AnnotationTypo, "nginx.ingress.kubernetes.io/rewrite-target"},
		"nginx.ingress.kubernetes.io/proxy-body-sise": {AnnotationTypo, "nginx.ingress.kubernetes.io/proxy-body-size"},
		"restysync.io/upstream-hash-bi":               {AnnotationUnknown, "restysync.io/upstream-hash-by"},
		"nginx.ingress.kubernetes.io/rewrite-target":  {AnnotationSupported, ""},
		"nginx.ingress.kubernetes.io/hsts":            {AnnotationIgnoredByIngressNginx, ""},
		"nginx.ingress.kubernetes.io/limit-rpx":       {AnnotationIgnoredByIngressNginx, ""}, // limit-rps or limit-rpm: no guess
	} {
		status, _, suggestion := AnnotationStatusReason(key)
		if status != want[0] || suggestion != want[1] {
			t.Errorf("%s: %q, suggesting %q; want %q, suggesting %q", key, status, suggestion, want[0], want[1])
		}
	}
	if got := TypoOf("use-gzipp", []string{"use-gzip", "use-http2"}); got != "use-gzip" {
		t.Errorf("TypoOf(use-gzipp) = %q", got)
	}
	if got := TypoOf("use-gzip", []string{"use-gzip", "use-gzipx"}); got != "" {
		t.Errorf("TypoOf of a known name = %q, want no guess", got)
	}
}
