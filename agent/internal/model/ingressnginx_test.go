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
		if status, reason := AnnotationStatusReason(key); status != AnnotationIgnoredByIngressNginx || reason != why {
			t.Errorf("%s: status %q (%q)", key, status, reason)
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
