package main

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restysync/restysync/agent/internal/model"
)

// Issue 25: check reports as invalid, with the reason, every value that
// holds a character no value may hold (it once froze every tenant's
// config) and every value nginx refuses at start.
func TestCheckRefusesUnrenderableAndNginxRefusedValues(t *testing.T) {
	tests := []struct{ key, value, reason string }{
		{"configuration-snippet", "add_header X-A \"a\u0085b\";", "C1 control character U+0085"}, // the payload
		{"configuration-snippet", "proxy_set_header X-A \"a\u2028b\";", "line separator U+2028"},
		{"server-snippet", "location /x { return 200 \"a\u0085\"; }", "C1 control character U+0085"},
		{"auth-url", "http://auth.default.svc/\u0085", "C1 control character U+0085"},
		{"auth-signin", "https://login.example.com/\u2029", "paragraph separator U+2029"},
		{"auth-request-redirect", "/x\u202e", "bidirectional control U+202E"},
		{"auth-cache-key", "$remote_user\u2066", "bidirectional control U+2066"},
		{"mirror-target", "http://mirror.default.svc/\u0085", "C1 control character U+0085"},
		{"proxy-redirect-to", "http://b/\u200b", "invisible format character U+200B"},
		{"upstream-vhost", "a\xed\xa0\x80.example.com", "is not valid UTF-8"},
		{"custom-http-errors", "404,499", `"499" is not a status code from 400 to 599 that nginx's error_page takes`},
		{"proxy-ssl-ciphers", "NOTACIPHER", `names "NOTACIPHER", which is not an OpenSSL cipher or alias`},
	}
	pathType := networkingv1.PathTypePrefix
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			key := "nginx.ingress.kubernetes.io/" + tt.key
			ing := &networkingv1.Ingress{
				ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-b", Name: "b", Annotations: map[string]string{key: tt.value,
					"nginx.ingress.kubernetes.io/default-backend": "web"}},
				Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "b.test", IngressRuleValue: networkingv1.IngressRuleValue{
					HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &pathType,
						Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}},
				}}}},
			}
			report, _ := checkSnapshot(model.Snapshot{Ingresses: model.ListOf(ing)}, "")
			var got CheckedAnnotation
			for _, a := range report.Ingresses[0].Annotations {
				if a.Key == key {
					got = a
				}
			}
			if got.Status != annotationInvalid || !strings.Contains(got.Reason, tt.reason) {
				t.Errorf("%s %q: %+v, want invalid with %q", key, tt.value, got, tt.reason)
			}
			if report.Ingresses[0].Moves || report.Summary.Invalid == 0 {
				t.Errorf("summary %+v: the Ingress moves", report.Summary)
			}
		})
	}
}

func TestCheckConfigMapRefusesWhatNginxRefuses(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ingress", Name: "restysync"}, Data: map[string]string{
		"ssl-ciphers":          "NOTACIPHER",
		"custom-http-errors":   "404,499",
		"forwarded-for-header": "X-A\u0085",
		"http-snippet":         "add_header X-A \"a\u0085b\";",
		"global-auth-url":      "http://auth/\u2028",
	}}
	got := checkConfigMap("ingress/restysync", cm)
	want := map[string]string{
		"ssl-ciphers":          `names "NOTACIPHER", which is not an OpenSSL cipher or alias`,
		"custom-http-errors":   `names "499"`,
		"forwarded-for-header": "C1 control character U+0085",
		"http-snippet":         "C1 control character U+0085",
		"global-auth-url":      "line separator U+2028",
	}
	for _, k := range got.Keys {
		if k.Status != "invalid" || !strings.Contains(k.Reason, want[k.Key]) {
			t.Errorf("%s: %s %q, want invalid with %q", k.Key, k.Status, k.Reason, want[k.Key])
		}
	}
	if len(got.Keys) != len(want) || got.failure(false) == "" {
		t.Errorf("keys %+v: want %d invalid, and check failing", got.Keys, len(want))
	}
}

// Issue 25, point 7: check fails on an endpoint Build refused as a target
// (an FQDN slice naming 127.0.0.1 reaches the pod) and on a manifest the
// folder holds that cannot be read, naming each; a document of a kind
// the file source does not read, and a slice's other problems, do not
// fail it.
func TestCheckObjects(t *testing.T) {
	read := []model.Problem{
		{Kind: "File", Name: "/m/b.yaml#1", Reason: "yaml: invalid Unicode character; document left out"},
		{Kind: "File", Name: "/m/deploy.yaml#1", Reason: `kind "Deployment" of apiVersion "apps/v1" is not read (the file source reads ` +
			`networking.k8s.io/v1 Ingress and IngressClass, v1 Service, Secret (type kubernetes.io/tls) and ConfigMap, discovery.k8s.io/v1 EndpointSlice, ` +
			`gateway.networking.k8s.io/v1 GatewayClass, Gateway, HTTPRoute, GRPCRoute, TLSRoute, ReferenceGrant, ListenerSet and BackendTLSPolicy, v1 Namespace); document left out`},
	}
	pathType := networkingv1.PathTypePrefix
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-b", Name: "b"},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "b.test", IngressRuleValue: networkingv1.IngressRuleValue{
			HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &pathType,
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}},
		}}}}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-b", Name: "web"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
	name, port, ready := "http", int32(8080), true
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "tenant-b", Name: "web-names", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4, Ports: []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1", "169.254.169.254", "not-an-ip"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
	}
	_, built := checkSnapshot(model.Snapshot{Ingresses: model.ListOf(ing), Services: model.ListOf(model.ServiceOf(svc)),
		EndpointSlices: model.ListOf(slice)}, "")
	got := checkObjects(read, built)
	want := []CheckedObject{
		{Object: "File /m/b.yaml#1", Status: "invalid", Reason: "yaml: invalid Unicode character; document left out"},
		{Object: "EndpointSlice tenant-b/web-names", Field: `endpoints[0].addresses[1] "169.254.169.254" port 8080`, Status: "refused",
			Reason: "is 169.254.169.254, a link-local address"},
	}
	if len(got) != len(want) {
		t.Fatalf("objects %+v, want %+v", got, want)
	}
	for i := range want {
		if g := got[i]; g.Object != want[i].Object || g.Field != want[i].Field || g.Status != want[i].Status || !strings.HasPrefix(g.Reason, want[i].Reason) {
			t.Errorf("object %d: %+v, want %+v", i, g, want[i])
		}
	}
}
