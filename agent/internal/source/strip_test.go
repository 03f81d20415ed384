package source

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestStrip(t *testing.T) {
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:          "tls",
			Annotations:   map[string]string{LastAppliedAnnotation: "{}"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		},
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": []byte("c")},
	}
	for range 2 { // idempotent
		Strip(secret)
		if secret.ManagedFields != nil || secret.Annotations != nil || string(secret.Data["tls.crt"]) != "c" {
			t.Errorf("Strip = %+v, want no managedFields or annotations, data kept", secret)
		}
	}
	node, zone, ready := "node-1", "zone-a", true
	slice := &discoveryv1.EndpointSlice{Endpoints: []discoveryv1.Endpoint{{
		Addresses:  []string{"10.0.0.1"},
		Conditions: discoveryv1.EndpointConditions{Ready: &ready},
		TargetRef:  &corev1.ObjectReference{Kind: "Pod", Name: "p"},
		NodeName:   &node, Zone: &zone,
		Hints: &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: zone}}},
	}}}
	Strip(slice)
	e := slice.Endpoints[0]
	if e.TargetRef != nil || e.NodeName != nil || e.Zone != nil || e.Hints != nil {
		t.Errorf("Strip kept %+v, want no pod reference, node, zone or hints", e)
	}
	if e.Addresses[0] != "10.0.0.1" || e.Conditions.Ready == nil || !*e.Conditions.Ready {
		t.Errorf("Strip lost the address or readiness: %+v", e)
	}
	// Other annotations stay.
	ing := &metav1.ObjectMeta{Annotations: map[string]string{LastAppliedAnnotation: "{}", "a": "b"}}
	Strip(ing)
	if len(ing.Annotations) != 1 || ing.Annotations["a"] != "b" {
		t.Errorf("Strip left annotations %v, want only a=b", ing.Annotations)
	}
}

// A Namespace keeps its name and labels only.
func TestStripNamespace(t *testing.T) {
	ns := &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"c": "d"}},
		Spec:       corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"kubernetes"}},
		Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
	}
	Strip(ns)
	if ns.Name != "web" || ns.Labels["a"] != "b" || ns.Annotations != nil || ns.Spec.Finalizers != nil || ns.Status.Phase != "" {
		t.Errorf("Strip = %+v", ns)
	}
}
