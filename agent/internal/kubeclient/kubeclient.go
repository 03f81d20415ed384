// Package kubeclient is the Kubernetes API client of the stages that talk to
// the API server: the kube source (list and watch), the status writer
// (Ingress and Gateway API status, its Lease, and the Gateway Services)
// and the Event recorder.
// It knows the six API groups the agent reads or writes and nothing else:
// of the Gateway API's, the four kinds it reads (and the three whose status
// it writes), with the module's own types (sigs.k8s.io/gateway-api/apis/v1).
//
// Why not client-go's clientset: its package registers every API group in
// one scheme, and the urfave/cli help printer (text/template, which looks
// methods up by name) makes the linker keep every exported method of every
// type a binary holds; with all groups that was 26 of the agent's 60 MB.
// Typed List/Watch/Get/Create/Update over client-go's REST client, with a
// scheme of the six groups, is all the agent needs of it. The same holds
// for the Gateway API's generated clientset: its scheme registers every
// version of every kind, and its typed client the apply configurations;
// linked in, the agent grew from 37.1 to 60.8 MB.
package kubeclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// ListWatcher lists and watches one resource; an informer's source.
type ListWatcher[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// Ingresses are read by the source and given status by the status writer.
type Ingresses interface {
	ListWatcher[*networkingv1.IngressList]
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*networkingv1.Ingress, error)
	UpdateStatus(ctx context.Context, ing *networkingv1.Ingress, opts metav1.UpdateOptions) (*networkingv1.Ingress, error)
}

// Leases hold the status writer's election.
type Leases interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
}

// StatusResource is a resource that is read and whose status the agent
// writes (only the status subresource: the Gateway API's kinds). Get is
// the status writer's re-read after a conflict and the Event recorder's
// read of an object's UID.
type StatusResource[O runtime.Object, L runtime.Object] interface {
	ListWatcher[L]
	Get(ctx context.Context, name string, opts metav1.GetOptions) (O, error)
	UpdateStatus(ctx context.Context, obj O, opts metav1.UpdateOptions) (O, error)
}

// Objects is a resource the agent reads and, for the Gateway Services
// (the status writer's), writes whole: Services and EndpointSlices.
type Objects[O runtime.Object, L runtime.Object] interface {
	ListWatcher[L]
	Get(ctx context.Context, name string, opts metav1.GetOptions) (O, error)
	Create(ctx context.Context, obj O, opts metav1.CreateOptions) (O, error)
	Update(ctx context.Context, obj O, opts metav1.UpdateOptions) (O, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// Events receives the recorder's events.k8s.io/v1 Events.
type Events interface {
	Create(ctx context.Context, event *eventsv1.Event, opts metav1.CreateOptions) (*eventsv1.Event, error)
}

// Interface is what the agent asks of the API server. A client-go
// clientset (a fake one in unit tests) is adapted to it by kubeclienttest.
type Interface interface {
	Ingresses(namespace string) Ingresses
	IngressClasses() ListWatcher[*networkingv1.IngressClassList]
	Services(namespace string) Objects[*corev1.Service, *corev1.ServiceList]
	EndpointSlices(namespace string) Objects[*discoveryv1.EndpointSlice, *discoveryv1.EndpointSliceList]
	Secrets(namespace string) ListWatcher[*corev1.SecretList]
	ConfigMaps(namespace string) ListWatcher[*corev1.ConfigMapList]
	Namespaces() ListWatcher[*corev1.NamespaceList]
	Leases(namespace string) Leases
	Events(namespace string) Events
	// The Gateway API's kinds (GatewayGroupVersion): the source lists and
	// watches them, the status writer writes their status and the Event
	// recorder reads their UIDs. Use them once
	// ServedResources has said the API server serves them: its CRDs are
	// not installed in most clusters.
	GatewayClasses() StatusResource[*gatewayv1.GatewayClass, *gatewayv1.GatewayClassList]
	Gateways(namespace string) StatusResource[*gatewayv1.Gateway, *gatewayv1.GatewayList]
	HTTPRoutes(namespace string) StatusResource[*gatewayv1.HTTPRoute, *gatewayv1.HTTPRouteList]
	GRPCRoutes(namespace string) StatusResource[*gatewayv1.GRPCRoute, *gatewayv1.GRPCRouteList]
	TLSRoutes(namespace string) StatusResource[*gatewayv1.TLSRoute, *gatewayv1.TLSRouteList]
	ListenerSets(namespace string) StatusResource[*gatewayv1.ListenerSet, *gatewayv1.ListenerSetList]
	ReferenceGrants(namespace string) ListWatcher[*gatewayv1.ReferenceGrantList]
	BackendTLSPolicies(namespace string) StatusResource[*gatewayv1.BackendTLSPolicy, *gatewayv1.BackendTLSPolicyList]
	// ServedResources returns the names of the resources the API server
	// serves in groupVersion ("group/version"), asked of discovery; when it
	// serves none (no CRD installed), an error for which
	// apierrors.IsNotFound holds.
	ServedResources(ctx context.Context, groupVersion string) ([]string, error)
}

// ReadyzProber is a client that can ask the API server's /readyz (the
// REST client can; a fake cannot).
type ReadyzProber interface {
	Readyz(ctx context.Context) bool
}

// GatewayGroupVersion is the Gateway API version the agent reads and
// writes.
const GatewayGroupVersion = "gateway.networking.k8s.io/v1"

// Scheme holds the six API groups the agent uses.
var Scheme = newScheme()

var parameterCodec = runtime.NewParameterCodec(Scheme)

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, networkingv1.AddToScheme, discoveryv1.AddToScheme,
		coordinationv1.AddToScheme, eventsv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	// Only the Gateway API's kinds the agent reads: gatewayv1.AddToScheme
	// would register each of the version's kinds.
	s.AddKnownTypes(gatewayv1.SchemeGroupVersion,
		&gatewayv1.GatewayClass{}, &gatewayv1.GatewayClassList{}, &gatewayv1.Gateway{}, &gatewayv1.GatewayList{},
		&gatewayv1.HTTPRoute{}, &gatewayv1.HTTPRouteList{}, &gatewayv1.GRPCRoute{}, &gatewayv1.GRPCRouteList{},
		&gatewayv1.TLSRoute{}, &gatewayv1.TLSRouteList{}, &gatewayv1.ListenerSet{}, &gatewayv1.ListenerSetList{}, &gatewayv1.ReferenceGrant{}, &gatewayv1.ReferenceGrantList{},
		&gatewayv1.BackendTLSPolicy{}, &gatewayv1.BackendTLSPolicyList{})
	metav1.AddToGroupVersion(s, gatewayv1.SchemeGroupVersion)
	return s
}

// Client is Interface over the API server that cfg names.
type Client struct {
	core, networking, discovery, coordination, events, gateway rest.Interface
}

// New returns a Client for cfg (its QPS, Burst, UserAgent and TLS apply to
// every group).
func New(cfg *rest.Config) (*Client, error) {
	// One HTTP client for all six groups, as a clientset shares one.
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	codecs := serializer.NewCodecFactory(Scheme)
	client := func(gv schema.GroupVersion, apiPath string, jsonOnly bool) (rest.Interface, error) {
		c := rest.CopyConfig(cfg)
		c.GroupVersion = &gv
		c.APIPath = apiPath
		c.NegotiatedSerializer = codecs.WithoutConversion()
		// Protobuf: listing 100,000 endpoints decodes in a fraction of
		// the time and garbage of JSON. Every built-in type has it; the
		// resources of CRDs (the Gateway API) are served in JSON only.
		if jsonOnly {
			c.ContentType, c.AcceptContentTypes = runtime.ContentTypeJSON, runtime.ContentTypeJSON
		}
		if c.ContentType == "" {
			c.ContentType = runtime.ContentTypeProtobuf
			c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
		}
		if c.UserAgent == "" {
			c.UserAgent = rest.DefaultKubernetesUserAgent()
		}
		rc, err := rest.RESTClientForConfigAndClient(c, httpClient)
		if err != nil {
			return nil, fmt.Errorf("kubernetes client for %s: %w", gv, err)
		}
		return rc, nil
	}
	var c Client
	for _, g := range []struct {
		to       *rest.Interface
		gv       schema.GroupVersion
		apiPath  string
		jsonOnly bool
	}{
		{&c.core, corev1.SchemeGroupVersion, "/api", false},
		{&c.networking, networkingv1.SchemeGroupVersion, "/apis", false},
		{&c.discovery, discoveryv1.SchemeGroupVersion, "/apis", false},
		{&c.coordination, coordinationv1.SchemeGroupVersion, "/apis", false},
		{&c.events, eventsv1.SchemeGroupVersion, "/apis", false},
		{&c.gateway, gatewayv1.SchemeGroupVersion, "/apis", true},
	} {
		rc, err := client(g.gv, g.apiPath, g.jsonOnly)
		if err != nil {
			return nil, err
		}
		*g.to = rc
	}
	return &c, nil
}

func (c *Client) GatewayClasses() StatusResource[*gatewayv1.GatewayClass, *gatewayv1.GatewayClassList] {
	return resource[*gatewayv1.GatewayClass, *gatewayv1.GatewayClassList]{c.gateway, "", "gatewayclasses"}
}

func (c *Client) Gateways(namespace string) StatusResource[*gatewayv1.Gateway, *gatewayv1.GatewayList] {
	return resource[*gatewayv1.Gateway, *gatewayv1.GatewayList]{c.gateway, namespace, "gateways"}
}

func (c *Client) HTTPRoutes(namespace string) StatusResource[*gatewayv1.HTTPRoute, *gatewayv1.HTTPRouteList] {
	return resource[*gatewayv1.HTTPRoute, *gatewayv1.HTTPRouteList]{c.gateway, namespace, "httproutes"}
}

func (c *Client) GRPCRoutes(namespace string) StatusResource[*gatewayv1.GRPCRoute, *gatewayv1.GRPCRouteList] {
	return resource[*gatewayv1.GRPCRoute, *gatewayv1.GRPCRouteList]{c.gateway, namespace, "grpcroutes"}
}

func (c *Client) TLSRoutes(namespace string) StatusResource[*gatewayv1.TLSRoute, *gatewayv1.TLSRouteList] {
	return resource[*gatewayv1.TLSRoute, *gatewayv1.TLSRouteList]{c.gateway, namespace, "tlsroutes"}
}

func (c *Client) ListenerSets(namespace string) StatusResource[*gatewayv1.ListenerSet, *gatewayv1.ListenerSetList] {
	return resource[*gatewayv1.ListenerSet, *gatewayv1.ListenerSetList]{c.gateway, namespace, "listenersets"}
}

func (c *Client) ReferenceGrants(namespace string) ListWatcher[*gatewayv1.ReferenceGrantList] {
	return resource[*gatewayv1.ReferenceGrant, *gatewayv1.ReferenceGrantList]{c.gateway, namespace, "referencegrants"}
}

func (c *Client) BackendTLSPolicies(namespace string) StatusResource[*gatewayv1.BackendTLSPolicy, *gatewayv1.BackendTLSPolicyList] {
	return resource[*gatewayv1.BackendTLSPolicy, *gatewayv1.BackendTLSPolicyList]{c.gateway, namespace, "backendtlspolicies"}
}

// ServedResources asks discovery (GET /apis/GROUP/VERSION, which every
// authenticated user may read) in JSON.
func (c *Client) ServedResources(ctx context.Context, groupVersion string) ([]string, error) {
	data, err := c.core.Get().AbsPath("/apis", groupVersion).SetHeader("Accept", runtime.ContentTypeJSON).DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	var list metav1.APIResourceList
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("discovery of %s: %w", groupVersion, err)
	}
	names := make([]string, 0, len(list.APIResources))
	for _, r := range list.APIResources {
		names = append(names, r.Name)
	}
	return names, nil
}

func (c *Client) Ingresses(namespace string) Ingresses {
	return resource[*networkingv1.Ingress, *networkingv1.IngressList]{c.networking, namespace, "ingresses"}
}

func (c *Client) IngressClasses() ListWatcher[*networkingv1.IngressClassList] {
	return resource[*networkingv1.IngressClass, *networkingv1.IngressClassList]{c.networking, "", "ingressclasses"}
}

func (c *Client) Services(namespace string) Objects[*corev1.Service, *corev1.ServiceList] {
	return resource[*corev1.Service, *corev1.ServiceList]{c.core, namespace, "services"}
}

func (c *Client) EndpointSlices(namespace string) Objects[*discoveryv1.EndpointSlice, *discoveryv1.EndpointSliceList] {
	return resource[*discoveryv1.EndpointSlice, *discoveryv1.EndpointSliceList]{c.discovery, namespace, "endpointslices"}
}

func (c *Client) Secrets(namespace string) ListWatcher[*corev1.SecretList] {
	return resource[*corev1.Secret, *corev1.SecretList]{c.core, namespace, "secrets"}
}

func (c *Client) ConfigMaps(namespace string) ListWatcher[*corev1.ConfigMapList] {
	return resource[*corev1.ConfigMap, *corev1.ConfigMapList]{c.core, namespace, "configmaps"}
}

func (c *Client) Namespaces() ListWatcher[*corev1.NamespaceList] {
	return resource[*corev1.Namespace, *corev1.NamespaceList]{c.core, "", "namespaces"}
}

func (c *Client) Leases(namespace string) Leases {
	return resource[*coordinationv1.Lease, *coordinationv1.LeaseList]{c.coordination, namespace, "leases"}
}

func (c *Client) Events(namespace string) Events {
	return resource[*eventsv1.Event, *eventsv1.EventList]{c.events, namespace, "events"}
}

// Readyz asks the API server's /readyz.
func (c *Client) Readyz(ctx context.Context) bool {
	var code int
	c.core.Get().AbsPath("/readyz").Do(ctx).StatusCode(&code)
	return code == http.StatusOK
}

// resource is one resource of one group, in one namespace ("" for all
// namespaces or a cluster-scoped resource). O is the object type, L its
// list type.
type resource[O runtime.Object, L runtime.Object] struct {
	client    rest.Interface
	namespace string
	name      string
}

// newOf returns a new, empty T (T is a pointer type).
func newOf[T runtime.Object]() T {
	var zero T
	return reflect.New(reflect.TypeOf(zero).Elem()).Interface().(T)
}

func (r resource[O, L]) List(ctx context.Context, opts metav1.ListOptions) (L, error) {
	list := newOf[L]()
	var timeout time.Duration
	if opts.TimeoutSeconds != nil {
		timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	err := r.client.Get().NamespaceIfScoped(r.namespace, r.namespace != "").Resource(r.name).
		VersionedParams(&opts, parameterCodec).Timeout(timeout).Do(ctx).Into(list)
	return list, err
}

func (r resource[O, L]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	var timeout time.Duration
	if opts.TimeoutSeconds != nil {
		timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	opts.Watch = true
	return r.client.Get().NamespaceIfScoped(r.namespace, r.namespace != "").Resource(r.name).
		VersionedParams(&opts, parameterCodec).Timeout(timeout).Watch(ctx)
}

func (r resource[O, L]) Get(ctx context.Context, name string, opts metav1.GetOptions) (O, error) {
	out := newOf[O]()
	err := r.client.Get().NamespaceIfScoped(r.namespace, r.namespace != "").Resource(r.name).Name(name).
		VersionedParams(&opts, parameterCodec).Do(ctx).Into(out)
	return out, err
}

func (r resource[O, L]) Create(ctx context.Context, obj O, opts metav1.CreateOptions) (O, error) {
	out := newOf[O]()
	err := r.client.Post().NamespaceIfScoped(r.namespace, r.namespace != "").Resource(r.name).
		VersionedParams(&opts, parameterCodec).Body(obj).Do(ctx).Into(out)
	return out, err
}

func (r resource[O, L]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return r.client.Delete().NamespaceIfScoped(r.namespace, r.namespace != "").Resource(r.name).Name(name).
		Body(&opts).Do(ctx).Error()
}

func (r resource[O, L]) Update(ctx context.Context, obj O, opts metav1.UpdateOptions) (O, error) {
	return r.put(ctx, obj, "", opts)
}

func (r resource[O, L]) UpdateStatus(ctx context.Context, obj O, opts metav1.UpdateOptions) (O, error) {
	return r.put(ctx, obj, "status", opts)
}

func (r resource[O, L]) put(ctx context.Context, obj O, subresource string, opts metav1.UpdateOptions) (O, error) {
	out := newOf[O]()
	m, err := meta.Accessor(obj)
	if err != nil {
		return out, err
	}
	req := r.client.Put().NamespaceIfScoped(r.namespace, r.namespace != "").Resource(r.name).Name(m.GetName())
	if subresource != "" {
		req = req.SubResource(subresource)
	}
	err = req.VersionedParams(&opts, parameterCodec).Body(obj).Do(ctx).Into(out)
	return out, err
}

// NewInformer returns an informer of the objects lw lists (example is one
// of them, e.g. &corev1.Service{}), the list options changed by tweak
// (nil: unchanged). client is asked whether it supports watch-list
// semantics (a fake clientset does not).
//
// The informer has no index: the agent finds objects by key (a lister's
// Get) or lists them all, and never by namespace, so client-go's usual
// namespace index would only hold a second set of every key (at 50,000
// objects of a kind, 1.7 MB). A lister's List of one namespace still
// works without it, by a scan.
func NewInformer[L runtime.Object](client any, lw ListWatcher[L], example runtime.Object, resync time.Duration, tweak func(*metav1.ListOptions)) cache.SharedIndexInformer {
	return cache.NewSharedIndexInformer(NewListWatch(client, lw, tweak), example, resync, cache.Indexers{})
}

// NewListWatch is what NewInformer lists and watches through: lw, the
// list options changed by tweak (nil: unchanged), with watch-list
// semantics when client supports them.
func NewListWatch[L runtime.Object](client any, lw ListWatcher[L], tweak func(*metav1.ListOptions)) cache.ListerWatcher {
	if tweak == nil {
		tweak = func(*metav1.ListOptions) {}
	}
	listWatch := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			tweak(&opts)
			return lw.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			tweak(&opts)
			return lw.Watch(ctx, opts)
		},
	}
	return cache.ToListWatcherWithWatchListSemantics(listWatch, client)
}
