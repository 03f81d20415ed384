package model

import (
	"reflect"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ServiceOf keeps every field the stages read, and the whole object only
// of a Service the status writer may manage.
func TestServiceOf(t *testing.T) {
	yes := true
	spec := corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
		Selector: map[string]string{"app": "web"},
		Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080},
			{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53}}}
	want := Service{Namespace: "shop", Name: "web", ResourceVersion: "7", Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10",
		Ports: []ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}, {Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53}}}
	for _, tc := range []struct {
		name  string
		meta  metav1.ObjectMeta
		whole bool
	}{
		{"a tenant's", metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, false},
		{"labelled as a Gateway's", metav1.ObjectMeta{Labels: map[string]string{GatewayServiceManagedByLabel: GatewayServiceManagedBy}}, true},
		{"owned by a Gateway", metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{APIVersion: "gateway.networking.k8s.io/v1",
			Kind: "Gateway", Name: "gw", UID: "u1", Controller: &yes}}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			meta := tc.meta
			meta.Namespace, meta.Name, meta.ResourceVersion = "shop", "web", "7"
			svc := &corev1.Service{ObjectMeta: meta, Spec: spec}
			got := ServiceOf(svc)
			if (got.Object != nil) != tc.whole || got.Object != nil && got.Object != svc {
				t.Errorf("Object %p, want the Service whole: %v", got.Object, tc.whole)
			}
			c := *got
			c.Object = nil
			if !reflect.DeepEqual(c, want) {
				t.Errorf("ServiceOf = %+v, want %+v", c, want)
			}
			if got.OwnedByGateway("u1") != (tc.name == "owned by a Gateway") {
				t.Errorf("OwnedByGateway(u1) = %v", got.OwnedByGateway("u1"))
			}
		})
	}
	// What a Snapshot holds of each of 50,000 Services: a field added
	// here costs 50,000 times its size.
	if size := unsafe.Sizeof(Service{}); size > 112 {
		t.Errorf("a Service is %d bytes, was 112", size)
	}
}
