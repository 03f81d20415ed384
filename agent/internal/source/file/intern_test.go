package file

import (
	"reflect"
	"testing"
	"unsafe"

	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// Two decoded objects hold one copy of the strings shareStrings shares,
// and each object is what the decoder made of it.
func TestShareStrings(t *testing.T) {
	manifest := func(name string) []byte { // JSON, which the decoder reads as YAML
		return []byte(`{"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
 "metadata": {"name": "` + name + `", "namespace": "shop",
  "annotations": {"nginx.ingress.kubernetes.io/rewrite-target": "/` + name + `"}},
 "spec": {"ingressClassName": "restysync", "rules": [{"host": "` + name + `.example.com", "http": {"paths": [
  {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "` + name + `", "port": {"name": "http"}}}}]}}]}}`)
	}
	var got []*networkingv1.Ingress
	for _, name := range []string{"a", "b"} {
		raw := manifest(name)
		doc, reason, _ := decodeDocument(raw)
		if reason != "" {
			t.Fatal(reason)
		}
		want, _, err := decodeObject(raw)
		if err != nil {
			t.Fatal(err)
		}
		want.(*networkingv1.Ingress).Namespace = "shop"
		if !reflect.DeepEqual(doc.obj, want) {
			t.Errorf("%s: decoded %+v, want %+v", name, doc.obj, want)
		}
		got = append(got, doc.obj.(*networkingv1.Ingress))
	}
	same := func(what, x, y string) {
		if x != y || unsafe.StringData(x) != unsafe.StringData(y) {
			t.Errorf("%s: %q and %q are two copies", what, x, y)
		}
	}
	a, b := got[0], got[1]
	same("namespace", a.Namespace, b.Namespace)
	same("kind", a.Kind, b.Kind)
	same("apiVersion", a.APIVersion, b.APIVersion)
	same("class", *a.Spec.IngressClassName, *b.Spec.IngressClassName)
	pa, pb := a.Spec.Rules[0].HTTP.Paths[0], b.Spec.Rules[0].HTTP.Paths[0]
	same("pathType", string(*pa.PathType), string(*pb.PathType))
	same("port name", pa.Backend.Service.Port.Name, pb.Backend.Service.Port.Name)
	for k := range a.Annotations {
		for l := range b.Annotations {
			same("annotation key", k, l)
		}
	}
	var slices []*discoveryv1.EndpointSlice
	for _, name := range []string{"a", "b"} {
		doc, reason, _ := decodeDocument([]byte(`apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: ` + name + `
  labels:
    kubernetes.io/service-name: ` + name + `
addressType: IPv4
ports:
  - name: http
    port: 80
    protocol: TCP
endpoints:
  - addresses: ["10.0.0.1"]
`))
		if reason != "" {
			t.Fatal(reason)
		}
		slices = append(slices, doc.obj.(*discoveryv1.EndpointSlice))
	}
	same("addressType", string(slices[0].AddressType), string(slices[1].AddressType))
	same("port name", *slices[0].Ports[0].Name, *slices[1].Ports[0].Name)
	same("protocol", string(*slices[0].Ports[0].Protocol), string(*slices[1].Ports[0].Protocol))
	same("namespace (defaulted)", slices[0].Namespace, slices[1].Namespace)
	for k := range slices[0].Labels {
		for l := range slices[1].Labels {
			same("label key", k, l)
		}
	}
}
