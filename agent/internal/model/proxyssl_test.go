package model

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restysync/restysync/agent/internal/testenv/testcert"
)

func TestProxySSL(t *testing.T) {
	caPEM, _ := testcert.New(t, 1, time.Now().Add(time.Hour), "ca.test")
	certPEM, keyPEM := testcert.New(t, 2, time.Now().Add(time.Hour), "client.test")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "backend-ca"}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"ca.crt": []byte(caPEM), "tls.crt": []byte(certPEM), "tls.key": []byte(keyPEM)}}
	bad := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "bad-ca"}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"ca.crt": []byte("not a certificate")}}
	const p = "nginx.ingress.kubernetes.io/"
	build := func(annotations map[string]string) (ProxySSL, []Problem, []AuthFile) {
		opts := []ingressOption{rule("app.example.com", prefix("/", "web", 80)), annotation(p+"backend-protocol", "HTTPS")}
		for k, v := range annotations {
			opts = append(opts, annotation(k, v))
		}
		snap := snapshotOf(newIngress("default", "app", opts...))
		snap.Secrets = ListOf(secret, bad)
		m, problems := Build(snap)
		return m.Servers.At(0).Locations[0].ProxySettings().SSL, problems, m.AuthFiles
	}

	s, problems, files := build(map[string]string{p + "proxy-ssl-secret": "backend-ca", p + "proxy-ssl-verify": "on",
		p + "proxy-ssl-verify-depth": "2", p + "proxy-ssl-name": "Backend.Internal", p + "proxy-ssl-protocols": "TLSv1.2  TLSv1.3",
		p + "proxy-ssl-ciphers": "HIGH:!aNULL", p + "proxy-ssl-server-name": "off"})
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	if !s.Verify || s.VerifyDepth != 2 || s.Name != "backend.internal" || s.Protocols != "TLSv1.2 TLSv1.3" || s.Ciphers != "HIGH:!aNULL" || s.ServerName != "off" {
		t.Errorf("settings %+v", s)
	}
	if !strings.HasPrefix(s.CAFile, "auth/default_backend-ca.") || !strings.HasSuffix(s.CAFile, ".ca.crt") || s.CertFile == "" || s.KeyFile == "" {
		t.Errorf("files %+v", s)
	}
	if len(files) != 3 {
		t.Errorf("auth files %v, want the CA, the certificate and the key", files)
	}

	// A CA that does not parse: a problem, and verification against none.
	s, problems, _ = build(map[string]string{p + "proxy-ssl-secret": "bad-ca", p + "proxy-ssl-verify": "on"})
	if !s.Verify || s.CAFile != "" || len(problems) != 1 || !strings.Contains(problems[0].Reason, "ca.crt holds no PEM certificate") {
		t.Errorf("bad CA: %+v, %v", s, problems)
	}
	// A missing Secret is a missing object.
	_, problems, _ = build(map[string]string{p + "proxy-ssl-secret": "absent"})
	if len(problems) != 1 || problems[0].Missing != "Secret default/absent" {
		t.Errorf("missing Secret: %v", problems)
	}
	// Bad values are problems, with the defaults kept.
	s, problems, _ = build(map[string]string{p + "proxy-ssl-verify": "yes", p + "proxy-ssl-protocols": "SSLv3", p + "proxy-ssl-ciphers": "a;b"})
	if s != (ProxySSL{}) || len(problems) != 3 {
		t.Errorf("bad values: %+v, %v", s, problems)
	}
}
