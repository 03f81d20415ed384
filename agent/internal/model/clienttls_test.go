package model

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restysync/restysync/agent/internal/testenv/testcert"
)

func TestClientTLS(t *testing.T) {
	caPEM, _ := testcert.New(t, 1, time.Now().Add(time.Hour), "ca.test")
	ca := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "client-ca"}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"ca.crt": []byte(caPEM)}}
	const p = "nginx.ingress.kubernetes.io/"
	withTLS := func(name string, created time.Time, annotations map[string]string) *networkingv1.Ingress {
		opts := []ingressOption{rule("app.example.com", prefix("/"+name, "web", 80))}
		for k, v := range annotations {
			opts = append(opts, annotation(k, v))
		}
		ing := newIngress("default", name, opts...)
		ing.CreationTimestamp = metav1.NewTime(created)
		ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"app.example.com"}}}
		return ing
	}
	now := time.Now()
	snap := snapshotOf(
		withTLS("newer", now, map[string]string{p + "auth-tls-secret": "client-ca", p + "auth-tls-verify-client": "optional"}),
		withTLS("older", now.Add(-time.Hour), map[string]string{p + "auth-tls-secret": "client-ca", p + "auth-tls-verify-depth": "3",
			p + "auth-tls-pass-certificate-to-upstream": "true", p + "auth-tls-match-cn": "CN=a|CN=b"}),
		withTLS("missing", now, map[string]string{p + "auth-tls-secret": "absent"}),
	)
	snap.Secrets = ListOf(ca)
	m, problems := Build(snap)
	srv := m.Servers.At(0)
	if c := srv.ClientTLSSettings(); c.Verify != "on" || c.Depth != 3 || !strings.HasSuffix(c.CAFile, ".ca.crt") {
		t.Errorf("the host's settings %+v, want the older Ingress's", c)
	}
	byIngress := map[string]Location{}
	for _, l := range srv.Locations {
		byIngress[l.Ingress] = l
	}
	if c := byIngress["default/older"].AccessSettings().ClientCert; !c.Headers || !c.PassCertificate || c.MatchCN != "CN=a|CN=b" {
		t.Errorf("older's location %+v", c)
	}
	if d := byIngress["default/missing"].AccessSettings().Denied; d == "" {
		t.Error("an Ingress naming a missing Secret is served without its certificate check")
	}
	var missing bool
	for _, pr := range problems {
		missing = missing || pr.Missing == "Secret default/absent"
	}
	if !missing {
		t.Errorf("problems %v, want the missing Secret", problems)
	}
}
