package kube

import (
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/restysync/restysync/agent/internal/source"
)

// Opaque Secrets reach the snapshot only with an "auth" key, and the cache
// holds nothing of any Opaque Secret but that key.
func TestAuthSecrets(t *testing.T) {
	objects := append(testObjects(),
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "users", Namespace: "web"},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{"auth": []byte("alice:{PLAIN}x\n"), "api-key": []byte("hunter2")},
		},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "basic", Namespace: "web"},
			Type:       corev1.SecretTypeBasicAuth,
			Data:       map[string][]byte{"auth": []byte("bob:{PLAIN}y\n"), "password": []byte("y")},
		},
	)
	client := fake.NewClientset(objects...)
	src := New(client, Options{})
	startSource(t, src, func(source.Kind) {})

	snap, _ := src.Snapshot()
	// The fake ignores field selectors: the transform and Snapshot still
	// keep out every Secret that is neither TLS nor Opaque with "auth".
	if got := names(snap.Secrets); !slices.Equal(got, []string{"web/tls", "web/users"}) {
		t.Errorf("secrets = %v, want web/tls and web/users", got)
	}
	for _, s := range snap.Secrets {
		if s.Name == "users" && !maps.Equal(stringData(s), map[string]string{"auth": "alice:{PLAIN}x\n"}) {
			t.Errorf("web/users data = %v, want only auth", stringData(s))
		}
	}
	// Nothing but "auth" of an Opaque Secret is in the cache at all.
	for _, ni := range src.informers {
		if ni.transform == nil {
			continue
		}
		for _, obj := range ni.informer.GetStore().List() {
			s := obj.(*corev1.Secret)
			for key := range s.Data {
				if key != "auth" || s.Type != corev1.SecretTypeOpaque {
					t.Errorf("cached %s/%s (%s) holds data key %q", s.Namespace, s.Name, s.Type, key)
				}
			}
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
