// Package kubeclienttest adapts a client-go clientset (a fake one, or one
// a test uses to write objects) to kubeclient.Interface. Only tests import
// it: it links client-go's whole clientset, which the agent leaves out.
package kubeclienttest

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/restysync/restysync/agent/internal/kubeclient"
)

// Wrap returns cs as a kubeclient.Interface.
func Wrap(cs kubernetes.Interface) kubeclient.Interface { return clientset{cs} }

type clientset struct{ cs kubernetes.Interface }

// IsWatchListSemanticsUnSupported is the clientset's answer (a fake says
// true), which kubeclient.NewInformer asks.
func (c clientset) IsWatchListSemanticsUnSupported() bool {
	u, ok := c.cs.(interface{ IsWatchListSemanticsUnSupported() bool })
	return ok && u.IsWatchListSemanticsUnSupported()
}

func (c clientset) Ingresses(namespace string) kubeclient.Ingresses {
	return c.cs.NetworkingV1().Ingresses(namespace)
}

func (c clientset) IngressClasses() kubeclient.ListWatcher[*networkingv1.IngressClassList] {
	return c.cs.NetworkingV1().IngressClasses()
}

func (c clientset) Services(namespace string) kubeclient.ListWatcher[*corev1.ServiceList] {
	return c.cs.CoreV1().Services(namespace)
}

func (c clientset) EndpointSlices(namespace string) kubeclient.ListWatcher[*discoveryv1.EndpointSliceList] {
	return c.cs.DiscoveryV1().EndpointSlices(namespace)
}

func (c clientset) Secrets(namespace string) kubeclient.ListWatcher[*corev1.SecretList] {
	return c.cs.CoreV1().Secrets(namespace)
}

func (c clientset) ConfigMaps(namespace string) kubeclient.ListWatcher[*corev1.ConfigMapList] {
	return c.cs.CoreV1().ConfigMaps(namespace)
}

func (c clientset) Leases(namespace string) kubeclient.Leases {
	return c.cs.CoordinationV1().Leases(namespace)
}

func (c clientset) Events(namespace string) kubeclient.Events {
	return c.cs.EventsV1().Events(namespace)
}
