package model

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Service is what the stages read of a Kubernetes Service, and what a
// Snapshot holds of one: the sources make it (ServiceOf) as they decode
// the Service and keep it instead of the whole object, whose type alone
// is 592 bytes (a 640-byte cell, its ObjectMeta 232 of them) where this
// is 112: at 50,000 Services the whole objects held 29 MB more of the
// agent's heap (TestSourceHeap, TestHeapAtScale).
// Every field Build reads of a Service is here; a field it comes to read
// must be added here (and to ServiceOf) first.
type Service struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// ResourceVersion is the API server's (the kube source drops resync
	// replays by it); "" from a file.
	ResourceVersion string             `json:"resourceVersion,omitempty"`
	Type            corev1.ServiceType `json:"type,omitempty"`
	ClusterIP       string             `json:"clusterIP,omitempty"`
	Ports           []ServicePort      `json:"ports,omitempty"`
	// Object is the whole Service when the status writer may manage it
	// (GatewayManaged: a Gateway's Service, which it updates from the
	// cached object; Build reads its controller ownerReference), nil for
	// any other. Read-only.
	Object *corev1.Service `json:"object,omitempty"`
}

// ServicePort is what the stages read of a Service's port.
type ServicePort struct {
	Name     string          `json:"name,omitempty"`
	Protocol corev1.Protocol `json:"protocol,omitempty"`
	Port     int32           `json:"port"`
}

// ServiceOf is what the stages read of svc (Service). It keeps svc itself
// only when GatewayManaged; it shares svc's strings.
func ServiceOf(svc *corev1.Service) *Service {
	s := &Service{Namespace: svc.Namespace, Name: svc.Name, ResourceVersion: svc.ResourceVersion,
		Type: svc.Spec.Type, ClusterIP: svc.Spec.ClusterIP}
	if len(svc.Spec.Ports) > 0 {
		s.Ports = make([]ServicePort, len(svc.Spec.Ports))
		for i, p := range svc.Spec.Ports {
			s.Ports[i] = ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port}
		}
	}
	if GatewayManaged(&svc.ObjectMeta) {
		s.Object = svc
	}
	return s
}

// ServicesOf is ServiceOf of each of services, in their order.
func ServicesOf(services ...*corev1.Service) []*Service {
	out := make([]*Service, len(services))
	for i, svc := range services {
		out[i] = ServiceOf(svc)
	}
	return out
}

// DeepCopy is a copy of s that shares nothing with it but strings.
func (s *Service) DeepCopy() *Service {
	c := *s
	c.Ports = slices.Clone(s.Ports)
	c.Object = s.Object.DeepCopy()
	return &c
}

func (s *Service) GetNamespace() string       { return s.Namespace }
func (s *Service) GetName() string            { return s.Name }
func (s *Service) GetResourceVersion() string { return s.ResourceVersion }

// OwnedByGateway says whether the Service's controller is the Gateway
// whose UID is uid (OwnedByGateway of its Object).
func (s *Service) OwnedByGateway(uid types.UID) bool {
	return s.Object != nil && OwnedByGateway(s.Object, uid)
}

// GatewayManaged says whether m is the metadata of an object the status
// writer may manage: labelled as Gateway Services' objects are
// (GatewayServiceManagedByLabel), or with an owner in the Gateway API's
// group.
func GatewayManaged(m *metav1.ObjectMeta) bool {
	if _, ok := m.Labels[GatewayServiceManagedByLabel]; ok {
		return true
	}
	for _, ref := range m.OwnerReferences {
		if strings.HasPrefix(ref.APIVersion, gatewayv1.GroupName+"/") {
			return true
		}
	}
	return false
}
