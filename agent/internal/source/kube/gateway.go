package kube

// The Gateway API's kinds: GatewayClass, Gateway, HTTPRoute, GRPCRoute,
// ReferenceGrant, ListenerSet and BackendTLSPolicy of gateway.networking.k8s.io/v1, and the
// Namespaces whose labels allowedRoutes and allowedListeners selectors
// match.
//
// Most clusters do not have the Gateway API's CRDs installed, and a list of
// a resource the API server does not serve fails for ever: an informer of it
// would keep Start from returning. So Start asks discovery first. When the
// four resources are served, their informers are part of the first
// listing, as the other kinds are (a restart must not serve a moment
// without the Gateways). When they are not, the agent says so once and
// serves Ingresses; discovery is asked again every gatewayAPICheckInterval,
// and once the CRDs are there the informers start, and when they hold
// their first listing a change is reported so that the next sync is a full
// build with them. Polling discovery costs one small GET per interval and
// no permission (every authenticated user may read discovery); watching
// CustomResourceDefinitions instead would need a cluster-wide read of every
// CRD.
//
// The informers are client-go's, over the agent's own client
// (kubeclient: the Gateway API's generated clientset would add 24 MB to
// the agent) and sigs.k8s.io/gateway-api's generated listers, rather than
// that module's informer factory, so that they list and watch through the
// same reconnector as the other kinds (reconnect.go).
//
// A kind of optionalGatewayResources (ListenerSet, new in the standard
// channel of v1.5) is read only when discovery serves it at the moment the
// caches are made, and its absence never keeps the other kinds from being
// read: a cluster whose CRDs are of an older release still has its
// Gateways and routes served. Installing it later takes a restart.

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewaylisters "sigs.k8s.io/gateway-api/pkg/client/listers/apis/v1"

	"github.com/restysync/restysync/agent/internal/kubeclient"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/source"
)

// gatewayResources are the resources of kubeclient.GatewayGroupVersion
// the source reads: without any one of them the Gateway API is not read.
var gatewayResources = []string{"gatewayclasses", "gateways", "httproutes", "grpcroutes", "referencegrants"}

// optionalGatewayResources are read when served, each on its own
// (ListenerSets, BackendTLSPolicies).
var optionalGatewayResources = []string{"listenersets", "backendtlspolicies"}

// Variables for the tests.
var (
	// gatewayAPICheckInterval is how often discovery is asked again while
	// the Gateway API is not served.
	gatewayAPICheckInterval = 30 * time.Second
	// discoveryRetry is how often Start asks discovery again when the API
	// server does not answer.
	discoveryRetry = time.Second
)

// gatewayCaches are the informers of the Gateway API's kinds and their
// listers. They are created whole, before or after Start returns, and then
// never changed.
type gatewayCaches struct {
	informers  []namedInformer
	classes    gatewaylisters.GatewayClassLister
	gateways   gatewaylisters.GatewayLister
	routes     gatewaylisters.HTTPRouteLister
	grpcRoutes gatewaylisters.GRPCRouteLister
	grants     gatewaylisters.ReferenceGrantLister
	// listenerSets is nil when the API server does not serve them.
	listenerSets gatewaylisters.ListenerSetLister
	namespaces   corelisters.NamespaceLister
	// backendTLS is nil when the API server does not serve them.
	backendTLS gatewaylisters.BackendTLSPolicyLister
}

// newGatewayCaches creates the informers, those of optionalGatewayResources
// only for the ones in optional (served). With Options.Namespace, Gateways,
// routes, ReferenceGrants and ListenerSets are read in that namespace only,
// and the only Namespace whose labels can matter is that one, so it alone
// is watched (by name); GatewayClasses are cluster-scoped.
func (s *Source) newGatewayCaches(optional []string) *gatewayCaches {
	resync := s.opts.ResyncPeriod
	ns := s.opts.Namespace
	c, r := s.client, s.reconnector
	classes := kubeclient.NewInformer(c, reconnecting(c.GatewayClasses(), r), &gatewayv1.GatewayClass{}, resync, nil)
	gateways := kubeclient.NewInformer(c, reconnecting(c.Gateways(ns), r), &gatewayv1.Gateway{}, resync, nil)
	routes := kubeclient.NewInformer(c, reconnecting(c.HTTPRoutes(ns), r), &gatewayv1.HTTPRoute{}, resync, nil)
	grpcRoutes := kubeclient.NewInformer(c, reconnecting(c.GRPCRoutes(ns), r), &gatewayv1.GRPCRoute{}, resync, nil)
	grants := kubeclient.NewInformer(c, reconnecting(c.ReferenceGrants(ns), r), &gatewayv1.ReferenceGrant{}, resync, nil)
	var onlyOne func(*metav1.ListOptions)
	if ns != "" {
		byName := fields.OneTermEqualSelector("metadata.name", ns).String()
		onlyOne = func(o *metav1.ListOptions) { o.FieldSelector = byName }
	}
	namespaces := kubeclient.NewInformer(c, reconnecting(c.Namespaces(), r), &corev1.Namespace{}, resync, onlyOne)
	caches := &gatewayCaches{
		informers: []namedInformer{
			{kind: source.KindGatewayClass, informer: classes},
			{kind: source.KindGateway, informer: gateways},
			{kind: source.KindHTTPRoute, informer: routes},
			{kind: source.KindGRPCRoute, informer: grpcRoutes},
			{kind: source.KindReferenceGrant, informer: grants},
			{kind: source.KindNamespace, informer: namespaces, transform: stripNamespace},
		},
		classes:    gatewaylisters.NewGatewayClassLister(classes.GetIndexer()),
		gateways:   gatewaylisters.NewGatewayLister(gateways.GetIndexer()),
		routes:     gatewaylisters.NewHTTPRouteLister(routes.GetIndexer()),
		grpcRoutes: gatewaylisters.NewGRPCRouteLister(grpcRoutes.GetIndexer()),
		grants:     gatewaylisters.NewReferenceGrantLister(grants.GetIndexer()),
		namespaces: corelisters.NewNamespaceLister(namespaces.GetIndexer()),
	}
	if slices.Contains(optional, "listenersets") {
		sets := kubeclient.NewInformer(c, reconnecting(c.ListenerSets(ns), r), &gatewayv1.ListenerSet{}, resync, nil)
		caches.informers = append(caches.informers, namedInformer{kind: source.KindListenerSet, informer: sets})
		caches.listenerSets = gatewaylisters.NewListenerSetLister(sets.GetIndexer())
	} else {
		s.logger.Info("the API server does not serve " + kubeclient.GatewayGroupVersion + " listenersets: ListenerSets are not read; " +
			"install the standard channel of " + gatewayAPIRelease + " and restart the agent to read them")
	}
	if slices.Contains(optional, "backendtlspolicies") {
		policies := kubeclient.NewInformer(c, reconnecting(c.BackendTLSPolicies(ns), r), &gatewayv1.BackendTLSPolicy{}, resync, nil)
		caches.informers = append(caches.informers, namedInformer{kind: source.KindBackendTLSPolicy, informer: policies})
		caches.backendTLS = gatewaylisters.NewBackendTLSPolicyLister(policies.GetIndexer())
	} else {
		s.logger.Info("the API server does not serve " + kubeclient.GatewayGroupVersion + " backendtlspolicies: BackendTLSPolicies are not read; " +
			"install the standard channel of " + gatewayAPIRelease + " and restart the agent to read them")
	}
	return caches
}

// stripNamespace is strip for Namespaces, of which only the name and the
// labels are read.
func stripNamespace(obj any) (any, error) {
	obj, err := strip(obj)
	if ns, ok := obj.(*corev1.Namespace); ok {
		ns.Annotations, ns.Spec, ns.Status = nil, corev1.NamespaceSpec{}, corev1.NamespaceStatus{}
	}
	return obj, err
}

// fill adds the cached objects to snap.
func (g *gatewayCaches) fill(snap *model.Snapshot) {
	everything := labels.Everything()
	snap.GatewayClasses, _ = g.classes.List(everything)
	snap.Gateways, _ = g.gateways.List(everything)
	snap.HTTPRoutes, _ = g.routes.List(everything)
	snap.GRPCRoutes, _ = g.grpcRoutes.List(everything)
	snap.ReferenceGrants, _ = g.grants.List(everything)
	snap.Namespaces, _ = g.namespaces.List(everything)
	if g.listenerSets != nil {
		snap.ListenerSets, _ = g.listenerSets.List(everything)
	}
	if g.backendTLS != nil {
		snap.BackendTLSPolicies, _ = g.backendTLS.List(everything)
	}
}

// GatewayClass returns the cached GatewayClass name, or nil (also while
// the Gateway API is not served). It is the cache's object and must not be
// modified; the status writer compares against it.
func (s *Source) GatewayClass(name string) *gatewayv1.GatewayClass {
	return cachedGatewayObject(s, func(g *gatewayCaches) (*gatewayv1.GatewayClass, error) { return g.classes.Get(name) })
}

// Gateway returns the cached Gateway namespace/name, or nil, as
// GatewayClass.
func (s *Source) Gateway(namespace, name string) *gatewayv1.Gateway {
	return cachedGatewayObject(s, func(g *gatewayCaches) (*gatewayv1.Gateway, error) { return g.gateways.Gateways(namespace).Get(name) })
}

// HTTPRoute returns the cached HTTPRoute namespace/name, or nil, as
// GatewayClass.
func (s *Source) HTTPRoute(namespace, name string) *gatewayv1.HTTPRoute {
	return cachedGatewayObject(s, func(g *gatewayCaches) (*gatewayv1.HTTPRoute, error) { return g.routes.HTTPRoutes(namespace).Get(name) })
}

// GRPCRoute returns the cached GRPCRoute namespace/name, or nil, as
// GatewayClass.
func (s *Source) GRPCRoute(namespace, name string) *gatewayv1.GRPCRoute {
	return cachedGatewayObject(s, func(g *gatewayCaches) (*gatewayv1.GRPCRoute, error) {
		return g.grpcRoutes.GRPCRoutes(namespace).Get(name)
	})
}

// ListenerSet returns the cached ListenerSet namespace/name, or nil (also
// when ListenerSets are not read), as GatewayClass.
func (s *Source) ListenerSet(namespace, name string) *gatewayv1.ListenerSet {
	return cachedGatewayObject(s, func(g *gatewayCaches) (*gatewayv1.ListenerSet, error) {
		if g.listenerSets == nil {
			return nil, nil
		}
		return g.listenerSets.ListenerSets(namespace).Get(name)
	})
}

// BackendTLSPolicy returns the cached BackendTLSPolicy namespace/name,
// or nil (also while backendtlspolicies is not served), as GatewayClass.
func (s *Source) BackendTLSPolicy(namespace, name string) *gatewayv1.BackendTLSPolicy {
	return cachedGatewayObject(s, func(g *gatewayCaches) (*gatewayv1.BackendTLSPolicy, error) {
		if g.backendTLS == nil {
			return nil, nil
		}
		return g.backendTLS.BackendTLSPolicies(namespace).Get(name)
	})
}

// cachedGatewayObject returns what get finds in the Gateway API's caches,
// nil without them or when it finds nothing.
func cachedGatewayObject[T any](s *Source, get func(*gatewayCaches) (T, error)) T {
	var none T
	g := s.gateway.Load()
	if g == nil {
		return none
	}
	obj, err := get(g)
	if err != nil {
		return none
	}
	return obj
}

// gatewayServed asks discovery whether the API server serves every one of
// gatewayResources. It returns the missing ones, those of
// optionalGatewayResources it serves, and an error when the API server did
// not answer (not when the group is not served: then all are missing).
func (s *Source) gatewayServed(ctx context.Context) (missing, optional []string, err error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	served, err := s.client.ServedResources(ctx, kubeclient.GatewayGroupVersion)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, nil, err
	}
	for _, r := range gatewayResources {
		if !slices.Contains(served, r) {
			missing = append(missing, r)
		}
	}
	for _, r := range optionalGatewayResources {
		if slices.Contains(served, r) {
			optional = append(optional, r)
		}
	}
	return missing, optional, nil
}

// firstGatewayCheck asks discovery until the API server answers (or ctx
// ends, or a check is left to the loop), and says whether the Gateway API
// is served, and which of optionalGatewayResources. When it is not it says
// so once, at info.
func (s *Source) firstGatewayCheck(ctx context.Context) (bool, []string) {
	var missing, optional []string
	warned := false
	err := wait.PollUntilContextCancel(ctx, discoveryRetry, true, func(ctx context.Context) (bool, error) {
		var err error
		missing, optional, err = s.gatewayServed(ctx)
		if err != nil && !warned {
			s.logger.Warn("asking the API server whether it serves the Gateway API; asking again", "error", err, "every", discoveryRetry)
			warned = true
		}
		return err == nil, nil
	})
	if err != nil {
		return false, nil // ctx ended
	}
	if len(missing) > 0 {
		s.logNotServed(missing)
	}
	return len(missing) == 0, optional
}

func (s *Source) logNotServed(missing []string) {
	if len(missing) == len(gatewayResources) {
		s.logger.Info("the Gateway API is not installed (no "+kubeclient.GatewayGroupVersion+" CRDs): serving Ingresses only; "+
			"its kinds are read as soon as its CRDs are installed", "checking_every", gatewayAPICheckInterval)
		return
	}
	s.logger.Info("the Gateway API's CRDs lack "+kubeclient.GatewayGroupVersion+" "+strings.Join(missing, ", ")+
		": install the standard channel of "+gatewayAPIRelease+"; serving Ingresses only until then", "checking_every", gatewayAPICheckInterval)
}

// gatewayAPIRelease is the Gateway API release the agent is built with.
const gatewayAPIRelease = "v1.6.3"

// awaitGatewayAPI asks discovery every gatewayAPICheckInterval until the
// Gateway API is served, then starts its informers, and once they hold
// their first listing makes them part of the snapshot and reports a
// change. It returns when ctx ends and the informers have stopped.
func (s *Source) awaitGatewayAPI(ctx context.Context, changed func(source.Change)) {
	var optional []string
	err := wait.PollUntilContextCancel(ctx, gatewayAPICheckInterval, false, func(ctx context.Context) (bool, error) {
		var missing []string
		var err error
		missing, optional, err = s.gatewayServed(ctx)
		return err == nil && len(missing) == 0, nil
	})
	if err != nil {
		return // ctx ended
	}
	caches := s.newGatewayCaches(optional)
	synced, err := s.register(caches.informers, changed)
	if err != nil {
		s.logger.Error("starting the Gateway API's informers", "error", err)
		return
	}
	var running sync.WaitGroup
	defer running.Wait()
	for _, ni := range caches.informers {
		running.Go(func() { ni.informer.RunWithContext(ctx) })
	}
	s.logger.Info("the Gateway API is installed: reading GatewayClasses, Gateways, HTTPRoutes, GRPCRoutes and ReferenceGrants")
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return
	}
	s.gateway.Store(caches)
	changed(source.Change{Kind: source.KindGatewayClass})
}

// gatewaySecretRefs returns the Secrets the listeners of snap's Gateways
// name in certificateRefs, and their backend client certificates: those of Gateways of our GatewayClasses, or of
// every Gateway with everyGateway. Whether a ReferenceGrant lets a
// listener use a Secret of another namespace is the model's to say; the
// Secret is read either way, by name, as an Ingress's are.
func gatewaySecretRefs(snap model.Snapshot, controller string, everyGateway bool) []types.NamespacedName {
	ours := map[string]bool{}
	for _, class := range snap.GatewayClasses {
		if string(class.Spec.ControllerName) == controller {
			ours[class.Name] = true
		}
	}
	var refs []types.NamespacedName
	add := func(namespace string, tls *gatewayv1.ListenerTLSConfig) {
		if tls == nil {
			return
		}
		for _, ref := range tls.CertificateRefs {
			if (ref.Group != nil && *ref.Group != "") || (ref.Kind != nil && *ref.Kind != "Secret") {
				continue // not a Secret: the model says so
			}
			ns := namespace
			if ref.Namespace != nil && *ref.Namespace != "" {
				ns = string(*ref.Namespace)
			}
			refs = append(refs, types.NamespacedName{Namespace: ns, Name: string(ref.Name)})
		}
	}
	classOf := map[types.NamespacedName]string{}
	for _, gw := range snap.Gateways {
		classOf[types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name}] = string(gw.Spec.GatewayClassName)
		if !everyGateway && !ours[string(gw.Spec.GatewayClassName)] {
			continue
		}
		if gw.Spec.TLS != nil && gw.Spec.TLS.Backend != nil && gw.Spec.TLS.Backend.ClientCertificateRef != nil {
			// The client certificate to TLS backends (model/backendtls.go).
			ref := gw.Spec.TLS.Backend.ClientCertificateRef
			if (ref.Group == nil || *ref.Group == "") && (ref.Kind == nil || *ref.Kind == "Secret") {
				ns := gw.Namespace
				if ref.Namespace != nil && *ref.Namespace != "" {
					ns = string(*ref.Namespace)
				}
				refs = append(refs, types.NamespacedName{Namespace: ns, Name: string(ref.Name)})
			}
		}
		for _, l := range gw.Spec.Listeners {
			add(gw.Namespace, l.TLS)
		}
	}
	// A ListenerSet's listeners, when its parent is one of those Gateways.
	for _, set := range snap.ListenerSets {
		parent := types.NamespacedName{Namespace: set.Namespace, Name: string(set.Spec.ParentRef.Name)}
		if set.Spec.ParentRef.Namespace != nil && *set.Spec.ParentRef.Namespace != "" {
			parent.Namespace = string(*set.Spec.ParentRef.Namespace)
		}
		class, ok := classOf[parent]
		if !ok || !everyGateway && !ours[class] {
			continue
		}
		for _, l := range set.Spec.Listeners {
			add(set.Namespace, l.TLS)
		}
	}
	return refs
}
