package apply

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/testenv/testcert"
)

// A tenant's Secret may have a name of 253 characters, the longest the API
// takes: the files the model makes of it (a client CA, a backend
// certificate, an htpasswd) must still be names WriteAuthFiles writes, or
// one tenant's Ingress would fail every apply.
func TestLongSecretNamesMakeFilesApplyWrites(t *testing.T) {
	long := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 61)
	if len(long) != 253 {
		t.Fatalf("name of %d characters", len(long))
	}
	namespace := strings.Repeat("n", 63)
	caPEM, _ := testcert.New(t, 1, time.Now().Add(time.Hour), "ca.test")
	certPEM, keyPEM := testcert.New(t, 2, time.Now().Add(time.Hour), "client.test")
	secrets := []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: long},
			Data: map[string][]byte{"ca.crt": []byte(caPEM), "tls.crt": []byte(certPEM), "tls.key": []byte(keyPEM), "auth": []byte("user:{PLAIN}pass\n")}},
	}
	const p = "nginx.ingress.kubernetes.io/"
	pathType := networkingv1.PathTypePrefix
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "app", Annotations: map[string]string{
			p + "auth-tls-secret":  namespace + "/" + long,
			p + "proxy-ssl-secret": namespace + "/" + long,
			p + "auth-type":        "basic",
			p + "auth-secret":      long,
		}},
		Spec: networkingv1.IngressSpec{
			TLS: []networkingv1.IngressTLS{{Hosts: []string{"app.example.com"}}},
			Rules: []networkingv1.IngressRule{{Host: "app.example.com", IngressRuleValue: networkingv1.IngressRuleValue{
				HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
					Path: "/", PathType: &pathType,
					Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
						Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}},
				}}},
			}}},
		},
	}
	class := "restysync"
	ing.Spec.IngressClassName = &class
	m, problems := model.Build(model.Snapshot{
		Ingresses: model.ListOf(ing),
		IngressClasses: model.ListOf(&networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: class},
			Spec: networkingv1.IngressClassSpec{Controller: model.ControllerName}}),
		IngressClass: class,
		Secrets:      model.ListOf(secrets...),
	})
	for _, pr := range problems {
		if strings.Contains(pr.Reason, long[:20]) {
			t.Errorf("problem: %s", pr.Reason)
		}
	}
	if len(m.AuthFiles) < 4 {
		t.Fatalf("files %+v, want the CA, the backend certificate and key, the htpasswd", m.AuthFiles)
	}
	n := &Nginx{SharedDir: t.TempDir()}
	if err := n.WriteAuthFiles(m.AuthFiles); err != nil {
		t.Fatal(err)
	}
	for _, f := range m.AuthFiles {
		if _, err := os.Stat(filepath.Join(n.SharedDir, f.Name)); err != nil {
			t.Error(err)
		}
	}
}

// A name longer than the model makes is refused before any file is
// written (the filesystem would refuse it halfway through).
func TestWriteAuthFilesRefusesLongNames(t *testing.T) {
	n := &Nginx{SharedDir: t.TempDir()}
	long := "auth/ns_" + strings.Repeat("a", model.MaxFileName)
	if err := n.WriteAuthFiles([]model.AuthFile{{Name: long, Content: "x"}}); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("error %v, want a refusal of the long name", err)
	}
}
