//go:build linux

package kube

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/restysync/restysync/agent/internal/source"
	"github.com/restysync/restysync/agent/internal/testenv/kubeapi"
)

// On a real API server the agent asks for Secrets only by type
// kubernetes.io/tls or by the name of an auth Secret an Ingress of ours
// names; it follows changes of that Secret, and stops watching it once no
// Ingress names it.
func TestAuthSecretsAPIServer(t *testing.T) {
	srv := kubeapi.Start(t, kubeapi.Options{})
	admin := adminClient(t, srv)
	createAll(t, admin, namespace("web"), namespace("restysync"))
	createAll(t, admin, authTestObjects()...)

	var mu sync.Mutex
	var selectors []string // field selectors of the agent's Secret requests
	cfg := srv.Config()
	cfg.QPS, cfg.Burst = 1000, 1000
	cfg.WarningHandler = rest.NoWarnings{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if strings.Contains(req.URL.Path, "/secrets") {
				mu.Lock()
				selectors = append(selectors, req.URL.Path+"?"+req.URL.Query().Get("fieldSelector"))
				mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	})
	src := New(agentClient(t, cfg), Options{IngressClass: "restysync"})
	counter := newKindCounter()
	startSource(t, src, counter.changed)

	wantServedAuthSecrets(t, src)

	t.Run("a changed auth Secret", func(t *testing.T) {
		before := counter.get(source.KindSecret)
		ctx := context.Background()
		users, err := admin.CoreV1().Secrets("web").Get(ctx, "users", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		users.Data["auth"] = []byte("alice:{PLAIN}new\n")
		if _, err := admin.CoreV1().Secrets("web").Update(ctx, users, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the new auth in the snapshot", func() bool {
			snap, _ := src.Snapshot()
			for s := range snap.Secrets.All() {
				if s.Name == "users" {
					return string(s.Data["auth"]) == "alice:{PLAIN}new\n"
				}
			}
			return false
		})
		if counter.get(source.KindSecret) == before {
			t.Errorf("no Secret change reported")
		}
	})

	t.Run("no Ingress names it any more", func(t *testing.T) {
		ctx := context.Background()
		for _, name := range []string{"secured", "secured-too"} {
			if err := admin.NetworkingV1().Ingresses("web").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, "web/users out of the snapshot and unwatched", func() bool {
			snap, _ := src.Snapshot()
			return slices.Equal(names(snap.Secrets.Slice()), []string{"web/tls"}) && len(src.authSecrets.watched()) == 1
		})
	})

	mu.Lock()
	defer mu.Unlock()
	for _, sel := range selectors {
		path, selector, _ := strings.Cut(sel, "?")
		switch selector {
		case "type=kubernetes.io/tls":
		case "metadata.name=users", "metadata.name=basic":
			if !strings.Contains(path, "/namespaces/web/") {
				t.Errorf("asked for %s, want only in namespace web", sel)
			}
		default:
			t.Errorf("asked the API server for Secrets %s, want only TLS ones or web/users and web/basic by name", sel)
		}
	}
	if len(selectors) == 0 {
		t.Errorf("no Secret requests recorded")
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
