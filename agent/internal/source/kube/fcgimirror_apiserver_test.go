//go:build linux

package kube

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/restysync/restysync/agent/internal/source"
	"github.com/restysync/restysync/agent/internal/testenv/kubeapi"
)

// On a real API server the ConfigMaps of fastcgi-params-configmap (for an
// FCGI Ingress) and custom-headers are read by name in the Ingress's
// namespace, as those of auth-proxy-set-headers are; a params ConfigMap
// of an Ingress that is not FCGI is not read.
func TestFastCGIAndCustomHeadersConfigMapsAPIServer(t *testing.T) {
	srv := kubeapi.Start(t, kubeapi.Options{})
	admin := adminClient(t, srv)
	createAll(t, admin, namespace("web"), namespace("restysync"))
	php := authIngress("php", "web", "restysync", "users")
	php.Annotations = map[string]string{
		"nginx.ingress.kubernetes.io/backend-protocol":         "FCGI",
		"nginx.ingress.kubernetes.io/fastcgi-params-configmap": "php-params",
		"nginx.ingress.kubernetes.io/custom-headers":           "web/resp-headers",
	}
	notFCGI := authIngress("plain", "web", "restysync", "users")
	notFCGI.Annotations = map[string]string{"nginx.ingress.kubernetes.io/fastcgi-params-configmap": "unread-params"}
	createAll(t, admin, append(testObjects(), php, notFCGI,
		configMapObject("web", "php-params", map[string]string{"SCRIPT_FILENAME": "/srv$fastcgi_script_name"}),
		configMapObject("web", "resp-headers", map[string]string{"X-Frame-Options": "DENY"}),
		configMapObject("web", "unread-params", map[string]string{"A": "b"}),
	)...)

	var mu sync.Mutex
	var requests []string
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
	src := New(agentClient(t, cfg), Options{IngressClass: "restysync"})
	startSource(t, src, func(source.Change) {})
	eventually(t, "both named ConfigMaps in the snapshot", func() bool {
		snap, _ := src.Snapshot()
		var names []string
		for cm := range snap.ConfigMaps.All() {
			names = append(names, cm.Namespace+"/"+cm.Name)
		}
		slices.Sort(names)
		return slices.Equal(names, []string{"web/php-params", "web/resp-headers"})
	})
	mu.Lock()
	defer mu.Unlock()
	allowed := []string{
		"/api/v1/namespaces/web/configmaps?metadata.name=php-params",
		"/api/v1/namespaces/web/configmaps?metadata.name=resp-headers",
	}
	for _, r := range requests {
		if !slices.Contains(allowed, r) {
			t.Errorf("asked the API server for ConfigMaps %s, want only %v", r, allowed)
		}
	}
}
