package model

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// withInfrastructure sets a Gateway's uid and spec.infrastructure labels
// and annotations.
func withInfrastructure(gw *gatewayv1.Gateway, uid string, labels, annotations map[string]string) *gatewayv1.Gateway {
	gw.UID = types.UID("uid-" + uid)
	infra := &gatewayv1.GatewayInfrastructure{}
	for k, v := range labels {
		if infra.Labels == nil {
			infra.Labels = map[gatewayv1.LabelKey]gatewayv1.LabelValue{}
		}
		infra.Labels[gatewayv1.LabelKey(k)] = gatewayv1.LabelValue(v)
	}
	for k, v := range annotations {
		if infra.Annotations == nil {
			infra.Annotations = map[gatewayv1.AnnotationKey]gatewayv1.AnnotationValue{}
		}
		infra.Annotations[gatewayv1.AnnotationKey(k)] = gatewayv1.AnnotationValue(v)
	}
	gw.Spec.Infrastructure = infra
	return gw
}

// With GatewayServices, an accepted Gateway gets a Service with its
// infrastructure labels and annotations, the gateway-name and managed-by
// labels, one port per distinct listener port, and EndpointSlices of the
// addresses an EndpointSlice may hold; the class declares
// GatewayInfrastructure. Without it, neither.
func TestGatewayServices(t *testing.T) {
	gw := withInfrastructure(newGateway("default", "web", httpListener("a", 80, "a.example"), httpListener("b", 80, "b.example"), httpListener("c", 8080, "")),
		"web", map[string]string{"key2": "value2"}, map[string]string{"key1": "value1"})
	gw.Spec.Addresses = []gatewayv1.GatewaySpecAddress{{Value: "192.0.2.10"}, {Value: "2001:db8::1"}, {Value: "127.0.50.1"}}
	s := gwSnapshot(gw)
	s.GatewayAddresses = []string{"192.0.2.10", "2001:db8::1", "127.0.50.1"}
	s.GatewayServices = true
	m, problems := Build(s)
	if len(problems) > 0 {
		t.Fatalf("problems: %s", problemList(problems))
	}
	want := []GatewayService{{
		Namespace: "default", Gateway: "web", GatewayUID: "uid-web", Name: "web-restysync",
		Labels:      map[string]string{"key2": "value2", GatewayNameLabel: "web", GatewayServiceManagedByLabel: GatewayServiceManagedBy},
		Annotations: map[string]string{"key1": "value1"},
		Ports:       []int32{80, 8080},
		Slices: []GatewayServiceSlice{
			{Name: "web-restysync-ipv4", AddressType: "IPv4", Addresses: []string{"192.0.2.10"}},
			{Name: "web-restysync-ipv6", AddressType: "IPv6", Addresses: []string{"2001:db8::1"}},
		},
	}}
	if !reflect.DeepEqual(m.GatewayAPI.Services, want) {
		t.Errorf("services\n%s\nwant\n%s", dump(m.GatewayAPI.Services), dump(want))
	}
	if !slices.Contains(m.GatewayAPI.Classes[0].SupportedFeatures, FeatureGatewayInfrastructure) || !slices.IsSorted(m.GatewayAPI.Classes[0].SupportedFeatures) {
		t.Errorf("supported features %v: want GatewayInfrastructure among them, sorted", m.GatewayAPI.Classes[0].SupportedFeatures)
	}

	s.GatewayServices = false
	m, _ = Build(s)
	if len(m.GatewayAPI.Services) > 0 || slices.Contains(m.GatewayAPI.Classes[0].SupportedFeatures, FeatureGatewayInfrastructure) {
		t.Errorf("without GatewayServices: services %s, features %v", dump(m.GatewayAPI.Services), m.GatewayAPI.Classes[0].SupportedFeatures)
	}
}

// A Gateway that is not accepted gets no Service.
func TestGatewayServicesNotAccepted(t *testing.T) {
	gw := withInfrastructure(newGateway("default", "params", httpListener("http", 80, "")), "params", map[string]string{"k": "v"}, nil)
	gw.Spec.Infrastructure.ParametersRef = &gatewayv1.LocalParametersReference{Group: "x.io", Kind: "P", Name: "p"}
	s := gwSnapshot(gw)
	s.GatewayServices = true
	m, _ := Build(s)
	if len(m.GatewayAPI.Services) > 0 {
		t.Errorf("services %s for a Gateway not accepted", dump(m.GatewayAPI.Services))
	}
}

// Keys that would forge who manages the objects are left out, each with a
// Problem naming the Gateway; the rest of the Service is kept and the
// Gateway still serves.
func TestGatewayServicesHostileKeys(t *testing.T) {
	gw := withInfrastructure(newGateway("default", "gw", httpListener("http", 80, "")), "gw", map[string]string{
		"app.kubernetes.io/managed-by":           "someone",
		"kubernetes.io/service-name":             "other",
		"endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
		GatewayNameLabel:                         "another",
		"restysync.io/owner":                     "me",
		"fine":                                   "yes",
	}, map[string]string{"restysync.io/x": "y", "note": "ok"})
	s := gwSnapshot(gw)
	s.GatewayServices = true
	m, problems := Build(s)
	checkGatewayProblems(t, problems, "Gateway", "gw",
		`labels["app.kubernetes.io/managed-by"]: the key is restysync's`,
		`labels["kubernetes.io/service-name"]: the key is restysync's`,
		`labels["endpointslice.kubernetes.io/managed-by"]: the key is restysync's`,
		`labels["gateway.networking.k8s.io/gateway-name"]: the key names the Gateway`,
		`labels["restysync.io/owner"]: the restysync.io prefix`,
		`annotations["restysync.io/x"]: the restysync.io prefix`)
	if len(m.GatewayAPI.Services) != 1 {
		t.Fatalf("services %s, want the Gateway's", dump(m.GatewayAPI.Services))
	}
	got := m.GatewayAPI.Services[0]
	wantLabels := map[string]string{"fine": "yes", GatewayNameLabel: "gw", GatewayServiceManagedByLabel: GatewayServiceManagedBy}
	if !reflect.DeepEqual(got.Labels, wantLabels) || !reflect.DeepEqual(got.Annotations, map[string]string{"note": "ok"}) {
		t.Errorf("labels %v annotations %v, want %v and note", got.Labels, got.Annotations, wantLabels)
	}
	wantCondition(t, "gw", gatewayStatusOf(t, m, "default", "gw").Conditions, condProgrammed, true, reasonProgrammed)
}

// A Service of the name that is not the Gateway's (no controller
// ownerReference with its UID) is left alone: a Problem, no Service
// wanted, the Gateway still serves. One the Gateway owns is its own. Of
// two Gateways whose Services would share a name, the older keeps it.
func TestGatewayServicesClash(t *testing.T) {
	gw := withInfrastructure(newGateway("default", "gw", httpListener("http", 80, "")), "gw", nil, nil)
	foreign := ServiceOf(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gw-restysync",
		Labels: map[string]string{GatewayServiceManagedByLabel: GatewayServiceManagedBy, GatewayNameLabel: "gw"}}})
	s := gwSnapshot(gw, foreign)
	s.GatewayServices = true
	m, problems := Build(s)
	checkGatewayProblems(t, problems, "Gateway", "gw", "Service gw-restysync exists and is not this Gateway's")
	if len(m.GatewayAPI.Services) > 0 {
		t.Errorf("services %s despite the clash", dump(m.GatewayAPI.Services))
	}
	wantCondition(t, "gw", gatewayStatusOf(t, m, "default", "gw").Conditions, condProgrammed, true, reasonProgrammed)

	yes := true
	foreign.Object.OwnerReferences = []metav1.OwnerReference{{APIVersion: "gateway.networking.k8s.io/v1", Kind: "Gateway", Name: "gw", UID: gw.UID, Controller: &yes}}
	m, problems = Build(s)
	if len(problems) > 0 || len(m.GatewayAPI.Services) != 1 {
		t.Errorf("a Service the Gateway owns: problems %s, services %s", problemList(problems), dump(m.GatewayAPI.Services))
	}

	// "a.b" and "a-b" would share "a-b-restysync" if dots became dashes:
	// the hash keeps them apart. A name made to collide with the hashed one
	// loses to the older Gateway.
	dotted := withInfrastructure(newGateway("default", "a.b", httpListener("http", 80, "")), "ab", nil, nil)
	hashed := GatewayServiceName("a.b")
	twin := withInfrastructure(olderBy(newGateway("default", strings.TrimSuffix(hashed, "-restysync"), httpListener("http", 81, "")), 1), "twin", nil, nil)
	dashed := withInfrastructure(newGateway("default", "a-b", httpListener("http", 82, "")), "a-b", nil, nil)
	s = gwSnapshot(dotted, twin, dashed)
	s.GatewayServices = true
	m, problems = Build(s)
	var names []string
	for _, svc := range m.GatewayAPI.Services {
		names = append(names, svc.Gateway+"→"+svc.Name)
	}
	if want := []string{"a.b→" + hashed, "a-b→a-b-restysync"}; !reflect.DeepEqual(names, want) {
		t.Errorf("services %v, want %v", names, want)
	}
	checkGatewayProblems(t, problems, "Gateway", twin.Name, "is that of the older Gateway a.b")
}

// GatewayServiceName is always a DNS label (what a Service's name must
// be), and different for different Gateway names of one namespace.
func TestGatewayServiceName(t *testing.T) {
	long := strings.Repeat("a", 60)
	cases := map[string]string{
		"web":   "web-restysync",
		"a.b":   "",
		"1gw":   "",
		long:    "",
		"x.y.z": "",
	}
	seen := map[string]string{}
	for gw, want := range cases {
		got := GatewayServiceName(gw)
		if errs := validation.IsDNS1035Label(got); len(errs) > 0 {
			t.Errorf("GatewayServiceName(%q) = %q: %v", gw, got, errs)
		}
		if want != "" && got != want {
			t.Errorf("GatewayServiceName(%q) = %q, want %q", gw, got, want)
		}
		if other, dup := seen[got]; dup {
			t.Errorf("GatewayServiceName(%q) = GatewayServiceName(%q) = %q", gw, other, got)
		}
		seen[got] = gw
	}
	if GatewayServiceName(long+"b") == GatewayServiceName(long+"c") {
		t.Errorf("two long names share a Service name")
	}
}

// The incremental build reads the clashing Service as Build does: once
// the tenant's Service is gone, the next build wants the Gateway's.
func TestGatewayServicesIncremental(t *testing.T) {
	gw := withInfrastructure(newGateway("default", "gw", httpListener("http", 80, "")), "gw", nil, nil)
	foreign := ServiceOf(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gw-restysync"}})
	s := gwSnapshot(gw, foreign)
	s.GatewayServices = true
	inc := NewIncremental()
	m, _, _ := inc.Build(s)
	if len(m.GatewayAPI.Services) > 0 {
		t.Fatalf("services %s despite the clash", dump(m.GatewayAPI.Services))
	}
	s.Services = ListOf(slices.DeleteFunc(s.Services.Slice(), func(svc *Service) bool { return svc == foreign })...)
	m, problems, _ := inc.Build(s)
	want, wantProblems := Build(s)
	if len(m.GatewayAPI.Services) != 1 || !reflect.DeepEqual(m.GatewayAPI, want.GatewayAPI) || !reflect.DeepEqual(problems, wantProblems) {
		t.Errorf("incremental: services %s problems %s; Build: services %s", dump(m.GatewayAPI.Services), problemList(problems), dump(want.GatewayAPI.Services))
	}
}
