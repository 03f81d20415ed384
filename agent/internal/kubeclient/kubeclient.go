// Package kubeclient is the Kubernetes API client of the stages that talk to
// the API server: the kube source (list and watch), the status writer
// (Ingress status and its Lease) and the Event recorder. It knows the five
// API groups the agent reads or writes and nothing else.
//
// Why not client-go's clientset: its package registers every API group in
// one scheme, and the urfave/cli help printer (text/template, which looks
// methods up by name) makes the linker keep every exported method of every
// type a binary holds; with all groups that was 26 of the agent's 60 MB.
// Typed List/Watch/Get/Create/Update over client-go's REST client, with a
// scheme of the five groups, is all the agent needs of it.
package kubeclient

import (
	"context"
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

// Events receives the recorder's events.k8s.io/v1 Events.
type Events interface {
	Create(ctx context.Context, event *eventsv1.Event, opts metav1.CreateOptions) (*eventsv1.Event, error)
}

// Interface is what the agent asks of the API server. A client-go
// clientset (a fake one in unit tests) is adapted to it by kubeclienttest.
type Interface interface {
	Ingresses(namespace string) Ingresses
	IngressClasses() ListWatcher[*networkingv1.IngressClassList]
	Services(namespace string) ListWatcher[*corev1.ServiceList]
	EndpointSlices(namespace string) ListWatcher[*discoveryv1.EndpointSliceList]
	Secrets(namespace string) ListWatcher[*corev1.SecretList]
	ConfigMaps(namespace string) ListWatcher[*corev1.ConfigMapList]
	Leases(namespace string) Leases
	Events(namespace string) Events
}

// ReadyzProber is a client that can ask the API server's /readyz (the
// REST client can; a fake cannot).
type ReadyzProber interface {
	Readyz(ctx context.Context) bool
}

// Scheme holds the five API groups the agent uses.
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
	return s
}

// Client is Interface over the API server that cfg names.
type Client struct {
	core, networking, discovery, coordination, events rest.Interface
}

// New returns a Client for cfg (its QPS, Burst, UserAgent and TLS apply to
// every group).
func New(cfg *rest.Config) (*Client, error) {
	// One HTTP client for all five groups, as a clientset shares one.
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	codecs := serializer.NewCodecFactory(Scheme)
	client := func(gv schema.GroupVersion, apiPath string) (rest.Interface, error) {
		c := rest.CopyConfig(cfg)
		c.GroupVersion = &gv
		c.APIPath = apiPath
		c.NegotiatedSerializer = codecs.WithoutConversion()
		// Protobuf: listing 100,000 endpoints decodes in a fraction of
		// the time and garbage of JSON. Every type here has it.
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
		to      *rest.Interface
		gv      schema.GroupVersion
		apiPath string
	}{
		{&c.core, corev1.SchemeGroupVersion, "/api"},
		{&c.networking, networkingv1.SchemeGroupVersion, "/apis"},
		{&c.discovery, discoveryv1.SchemeGroupVersion, "/apis"},
		{&c.coordination, coordinationv1.SchemeGroupVersion, "/apis"},
		{&c.events, eventsv1.SchemeGroupVersion, "/apis"},
	} {
		rc, err := client(g.gv, g.apiPath)
		if err != nil {
			return nil, err
		}
		*g.to = rc
	}
	return &c, nil
}

func (c *Client) Ingresses(namespace string) Ingresses {
	return resource[*networkingv1.Ingress, *networkingv1.IngressList]{c.networking, namespace, "ingresses"}
}

func (c *Client) IngressClasses() ListWatcher[*networkingv1.IngressClassList] {
	return resource[*networkingv1.IngressClass, *networkingv1.IngressClassList]{c.networking, "", "ingressclasses"}
}

func (c *Client) Services(namespace string) ListWatcher[*corev1.ServiceList] {
	return resource[*corev1.Service, *corev1.ServiceList]{c.core, namespace, "services"}
}

func (c *Client) EndpointSlices(namespace string) ListWatcher[*discoveryv1.EndpointSliceList] {
	return resource[*discoveryv1.EndpointSlice, *discoveryv1.EndpointSliceList]{c.discovery, namespace, "endpointslices"}
}

func (c *Client) Secrets(namespace string) ListWatcher[*corev1.SecretList] {
	return resource[*corev1.Secret, *corev1.SecretList]{c.core, namespace, "secrets"}
}

func (c *Client) ConfigMaps(namespace string) ListWatcher[*corev1.ConfigMapList] {
	return resource[*corev1.ConfigMap, *corev1.ConfigMapList]{c.core, namespace, "configmaps"}
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
func NewInformer[L runtime.Object](client any, lw ListWatcher[L], example runtime.Object, resync time.Duration, tweak func(*metav1.ListOptions)) cache.SharedIndexInformer {
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
	return cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(listWatch, client), example, resync,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
}
