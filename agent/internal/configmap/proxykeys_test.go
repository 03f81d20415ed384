package configmap

import (
	"slices"
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
)

// The proxy keys take the annotations' values; a bad one is a Problem
// naming the key, and buffers nginx would refuse together are a Problem
// that leaves the number, busy size and temporary files at their
// defaults.
func TestProxyKeys(t *testing.T) {
	tests := []struct {
		name    string
		data    map[string]string
		check   func(h *render.HTTP) bool
		problem string // a key the one Problem names; "" for none
	}{
		{"kbve's buffers", map[string]string{"proxy-buffer-size": "160k", "proxy-buffers-number": "64", "client-body-buffer-size": "160k",
			"proxy-busy-buffers-size": "256k"}, func(h *render.HTTP) bool {
			return h.ProxyBufferSize == "160k" && h.ProxyBuffersNumber == 64 && h.ProxyBusyBuffersSize == "256k" && h.ClientBodyBufferSize == "160k"
		}, ""},
		{"two buffers", map[string]string{"proxy-buffers-number": "2"}, func(h *render.HTTP) bool {
			return h.ProxyBuffersNumber == 0
		}, "proxy-buffers-number"},
		{"busy too large", map[string]string{"proxy-buffer-size": "4k", "proxy-busy-buffers-size": "1m"}, func(h *render.HTTP) bool {
			return h.ProxyBufferSize == "4k" && h.ProxyBusyBuffersSize == ""
		}, "proxy-busy-buffers-size"},
		{"a g", map[string]string{"proxy-buffer-size": "1g"}, func(h *render.HTTP) bool { return h.ProxyBufferSize == "" }, "proxy-buffer-size"},
		{"redirect pair", map[string]string{"proxy-redirect-from": "http://backend/", "proxy-redirect-to": "$scheme://$host/"}, func(h *render.HTTP) bool {
			return h.ProxyRedirectFrom == "http://backend/" && h.ProxyRedirectTo == "${scheme}://${host}/"
		}, ""},
		{"redirect default", map[string]string{"proxy-redirect-from": "default", "proxy-redirect-to": "/x"}, func(h *render.HTTP) bool {
			return h.ProxyRedirectFrom == "" && h.ProxyRedirectTo == ""
		}, ""},
		{"redirect injection", map[string]string{"proxy-redirect-from": "http://a/", "proxy-redirect-to": "/;return 200"}, func(h *render.HTTP) bool {
			return h.ProxyRedirectFrom == "" && h.ProxyRedirectTo == ""
		}, "proxy-redirect-to"},
		{"cookie regex", map[string]string{"proxy-cookie-domain": "~.* x"}, func(h *render.HTTP) bool { return h.ProxyCookieDomain == "" }, "proxy-cookie-domain"},
		{"rate", map[string]string{"limit-rate": "1k"}, func(h *render.HTTP) bool { return h.LimitRate == "" }, "limit-rate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Apply(flags, "ingress", "restysync", tc.data)
			if !tc.check(r.Render.HTTP) {
				t.Errorf("settings %+v", *r.Render.HTTP)
			}
			switch {
			case tc.problem == "" && len(r.Problems) != 0:
				t.Errorf("problems %v", r.Problems)
			case tc.problem != "" && (len(r.Problems) != 1 || !strings.HasPrefix(r.Problems[0].Reason, "key "+tc.problem+": ")):
				t.Errorf("problems %v, want one naming %s", r.Problems, tc.problem)
			}
			if _, err := render.Render(model.Model{}, r.Render); err != nil {
				t.Errorf("the settings do not render: %v", err)
			}
		})
	}
}

// TestAnnotationTwins checks the table's ConfigMap column (model.Annotations)
// against the keys Apply reads: each twin it names is read here, and each
// key read here that shares a supported annotation's name is that
// annotation's twin.
func TestAnnotationTwins(t *testing.T) {
	read := append(append(SupportedKeys(), GlobalAuthKeys...), snippetKeys...)
	twinOf := map[string]string{}
	for _, row := range model.Annotations {
		if row.ConfigMap == "" {
			continue
		}
		twinOf[row.Name] = row.ConfigMap
		if !slices.Contains(read, row.ConfigMap) {
			t.Errorf("annotation %s: its ConfigMap key %s is not read by Apply", row.Name, row.ConfigMap)
		}
	}
	for _, row := range model.Annotations {
		if row.Status == model.AnnotationSupported && slices.Contains(read, row.Name) && twinOf[row.Name] != row.Name {
			t.Errorf("ConfigMap key %s shares the name of a supported annotation, but the table's ConfigMap column says %q", row.Name, twinOf[row.Name])
		}
	}
}
