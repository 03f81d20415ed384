package kube

import (
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/restysync/restysync/agent/internal/kubeclient/kubeclienttest"
	"github.com/restysync/restysync/agent/internal/source"
)

// authIngress is an Ingress of class that names secret for basic auth.
func authIngress(name, namespace, class, secret string) *networkingv1.Ingress {
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Annotations: map[string]string{
			"nginx.ingress.kubernetes.io/auth-type":   "basic",
			"nginx.ingress.kubernetes.io/auth-secret": secret,
		}},
		Spec: networkingv1.IngressSpec{IngressClassName: &class, DefaultBackend: &networkingv1.IngressBackend{
			Service: &networkingv1.IngressServiceBackend{Name: "app", Port: networkingv1.ServiceBackendPort{Number: 80}}}},
	}
}

func opaqueSecret(name, namespace string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

// authTestObjects: web/users is named by an Ingress of ours, web/foreign
// only by one of another class, web/unnamed by none, web/basic is named but
// of another type.
func authTestObjects() []runtime.Object {
	basic := opaqueSecret("basic", "web", map[string]string{"auth": "bob:{PLAIN}y\n", "password": "y"})
	basic.Type = corev1.SecretTypeBasicAuth
	return append(testObjects(),
		authIngress("secured", "web", "restysync", "users"),
		authIngress("secured-too", "web", "restysync", "web/users"),
		authIngress("theirs", "web", "nginx", "foreign"),
		authIngress("typed", "web", "restysync", "basic"),
		opaqueSecret("users", "web", map[string]string{"auth": "alice:{PLAIN}x\n", "api-key": "hunter2"}),
		opaqueSecret("foreign", "web", map[string]string{"auth": "eve:{PLAIN}z\n"}),
		opaqueSecret("unnamed", "web", map[string]string{"auth": "mallory:{PLAIN}w\n"}),
		basic,
	)
}

// Only the Opaque Secrets that Ingresses of ours name for basic auth reach
// the snapshot, with nothing but their "auth" key, even from a server that
// ignores field selectors (the fake).
func TestAuthSecrets(t *testing.T) {
	client := fake.NewClientset(authTestObjects()...)
	src := New(kubeclienttest.Wrap(client), Options{IngressClass: "restysync"})
	startSource(t, src, func(source.Change) {})

	wantServedAuthSecrets(t, src)
	watched := src.authSecrets.watched()
	if len(watched) != 2 { // users (named twice) and basic
		t.Errorf("watching %v, want web/users and web/basic", watched)
	}
	for _, w := range src.authSecrets.watches {
		for _, obj := range w.informer.GetStore().List() {
			s := obj.(*corev1.Secret)
			for key := range s.Data {
				if key != "auth" || s.Type != corev1.SecretTypeOpaque || s.Name != "users" {
					t.Errorf("cached %s/%s (%s) holds data key %q", s.Namespace, s.Name, s.Type, key)
				}
			}
		}
	}

	t.Run("every Ingress", func(t *testing.T) {
		src := New(kubeclienttest.Wrap(client), Options{IngressClass: "restysync", EveryIngress: true})
		startSource(t, src, func(source.Change) {})
		snap, _ := src.Snapshot()
		if got := names(snap.Secrets.Slice()); !slices.Equal(got, []string{"web/foreign", "web/tls", "web/users"}) {
			t.Errorf("secrets = %v, want web/foreign, web/tls and web/users", got)
		}
	})
}

// wantServedAuthSecrets checks the snapshot of authTestObjects: the TLS
// Secret, and web/users with nothing but its auth key.
func wantServedAuthSecrets(t *testing.T, src *Source) {
	t.Helper()
	snap, _ := src.Snapshot()
	if got := names(snap.Secrets.Slice()); !slices.Equal(got, []string{"web/tls", "web/users"}) {
		t.Errorf("secrets = %v, want web/tls and web/users", got)
	}
	for s := range snap.Secrets.All() {
		if s.Name == "users" && !maps.Equal(stringData(s), map[string]string{"auth": "alice:{PLAIN}x\n"}) {
			t.Errorf("web/users data = %v, want only auth", stringData(s))
		}
	}
}

func stringData(s *corev1.Secret) map[string]string {
	out := map[string]string{}
	for k, v := range s.Data {
		out[k] = string(v)
	}
	return out
}

// watched returns the Secrets being watched.
func (a *authWatches) watched() []types.NamespacedName {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]types.NamespacedName, 0, len(a.watches))
	for ref := range a.watches {
		out = append(out, ref)
	}
	return out
}
