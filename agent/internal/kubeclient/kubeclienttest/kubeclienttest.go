// Package kubeclienttest adapts a client-go clientset (a fake one, or one
// a test uses to write objects) to kubeclient.Interface. Only tests import
// it: it links client-go's whole clientset, which the agent leaves out.
package kubeclienttest

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gatewayfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	"github.com/restysync/restysync/agent/internal/kubeclient"
)

// Wrap returns cs as a kubeclient.Interface of a cluster without the
// Gateway API: ServedResources says its group is not served.
func Wrap(cs kubernetes.Interface) kubeclient.Interface { return clientset{cs: cs} }

// WrapGateway returns cs as a kubeclient.Interface whose Gateway API is
// gw (a fake one, whose discovery ServeGatewayAPI fills).
func WrapGateway(cs kubernetes.Interface, gw gatewayclient.Interface) kubeclient.Interface {
	return clientset{cs: cs, gw: gw}
}

// ServeGatewayAPI makes the discovery of the fake gw serve the Gateway
// API's kinds the agent reads.
func ServeGatewayAPI(gw *gatewayfake.Clientset) {
	d := gw.Discovery().(*fakediscovery.FakeDiscovery)
	d.Resources = append(d.Resources, &metav1.APIResourceList{
		GroupVersion: kubeclient.GatewayGroupVersion,
		APIResources: []metav1.APIResource{
			{Name: "gatewayclasses", Kind: "GatewayClass"}, {Name: "gateways", Namespaced: true, Kind: "Gateway"},
			{Name: "httproutes", Namespaced: true, Kind: "HTTPRoute"}, {Name: "grpcroutes", Namespaced: true, Kind: "GRPCRoute"},
			{Name: "tlsroutes", Namespaced: true, Kind: "TLSRoute"},
			{Name: "listenersets", Namespaced: true, Kind: "ListenerSet"},
			{Name: "referencegrants", Namespaced: true, Kind: "ReferenceGrant"},
			{Name: "backendtlspolicies", Namespaced: true, Kind: "BackendTLSPolicy"},
		},
	})
}

type clientset struct {
	cs kubernetes.Interface
	gw gatewayclient.Interface // nil: no Gateway API
}

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

func (c clientset) Services(namespace string) kubeclient.Objects[*corev1.Service, *corev1.ServiceList] {
	return c.cs.CoreV1().Services(namespace)
}

func (c clientset) EndpointSlices(namespace string) kubeclient.Objects[*discoveryv1.EndpointSlice, *discoveryv1.EndpointSliceList] {
	return c.cs.DiscoveryV1().EndpointSlices(namespace)
}

func (c clientset) Secrets(namespace string) kubeclient.ListWatcher[*corev1.SecretList] {
	return c.cs.CoreV1().Secrets(namespace)
}

func (c clientset) ConfigMaps(namespace string) kubeclient.ListWatcher[*corev1.ConfigMapList] {
	return c.cs.CoreV1().ConfigMaps(namespace)
}

func (c clientset) Namespaces() kubeclient.ListWatcher[*corev1.NamespaceList] {
	return c.cs.CoreV1().Namespaces()
}

func (c clientset) Leases(namespace string) kubeclient.Leases {
	return c.cs.CoordinationV1().Leases(namespace)
}

func (c clientset) Events(namespace string) kubeclient.Events {
	return c.cs.EventsV1().Events(namespace)
}

// The Gateway API's kinds are gw's: nil without one (Wrap), whose
// ServedResources says they are not served.

func (c clientset) GatewayClasses() kubeclient.StatusResource[*gatewayv1.GatewayClass, *gatewayv1.GatewayClassList] {
	return c.gw.GatewayV1().GatewayClasses()
}

func (c clientset) Gateways(namespace string) kubeclient.StatusResource[*gatewayv1.Gateway, *gatewayv1.GatewayList] {
	return c.gw.GatewayV1().Gateways(namespace)
}

func (c clientset) HTTPRoutes(namespace string) kubeclient.StatusResource[*gatewayv1.HTTPRoute, *gatewayv1.HTTPRouteList] {
	return c.gw.GatewayV1().HTTPRoutes(namespace)
}

func (c clientset) GRPCRoutes(namespace string) kubeclient.StatusResource[*gatewayv1.GRPCRoute, *gatewayv1.GRPCRouteList] {
	return c.gw.GatewayV1().GRPCRoutes(namespace)
}

func (c clientset) TLSRoutes(namespace string) kubeclient.StatusResource[*gatewayv1.TLSRoute, *gatewayv1.TLSRouteList] {
	return c.gw.GatewayV1().TLSRoutes(namespace)
}

func (c clientset) ListenerSets(namespace string) kubeclient.StatusResource[*gatewayv1.ListenerSet, *gatewayv1.ListenerSetList] {
	return c.gw.GatewayV1().ListenerSets(namespace)
}

func (c clientset) ReferenceGrants(namespace string) kubeclient.ListWatcher[*gatewayv1.ReferenceGrantList] {
	return c.gw.GatewayV1().ReferenceGrants(namespace)
}

func (c clientset) BackendTLSPolicies(namespace string) kubeclient.StatusResource[*gatewayv1.BackendTLSPolicy, *gatewayv1.BackendTLSPolicyList] {
	return c.gw.GatewayV1().BackendTLSPolicies(namespace)
}

func (c clientset) ServedResources(ctx context.Context, groupVersion string) ([]string, error) {
	resources := c.cs.Discovery().ServerResourcesForGroupVersion
	if strings.HasPrefix(groupVersion, gatewayv1.GroupName+"/") {
		if c.gw == nil {
			return nil, apierrors.NewNotFound(schema.GroupResource{Group: gatewayv1.GroupName}, "")
		}
		resources = c.gw.Discovery().ServerResourcesForGroupVersion
	}
	list, err := resources(groupVersion)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, r := range list.APIResources {
		names = append(names, r.Name)
	}
	return names, nil
}
