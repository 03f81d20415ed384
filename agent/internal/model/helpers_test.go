package model

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Small constructors for the objects Build reads. Every Ingress is of
// testClass and created at baseTime unless an option says otherwise.

const testClass = "restysync"

var baseTime = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

type ingressOption func(*networkingv1.Ingress)

func newIngress(namespace, name string, opts ...ingressOption) *networkingv1.Ingress {
	class := testClass
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:         namespace,
			Name:              name,
			CreationTimestamp: metav1.NewTime(baseTime),
		},
		Spec: networkingv1.IngressSpec{IngressClassName: &class},
	}
	for _, opt := range opts {
		opt(ing)
	}
	return ing
}

// createdAt sets the creation time to baseTime plus minutes.
func createdAt(minutes int) ingressOption {
	return func(ing *networkingv1.Ingress) {
		ing.CreationTimestamp = metav1.NewTime(baseTime.Add(time.Duration(minutes) * time.Minute))
	}
}

func classField(name string) ingressOption {
	return func(ing *networkingv1.Ingress) { ing.Spec.IngressClassName = &name }
}

func noClassField() ingressOption {
	return func(ing *networkingv1.Ingress) { ing.Spec.IngressClassName = nil }
}

func annotation(key, value string) ingressOption {
	return func(ing *networkingv1.Ingress) {
		if ing.Annotations == nil {
			ing.Annotations = map[string]string{}
		}
		ing.Annotations[key] = value
	}
}

func rule(host string, paths ...networkingv1.HTTPIngressPath) ingressOption {
	return func(ing *networkingv1.Ingress) {
		ing.Spec.Rules = append(ing.Spec.Rules, networkingv1.IngressRule{
			Host:             host,
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}},
		})
	}
}

// hostOnly is a rule with a host and no http section.
func hostOnly(host string) ingressOption {
	return func(ing *networkingv1.Ingress) {
		ing.Spec.Rules = append(ing.Spec.Rules, networkingv1.IngressRule{Host: host})
	}
}

func defaultBackendTo(b networkingv1.IngressBackend) ingressOption {
	return func(ing *networkingv1.Ingress) { ing.Spec.DefaultBackend = &b }
}

func withTLS(secret string, hosts ...string) ingressOption {
	return func(ing *networkingv1.Ingress) {
		ing.Spec.TLS = append(ing.Spec.TLS, networkingv1.IngressTLS{Hosts: hosts, SecretName: secret})
	}
}

// backend refers to a Service port: port is an int (number) or a string (name).
func backend(service string, port any) networkingv1.IngressBackend {
	b := networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: service}}
	switch p := port.(type) {
	case int:
		b.Service.Port.Number = int32(p)
	case string:
		b.Service.Port.Name = p
	}
	return b
}

func httpPath(pathType *networkingv1.PathType, path string, b networkingv1.IngressBackend) networkingv1.HTTPIngressPath {
	return networkingv1.HTTPIngressPath{Path: path, PathType: pathType, Backend: b}
}

func pathTypeOf(t networkingv1.PathType) *networkingv1.PathType { return &t }

var (
	exactType  = pathTypeOf(networkingv1.PathTypeExact)
	prefixType = pathTypeOf(networkingv1.PathTypePrefix)
	implType   = pathTypeOf(networkingv1.PathTypeImplementationSpecific)
)

func prefix(path, service string, port any) networkingv1.HTTPIngressPath {
	return httpPath(prefixType, path, backend(service, port))
}

func exact(path, service string, port any) networkingv1.HTTPIngressPath {
	return httpPath(exactType, path, backend(service, port))
}

func ingressClass(name, controller string, isDefault bool) *networkingv1.IngressClass {
	c := &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       networkingv1.IngressClassSpec{Controller: controller},
	}
	if isDefault {
		c.Annotations = map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"}
	}
	return c
}

func service(namespace, name string, ports ...corev1.ServicePort) *Service {
	return ServiceOf(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: ports},
	})
}

func servicePort(name string, port int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: port, Protocol: corev1.ProtocolTCP}
}

func endpointSlice(namespace, name, svc string, family discoveryv1.AddressType, ports []discoveryv1.EndpointPort, endpoints ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: namespace, Name: name},
		AddressType: family,
		Ports:       ports,
		Endpoints:   endpoints,
	}
	if svc != "" {
		s.Labels = map[string]string{discoveryv1.LabelServiceName: svc}
	}
	return s
}

// slicePorts makes EndpointPorts from name, port pairs.
func slicePort(name string, port int32) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: &name, Port: &port}
}

// unnamedSlicePort has a nil Name, which means "".
func unnamedSlicePort(port int32) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Port: &port}
}

func ports(p ...discoveryv1.EndpointPort) []discoveryv1.EndpointPort { return p }

func boolPtr(b bool) *bool { return &b }

// ready is an endpoint with conditions.ready true.
func ready(addresses ...string) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: addresses, Conditions: discoveryv1.EndpointConditions{Ready: boolPtr(true)}}
}

func notReady(addresses ...string) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: addresses, Conditions: discoveryv1.EndpointConditions{Ready: boolPtr(false)}}
}

// readyUnset is an endpoint whose ready condition is unknown (nil): ready.
func readyUnset(addresses ...string) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: addresses}
}

// The "web" world most tests use: Service default/web, port 80 named http,
// targeting 8080 on two ready pods.
var (
	webService = service("default", "web", servicePort("http", 80))
	webSlice   = endpointSlice("default", "web-abc", "web", discoveryv1.AddressTypeIPv4,
		ports(slicePort("http", 8080)), ready("10.0.0.2"), ready("10.0.0.1"))
	webEndpoints = []Endpoint{{"10.0.0.1", 8080}, {"10.0.0.2", 8080}}
)

func snapshotOf(ingresses ...*networkingv1.Ingress) Snapshot {
	return Snapshot{
		Ingresses:      ListOf(ingresses...),
		IngressClasses: ListOf(ingressClass(testClass, ControllerName, false)),
		Services:       ListOf(webService),
		EndpointSlices: ListOf(webSlice),
		IngressClass:   testClass,
	}
}

func loc(path string, t PathType, backend, ingress string) Location {
	return Location{Path: path, PathType: t, Backend: backend, Ingress: ingress}
}

func ingressProblem(namespace, name, reason string) Problem {
	return Problem{Kind: "Ingress", Namespace: namespace, Name: name, Reason: reason}
}

func sliceProblem(namespace, name, reason string) Problem {
	return Problem{Kind: "EndpointSlice", Namespace: namespace, Name: name, Reason: reason}
}

// refusedSliceProblem is the Problem of an endpoint address refused as a
// target (Targets.CheckEndpoint).
func refusedSliceProblem(namespace, name, reason string) Problem {
	return Problem{Kind: "EndpointSlice", Namespace: namespace, Name: name, Reason: reason, Refused: true}
}

// checkBuild compares Build's result with the wanted model and problems.
func checkBuild(t *testing.T, s Snapshot, want Model, wantProblems []Problem) {
	t.Helper()
	got, problems := Build(s)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("model:\n got %s\nwant %s", dump(got), dump(want))
	}
	if !reflect.DeepEqual(problems, wantProblems) {
		t.Errorf("problems:\n got %s\nwant %s", dump(problems), dump(wantProblems))
	}
}

func dump(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// withAt returns a copy of l with item i replaced by v.
func withAt[T any](l List[T], i int, v T) List[T] {
	items := l.Slice()
	items[i] = v
	return ListOf(items...)
}

// reversed returns a copy of l in the reverse order.
func reversed[T any](l List[T]) List[T] {
	items := l.Slice()
	slices.Reverse(items)
	return ListOf(items...)
}
