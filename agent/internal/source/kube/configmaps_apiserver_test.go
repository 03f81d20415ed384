//go:build linux

package kube

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/restysync/restysync/agent/internal/source"
	"github.com/restysync/restysync/agent/internal/testenv/kubeapi"
)

func configMapObject(namespace, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: data}
}

// On a real API server the agent reads ConfigMaps only by name: its own
// (--configmap), the TCP and UDP services ones, and those an Ingress of
// ours names for auth-proxy-set-headers in its own namespace; a change of
// one is followed, and the watch stops once no Ingress names it.
func TestConfigMapsAPIServer(t *testing.T) {
	srv := kubeapi.Start(t, kubeapi.Options{})
	admin := adminClient(t, srv)
	createAll(t, admin, namespace("web"), namespace("restysync"))
	headers := func(name, ref string) *networkingv1.Ingress {
		ing := authIngress(name, "web", "restysync", "users")
		ing.Annotations = map[string]string{
			"nginx.ingress.kubernetes.io/auth-url":               "http://auth.test/check",
			"nginx.ingress.kubernetes.io/auth-proxy-set-headers": ref,
		}
		return ing
	}
	createAll(t, admin, append(testObjects(),
		headers("tenant", "auth-headers"),
		headers("elsewhere", "restysync/tcp-services"), // another namespace: never read for it
		configMapObject("web", "auth-headers", map[string]string{"X-Tenant": "a-team"}),
		configMapObject("web", "unnamed", map[string]string{"X-Secret": "no"}),
		configMapObject("restysync", "tcp-services", map[string]string{"9000": "web/app:80"}),
		configMapObject("restysync", "udp-services", map[string]string{"53": "web/dns:53"}),
	)...)

	var mu sync.Mutex
	var requests []string // path?fieldSelector of the agent's ConfigMap requests
	cfg := srv.Config()
	cfg.QPS, cfg.Burst = 1000, 1000
	cfg.WarningHandler = rest.NoWarnings{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if strings.Contains(req.URL.Path, "/configmaps") {
				mu.Lock()
				requests = append(requests, req.URL.Path+"?"+req.URL.Query().Get("fieldSelector"))
				mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	})
	src := New(agentClient(t, cfg), Options{IngressClass: "restysync",
		TCPServices: "restysync/tcp-services", UDPServices: "restysync/udp-services"})
	startSource(t, src, func(source.Change) {})

	eventually(t, "the named ConfigMaps in the snapshot", func() bool {
		snap, _ := src.Snapshot()
		return snap.ConfigMaps.Len() == 1 && snap.ConfigMaps.At(0).Data["X-Tenant"] == "a-team" &&
			snap.TCPServices != nil && snap.TCPServices.Data["9000"] == "web/app:80" &&
			snap.UDPServices != nil && snap.UDPServices.Data["53"] == "web/dns:53"
	})

	ctx := context.Background()
	cm, err := admin.CoreV1().ConfigMaps("web").Get(ctx, "auth-headers", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["X-Tenant"] = "b-team"
	if _, err := admin.CoreV1().ConfigMaps("web").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the changed ConfigMap in the snapshot", func() bool {
		snap, _ := src.Snapshot()
		return snap.ConfigMaps.Len() == 1 && snap.ConfigMaps.At(0).Data["X-Tenant"] == "b-team"
	})
	if err := admin.NetworkingV1().Ingresses("web").Delete(ctx, "tenant", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "web/auth-headers out of the snapshot and unwatched", func() bool {
		snap, _ := src.Snapshot()
		return snap.ConfigMaps.Len() == 0 && len(src.authConfigMaps.watched()) == 0
	})

	mu.Lock()
	defer mu.Unlock()
	allowed := []string{
		"/api/v1/namespaces/web/configmaps?metadata.name=auth-headers",
		"/api/v1/namespaces/restysync/configmaps?metadata.name=tcp-services",
		"/api/v1/namespaces/restysync/configmaps?metadata.name=udp-services",
	}
	for _, r := range requests {
		if !slices.Contains(allowed, r) {
			t.Errorf("asked the API server for ConfigMaps %s, want only %v", r, allowed)
		}
	}
	if len(requests) == 0 {
		t.Errorf("no ConfigMap requests recorded")
	}
}
