package kube

// The Gateway API's kinds: GatewayClass, Gateway, HTTPRoute, GRPCRoute,
// TLSRoute, ReferenceGrant, ListenerSet and BackendTLSPolicy of
// gateway.networking.k8s.io/v1, and the Namespaces whose labels
// allowedRoutes and allowedListeners selectors match.
//
// Most clusters do not have the Gateway API's CRDs installed, and a list of
// a resource the API server does not serve fails for ever: an informer of it
// would keep Start from returning. So Start asks discovery first. When
// GatewayClasses and Gateways are served, the informers of every served
// kind are part of the first listing, as the other kinds are (a restart
// must not serve a moment without the Gateways). When they are not, the
// agent says so once and serves Ingresses.
//
// Each route kind, ReferenceGrant and ListenerSet is read when its CRD
// serves v1, and only then: a cluster with the standard channel of an
// older release (no TLSRoute v1 or ListenerSet, say) keeps its HTTPRoutes
// served. Each kind not served is
// named once in the log and is a Problem of the snapshot (kind
// CustomResourceDefinition) for as long as it is missing, so /debug/state
// and restysync_problems show it.
//
// While a kind is missing, discovery is asked again every
// gatewayAPICheckInterval; once more kinds are served, caches of all the
// served kinds are made whole and started, and when they hold their first
// listing they replace the old ones (which stop) and a change is reported
// so that the next sync is a full build with them. Polling discovery costs
// one small GET per interval and no permission (every authenticated user
// may read discovery); watching CustomResourceDefinitions instead would
// need a cluster-wide read of every CRD.
//
// The informers are client-go's, over the agent's own client
// (kubeclient: the Gateway API's generated clientset would add 24 MB to
// the agent) and sigs.k8s.io/gateway-api's generated listers, rather than
// that module's informer factory, so that they list and watch through the
// same reconnector as the other kinds (reconnect.go).

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

// gatewayResource is a resource of kubeclient.GatewayGroupVersion the
// source reads, and its kind.
type gatewayResource struct {
	name string
	kind source.Kind
}

// gatewayResources are the resources the source reads: the first
// gatewayRequired of them must be served for the Gateway API to be read
// at all, each other one is read when it is served.
var gatewayResources = []gatewayResource{
	{"gatewayclasses", source.KindGatewayClass}, {"gateways", source.KindGateway},
	{"httproutes", source.KindHTTPRoute}, {"grpcroutes", source.KindGRPCRoute},
	{"tlsroutes", source.KindTLSRoute}, {"referencegrants", source.KindReferenceGrant},
	{"listenersets", source.KindListenerSet}, {"backendtlspolicies", source.KindBackendTLSPolicy},
}

const gatewayRequired = 2

// Variables for the tests.
var (
	// gatewayAPICheckInterval is how often discovery is asked again while
	// a kind of the Gateway API is not served.
	gatewayAPICheckInterval = 30 * time.Second
	// discoveryRetry is how often Start asks discovery again when the API
	// server does not answer.
	discoveryRetry = time.Second
)

// gatewayCaches are the informers of the served kinds of the Gateway API
// and their listers (over an empty index for a kind not served). They are created whole
// and then never changed; more kinds served make new ones.
type gatewayCaches struct {
	// served are the names of gatewayResources these caches read.
	served     []string
	informers  []namedInformer
	classes    gatewaylisters.GatewayClassLister
	gateways   gatewaylisters.GatewayLister
	routes     gatewaylisters.HTTPRouteLister
	grpcRoutes gatewaylisters.GRPCRouteLister
	tlsRoutes  gatewaylisters.TLSRouteLister
	grants     gatewaylisters.ReferenceGrantLister
	sets       gatewaylisters.ListenerSetLister
	namespaces corelisters.NamespaceLister
	backendTLS gatewaylisters.BackendTLSPolicyLister
	// views are what Snapshot serves, kept by the informers' handlers
	// (view.go); the view of a kind not served stays empty.
	views gatewayViews
}

// gatewayViews are the sorted views of the Gateway API's kinds.
type gatewayViews struct {
	classes            sortedView[*gatewayv1.GatewayClass]
	gateways           sortedView[*gatewayv1.Gateway]
	httpRoutes         sortedView[*gatewayv1.HTTPRoute]
	grpcRoutes         sortedView[*gatewayv1.GRPCRoute]
	tlsRoutes          sortedView[*gatewayv1.TLSRoute]
	referenceGrants    sortedView[*gatewayv1.ReferenceGrant]
	listenerSets       sortedView[*gatewayv1.ListenerSet]
	backendTLSPolicies sortedView[*gatewayv1.BackendTLSPolicy]
	namespaces         sortedView[*corev1.Namespace]
}

// newGatewayCaches creates the informers of the served resources (which
// hold gatewayResources' required ones). With Options.Namespace,
// Gateways, routes, ReferenceGrants and ListenerSets are read in that
// namespace only, and the only Namespace whose labels can matter is that
// one, so it alone is watched (by name); GatewayClasses are
// cluster-scoped.
func (s *Source) newGatewayCaches(served []string) *gatewayCaches {
	resync := s.opts.ResyncPeriod
	ns := s.opts.Namespace
	c, r := s.client, s.reconnector
	g := &gatewayCaches{served: served}
	// indexer is the index of a new informer of resource when it is
	// served, else an empty one: its lister then finds nothing.
	indexer := func(resource string, kind source.Kind, view viewUpdater, newInformer func() cache.SharedIndexInformer) cache.Indexer {
		if !slices.Contains(served, resource) {
			return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		}
		informer := newInformer()
		g.informers = append(g.informers, namedInformer{kind: kind, informer: informer, view: view})
		return informer.GetIndexer()
	}
	v := &g.views
	g.classes = gatewaylisters.NewGatewayClassLister(indexer("gatewayclasses", source.KindGatewayClass, &v.classes, func() cache.SharedIndexInformer {
		return kubeclient.NewInformer(c, reconnecting(c.GatewayClasses(), r), &gatewayv1.GatewayClass{}, resync, nil)
	}))
	g.gateways = gatewaylisters.NewGatewayLister(indexer("gateways", source.KindGateway, &v.gateways, func() cache.SharedIndexInformer {
		return kubeclient.NewInformer(c, reconnecting(c.Gateways(ns), r), &gatewayv1.Gateway{}, resync, nil)
	}))
	g.routes = gatewaylisters.NewHTTPRouteLister(indexer("httproutes", source.KindHTTPRoute, &v.httpRoutes, func() cache.SharedIndexInformer {
		return kubeclient.NewInformer(c, reconnecting(c.HTTPRoutes(ns), r), &gatewayv1.HTTPRoute{}, resync, nil)
	}))
	g.grpcRoutes = gatewaylisters.NewGRPCRouteLister(indexer("grpcroutes", source.KindGRPCRoute, &v.grpcRoutes, func() cache.SharedIndexInformer {
		return kubeclient.NewInformer(c, reconnecting(c.GRPCRoutes(ns), r), &gatewayv1.GRPCRoute{}, resync, nil)
	}))
	g.tlsRoutes = gatewaylisters.NewTLSRouteLister(indexer("tlsroutes", source.KindTLSRoute, &v.tlsRoutes, func() cache.SharedIndexInformer {
		return kubeclient.NewInformer(c, reconnecting(c.TLSRoutes(ns), r), &gatewayv1.TLSRoute{}, resync, nil)
	}))
	g.grants = gatewaylisters.NewReferenceGrantLister(indexer("referencegrants", source.KindReferenceGrant, &v.referenceGrants, func() cache.SharedIndexInformer {
		return kubeclient.NewInformer(c, reconnecting(c.ReferenceGrants(ns), r), &gatewayv1.ReferenceGrant{}, resync, nil)
	}))
	g.sets = gatewaylisters.NewListenerSetLister(indexer("listenersets", source.KindListenerSet, &v.listenerSets, func() cache.SharedIndexInformer {
		return kubeclient.NewInformer(c, reconnecting(c.ListenerSets(ns), r), &gatewayv1.ListenerSet{}, resync, nil)
	}))
	g.backendTLS = gatewaylisters.NewBackendTLSPolicyLister(indexer("backendtlspolicies", source.KindBackendTLSPolicy, &v.backendTLSPolicies, func() cache.SharedIndexInformer {
		return kubeclient.NewInformer(c, reconnecting(c.BackendTLSPolicies(ns), r), &gatewayv1.BackendTLSPolicy{}, resync, nil)
	}))
	var onlyOne func(*metav1.ListOptions)
	if ns != "" {
		byName := fields.OneTermEqualSelector("metadata.name", ns).String()
		onlyOne = func(o *metav1.ListOptions) { o.FieldSelector = byName }
	}
	namespaces := kubeclient.NewInformer(c, reconnecting(c.Namespaces(), r), &corev1.Namespace{}, resync, onlyOne)
	g.informers = append(g.informers, namedInformer{kind: source.KindNamespace, informer: namespaces, view: &v.namespaces})
	g.namespaces = corelisters.NewNamespaceLister(namespaces.GetIndexer())
	return g
}

// fill adds the cached objects to snap (none of a kind not served), each
// kind sorted by namespace and name.
func (g *gatewayCaches) fill(snap *model.Snapshot) {
	v := &g.views
	snap.GatewayClasses = v.classes.objects()
	snap.Gateways = v.gateways.objects()
	snap.HTTPRoutes = v.httpRoutes.objects()
	snap.GRPCRoutes = v.grpcRoutes.objects()
	snap.TLSRoutes = v.tlsRoutes.objects()
	snap.ReferenceGrants = v.referenceGrants.objects()
	snap.ListenerSets = v.listenerSets.objects()
	snap.BackendTLSPolicies = v.backendTLSPolicies.objects()
	snap.Namespaces = v.namespaces.objects()
	snap.GatewayKindsNotServed = nil
	for _, r := range gatewayResources {
		if !slices.Contains(g.served, r.name) {
			snap.GatewayKindsNotServed = append(snap.GatewayKindsNotServed, string(r.kind))
		}
	}
}

// problems are the Problems of the kinds these caches do not read: one
// each, named by its CRD.
func (g *gatewayCaches) problems() []model.Problem {
	var out []model.Problem
	for _, r := range gatewayResources {
		if !slices.Contains(g.served, r.name) {
			crd := r.name + "." + gatewayv1.GroupName
			out = append(out, model.Problem{Kind: "CustomResourceDefinition", Name: crd, Missing: "CustomResourceDefinition " + crd,
				Reason: "the API server does not serve " + kubeclient.GatewayGroupVersion + " " + r.name + ": " + string(r.kind) +
					"s are not read, the other kinds of the Gateway API are; install the standard channel of " + gatewayAPIRelease})
		}
	}
	return out
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
// GatewayClass (also when HTTPRoutes are not served).
func (s *Source) HTTPRoute(namespace, name string) *gatewayv1.HTTPRoute {
	return cachedGatewayObject(s, func(g *gatewayCaches) (*gatewayv1.HTTPRoute, error) { return g.routes.HTTPRoutes(namespace).Get(name) })
}

// GRPCRoute returns the cached GRPCRoute namespace/name, or nil, as
// HTTPRoute.
func (s *Source) GRPCRoute(namespace, name string) *gatewayv1.GRPCRoute {
	return cachedGatewayObject(s, func(g *gatewayCaches) (*gatewayv1.GRPCRoute, error) {
		return g.grpcRoutes.GRPCRoutes(namespace).Get(name)
	})
}

// TLSRoute returns the cached TLSRoute namespace/name, or nil, as
// HTTPRoute.
func (s *Source) TLSRoute(namespace, name string) *gatewayv1.TLSRoute {
	return cachedGatewayObject(s, func(g *gatewayCaches) (*gatewayv1.TLSRoute, error) { return g.tlsRoutes.TLSRoutes(namespace).Get(name) })
}

// ListenerSet returns the cached ListenerSet namespace/name, or nil (also
// when ListenerSets are not served), as HTTPRoute.
func (s *Source) ListenerSet(namespace, name string) *gatewayv1.ListenerSet {
	return cachedGatewayObject(s, func(g *gatewayCaches) (*gatewayv1.ListenerSet, error) {
		return g.sets.ListenerSets(namespace).Get(name)
	})
}

// BackendTLSPolicy returns the cached BackendTLSPolicy namespace/name,
// or nil (also while backendtlspolicies is not served), as GatewayClass.
func (s *Source) BackendTLSPolicy(namespace, name string) *gatewayv1.BackendTLSPolicy {
	return cachedGatewayObject(s, func(g *gatewayCaches) (*gatewayv1.BackendTLSPolicy, error) {
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

// gatewayServed asks discovery which of gatewayResources the API server
// serves. It returns their names, in gatewayResources' order, and an
// error when the API server did not answer (not when the group is not
// served: then none is).
func (s *Source) gatewayServed(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	resources, err := s.client.ServedResources(ctx, kubeclient.GatewayGroupVersion)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	var served []string
	for _, r := range gatewayResources {
		if slices.Contains(resources, r.name) {
			served = append(served, r.name)
		}
	}
	return served, nil
}

// gatewayReadable says whether the Gateway API is read with the served
// resources: the required ones are among them.
func gatewayReadable(served []string) bool {
	for _, r := range gatewayResources[:gatewayRequired] {
		if !slices.Contains(served, r.name) {
			return false
		}
	}
	return true
}

// firstGatewayCheck asks discovery until the API server answers (or ctx
// ends), and returns the served resources. What is not served it says
// once, at info.
func (s *Source) firstGatewayCheck(ctx context.Context) []string {
	var served []string
	warned := false
	err := wait.PollUntilContextCancel(ctx, discoveryRetry, true, func(ctx context.Context) (bool, error) {
		var err error
		served, err = s.gatewayServed(ctx)
		if err != nil && !warned {
			s.logger.Warn("asking the API server whether it serves the Gateway API; asking again", "error", err, "every", discoveryRetry)
			warned = true
		}
		return err == nil, nil
	})
	if err != nil {
		return nil // ctx ended
	}
	s.logNotServed(served)
	return served
}

// logNotServed says what of the Gateway API is not served, if anything.
func (s *Source) logNotServed(served []string) {
	var missing []string
	for _, r := range gatewayResources {
		if !slices.Contains(served, r.name) {
			missing = append(missing, r.name)
		}
	}
	switch {
	case len(missing) == 0:
	case len(served) == 0:
		s.logger.Info("the Gateway API is not installed (no "+kubeclient.GatewayGroupVersion+" CRDs): serving Ingresses only; "+
			"its kinds are read as soon as its CRDs are installed", "checking_every", gatewayAPICheckInterval)
	case !gatewayReadable(served):
		s.logger.Info("the Gateway API's CRDs lack "+kubeclient.GatewayGroupVersion+" "+strings.Join(missing, ", ")+
			": install the standard channel of "+gatewayAPIRelease+"; serving Ingresses only until then", "checking_every", gatewayAPICheckInterval)
	default:
		for _, name := range missing {
			s.logger.Warn("the Gateway API's CRDs lack "+kubeclient.GatewayGroupVersion+" "+name+": its kind is not read, the others are; "+
				"install the standard channel of "+gatewayAPIRelease, "resource", name, "checking_every", gatewayAPICheckInterval)
		}
	}
}

// servesMore says whether served holds a resource that was not.
func servesMore(served, was []string) bool {
	return slices.ContainsFunc(served, func(r string) bool { return !slices.Contains(was, r) })
}

// gatewayAPIRelease is the Gateway API release the agent is built with.
const gatewayAPIRelease = "v1.6.3"

// runGatewayAPI runs the Gateway API's informers until ctx ends: those of
// current (nil while the Gateway API is not read, else registered
// already), and while a resource is not served it asks discovery every
// gatewayAPICheckInterval; when more are served it starts caches of all
// the served ones, and once they hold their first listing makes them the
// snapshot's, stops the old ones and reports a change. It returns when
// ctx ends and every informer has stopped.
func (s *Source) runGatewayAPI(ctx context.Context, current *gatewayCaches, changed func(source.Change)) {
	var running sync.WaitGroup
	defer running.Wait()
	start := func(g *gatewayCaches) context.CancelFunc {
		ctx, cancel := context.WithCancel(ctx)
		for _, ni := range g.informers {
			running.Go(func() { ni.informer.RunWithContext(ctx) })
		}
		return cancel
	}
	stop := func() {}
	if current != nil {
		stop = start(current)
	}
	for current == nil || len(current.served) < len(gatewayResources) {
		var served []string
		err := wait.PollUntilContextCancel(ctx, gatewayAPICheckInterval, false, func(ctx context.Context) (bool, error) {
			var err error
			served, err = s.gatewayServed(ctx)
			return err == nil && gatewayReadable(served) && (current == nil || servesMore(served, current.served)), nil
		})
		if err != nil {
			return // ctx ended: the informers stop with it
		}
		next := s.newGatewayCaches(served)
		synced, err := s.register(next.informers, changed)
		if err != nil {
			s.logger.Error("starting the Gateway API's informers", "error", err)
			return
		}
		stopNext := start(next)
		s.logger.Info("the Gateway API is installed: reading " + strings.Join(served, ", "))
		if !cache.WaitForCacheSync(ctx.Done(), synced...) {
			return
		}
		s.gateway.Store(next)
		stop()
		stop, current = stopNext, next
		changed(source.Change{Kind: source.KindGatewayClass})
	}
}

// gatewayRefs returns the Secrets and ConfigMaps the Gateways of snap
// name, and the ListenerSets whose parent is one of them: a listener's
// certificateRefs (Secrets), the CA certificates of a Gateway's
// spec.tls.frontend client certificate validation (ConfigMaps and
// Secrets) and its spec.tls.backend client certificate (a Secret); those of Gateways of our GatewayClasses, or of every Gateway
// with everyGateway. Whether a ReferenceGrant lets a Gateway use an object
// of another namespace is the model's to say; the object is read either
// way, by name, as an Ingress's are.
func gatewayRefs(snap model.Snapshot, controller string, everyGateway bool) (secrets, configMaps []types.NamespacedName) {
	ours := map[string]bool{}
	for class := range snap.GatewayClasses.All() {
		if string(class.Spec.ControllerName) == controller {
			ours[class.Name] = true
		}
	}
	ref := func(namespace string, refNamespace *gatewayv1.Namespace, name gatewayv1.ObjectName) types.NamespacedName {
		if refNamespace != nil && *refNamespace != "" {
			namespace = string(*refNamespace)
		}
		return types.NamespacedName{Namespace: namespace, Name: string(name)}
	}
	addCertificates := func(namespace string, tls *gatewayv1.ListenerTLSConfig) {
		if tls == nil {
			return
		}
		for _, r := range tls.CertificateRefs {
			if (r.Group != nil && *r.Group != "") || (r.Kind != nil && *r.Kind != "Secret") {
				continue // not a Secret: the model says so
			}
			secrets = append(secrets, ref(namespace, r.Namespace, r.Name))
		}
	}
	classOf := map[types.NamespacedName]string{}
	for gw := range snap.Gateways.All() {
		classOf[types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name}] = string(gw.Spec.GatewayClassName)
		if !everyGateway && !ours[string(gw.Spec.GatewayClassName)] {
			continue
		}
		if gw.Spec.TLS != nil && gw.Spec.TLS.Backend != nil && gw.Spec.TLS.Backend.ClientCertificateRef != nil {
			// The client certificate to TLS backends (model/backendtls.go).
			r := gw.Spec.TLS.Backend.ClientCertificateRef
			if (r.Group == nil || *r.Group == "") && (r.Kind == nil || *r.Kind == "Secret") {
				secrets = append(secrets, ref(gw.Namespace, r.Namespace, r.Name))
			}
		}
		for _, l := range gw.Spec.Listeners {
			addCertificates(gw.Namespace, l.TLS)
		}
		for _, v := range frontendValidations(gw) {
			for _, r := range v.CACertificateRefs {
				switch {
				case r.Group != "":
				case r.Kind == "ConfigMap":
					configMaps = append(configMaps, ref(gw.Namespace, r.Namespace, r.Name))
				case r.Kind == "Secret":
					secrets = append(secrets, ref(gw.Namespace, r.Namespace, r.Name))
				}
			}
		}
	}
	// A ListenerSet's listeners, when its parent is one of those Gateways.
	for set := range snap.ListenerSets.All() {
		parent := types.NamespacedName{Namespace: set.Namespace, Name: string(set.Spec.ParentRef.Name)}
		if set.Spec.ParentRef.Namespace != nil && *set.Spec.ParentRef.Namespace != "" {
			parent.Namespace = string(*set.Spec.ParentRef.Namespace)
		}
		class, ok := classOf[parent]
		if !ok || !everyGateway && !ours[class] {
			continue
		}
		for _, l := range set.Spec.Listeners {
			addCertificates(set.Namespace, l.TLS)
		}
	}
	return secrets, configMaps
}

// frontendValidations are the client certificate validations of gw's
// spec.tls.frontend, default and per port.
func frontendValidations(gw *gatewayv1.Gateway) []*gatewayv1.FrontendTLSValidation {
	if gw.Spec.TLS == nil || gw.Spec.TLS.Frontend == nil {
		return nil
	}
	var out []*gatewayv1.FrontendTLSValidation
	if v := gw.Spec.TLS.Frontend.Default.Validation; v != nil {
		out = append(out, v)
	}
	for _, pp := range gw.Spec.TLS.Frontend.PerPort {
		if pp.TLS.Validation != nil {
			out = append(out, pp.TLS.Validation)
		}
	}
	return out
}
