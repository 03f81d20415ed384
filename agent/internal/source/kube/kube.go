// Package kube is the source stage of the pipeline (source → model → render → plan → apply)
// that reads objects from the Kubernetes API server with
// client-go informers.
//
// Secrets are listed through their own informer with the field selector
// type=kubernetes.io/tls, so the agent never lists, watches or
// caches any other Secret in bulk, and the one agent ConfigMap is watched by
// name in its own namespace; RBAC cannot restrict a list by type, so this
// selector is the only thing that keeps other Secrets out of the agent's
// memory. The htpasswd files of basic auth and the CAs of TLS to the
// backends are Opaque Secrets: each one an Ingress of ours names in
// auth-secret or proxy-ssl-secret is watched on its own, by name
// (authsecrets.go), and only its keys auth, ca.crt, tls.crt and tls.key
// are cached. Every
// object is stripped of what restysync never reads before it is cached
// (source.Strip: managedFields and kubectl's last-applied-configuration,
// which together often outweigh the rest of the object).
//
// The Gateway API's kinds are read when the API server serves them, and
// from the moment it does (gateway.go); the Secrets its listeners name
// are read by name, as an Ingress's are.
package kube

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/restysync/restysync/agent/internal/kubeclient"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/source"
)

// tlsSecretSelector is the field selector of the Secret informer.
var tlsSecretSelector = fields.OneTermEqualSelector("type", string(corev1.SecretTypeTLS)).String()

var (
	_ source.Source        = (*Source)(nil)
	_ source.EndpointIndex = (*Source)(nil)
)

// Options configures a Source.
type Options struct {
	// Namespace limits Ingresses, Services, EndpointSlices, Secrets,
	// Gateways, HTTPRoutes and ReferenceGrants to one namespace (default "":
	// all namespaces). IngressClasses and GatewayClasses are cluster-wide
	// and always all read; of the Namespaces, that one alone is read.
	Namespace string
	// ConfigMap is the agent's own ConfigMap as "namespace/name" (default "":
	// none). Only that one ConfigMap is watched, in its namespace, whatever
	// Namespace says.
	ConfigMap string
	// TCPServices and UDPServices are ingress-nginx's ConfigMaps of TCP
	// and UDP services, "namespace/name" (default "": none), each watched
	// by name as ConfigMap is.
	TCPServices, UDPServices string
	// Logger receives watch errors, such as a list the API server forbids
	// (default: discarded).
	Logger *slog.Logger
	// ResyncPeriod makes the informers replay their cache this often (default
	// 0: never). Replays do not change anything, so they call nothing.
	ResyncPeriod time.Duration
	// IngressClass and WatchWithoutClass say which Ingresses are served, as
	// for model.Snapshot: only the auth Secrets those name are read.
	IngressClass      string
	WatchWithoutClass bool
	// EveryIngress reads the auth Secrets of every Ingress, whatever its
	// class (restysync check, which judges them all), and the listeners'
	// Secrets of every Gateway.
	EveryIngress bool
	// GatewayController is the controllerName of the GatewayClasses we
	// serve (default model.GatewayControllerName): only the Secrets their
	// Gateways name are read.
	GatewayController string
}

// Source serves the objects of a Kubernetes API server.
type Source struct {
	client kubeclient.Interface
	opts   Options
	logger *slog.Logger

	changedServices changedServices

	started atomic.Bool
	ready   atomic.Bool // the fields below are set
	done    chan struct{}

	// Set by Start before ready.
	informers []namedInformer
	// gateway holds the Gateway API's caches once they are part of the
	// snapshot; nil while the API server does not serve it (gateway.go).
	gateway atomic.Pointer[gatewayCaches]
	// reconnector makes every List and Watch wait out an API server
	// outage (reconnect.go); one for all the informers.
	reconnector *reconnector

	ingressClasses networkinglisters.IngressClassLister
	authSecrets    *authWatches
	// authConfigMaps are the ConfigMaps served Ingresses name (auth-proxy-set-headers).
	authConfigMaps *authWatches
	// configMap, tcpServices and udpServices are nil when their option is "".
	configMap, tcpServices, udpServices *namedConfigMap

	// The objects Snapshot serves, each kind kept sorted by its
	// informer's handler (view.go); secretView holds the TLS Secrets.
	// The views of Ingresses, Services and EndpointSlices are their
	// informers' caches too (viewinformer.go).
	ingressView sortedView[*networkingv1.Ingress]
	classView   sortedView[*networkingv1.IngressClass]
	serviceView sortedView[*model.Service]
	sliceView   sortedView[*discoveryv1.EndpointSlice]
	secretView  sortedView[*corev1.Secret]
	// viewMu makes a Snapshot's lists and refs one state.
	viewMu sync.Mutex
	// refs are the Secrets and ConfigMaps the Ingresses of ingressView's
	// last list name, of those that name any (namedRefs).
	refs map[types.NamespacedName]ingressRefs
	// secretsWithNamed is the last list of Secrets with those watched by
	// name.
	secretsWithNamed mergedSecrets

	// The Services of the EndpointSlices whose labels the transform
	// dropped (slicelabels.go): sliceServicesDone is the last a Snapshot
	// handed out, sliceServices the edit since (nil: none).
	sliceServicesMu   sync.Mutex
	sliceServices     *source.SliceServicesEdit
	sliceServicesDone source.SliceServices

	// ingressStatus is the status addresses the Ingresses transformed
	// last had (ingressshare.go).
	ingressStatusMu sync.Mutex
	ingressStatus   []networkingv1.IngressLoadBalancerIngress
}

// mergedSecrets remembers the last list withNamedSecrets made, so that a
// Snapshot after no change of Secrets hands out the very list the one
// before did.
type mergedSecrets struct {
	mu           sync.Mutex
	tls, secrets model.List[*corev1.Secret]
	named        []*corev1.Secret
}

// with returns withNamedSecrets(tls, named), the same list as the last
// call when tls is the same list and named the same Secrets. It sorts
// named.
func (m *mergedSecrets) with(tls model.List[*corev1.Secret], named []*corev1.Secret) model.List[*corev1.Secret] {
	source.SortNamed(named)
	m.mu.Lock()
	defer m.mu.Unlock()
	if (tls.Same(m.tls) || tls.Len()+m.tls.Len() == 0) && slices.Equal(named, m.named) {
		return m.secrets
	}
	m.tls, m.named, m.secrets = tls, named, withNamedSecrets(tls, named)
	return m.secrets
}

// ingressRefs are what an Ingress names by annotation (model.SecretRefs,
// model.ConfigMapRefs).
type ingressRefs struct {
	ingress             *networkingv1.Ingress
	secrets, configMaps []types.NamespacedName
}

// namedConfigMap is one ConfigMap watched by name.
type namedConfigMap struct {
	namespace, name string
	lister          corelisters.ConfigMapLister
}

// parseNamedConfigMap checks the option value "namespace/name" of option.
func parseNamedConfigMap(option, value string) (*namedConfigMap, error) {
	if value == "" {
		return nil, nil
	}
	ns, name, err := cache.SplitMetaNamespaceKey(value)
	if err != nil || ns == "" || name == "" {
		return nil, fmt.Errorf("kube source: %s %q: want namespace/name", option, value)
	}
	return &namedConfigMap{namespace: ns, name: name}, nil
}

// get returns the ConfigMap, or nil when it is not configured or does not exist.
func (n *namedConfigMap) get() *corev1.ConfigMap {
	if n == nil {
		return nil
	}
	cm, err := n.lister.ConfigMaps(n.namespace).Get(n.name)
	if err != nil {
		return nil
	}
	return cm
}

// changedServices is what the fast path reads: the Services whose
// EndpointSlices changed since TakeChangedServices was last called.
type changedServices struct {
	mu   sync.Mutex
	keys map[source.ServiceKey]struct{}
	// slicesOf are the EndpointSlices of each Service, kept by noteSlice
	// (ServiceEndpoints): the file source's index, edited under mu from
	// slicesDone, the index the last Snapshot handed out (SlicesOf), nil
	// when no slice changed since. An informer's index by Service held a
	// set per Service: 14 MB at 50,000. The handler changes it and the
	// view under viewMu, so a Snapshot's is of its slices, and the model
	// holds no index of its own (model.Snapshot.SlicesOf); an edit copies
	// a shard at its first change after a Snapshot, as the file source's
	// publish does.
	slicesOf   *source.SliceIndexEdit
	slicesDone source.SliceIndex
}

// slicesIndex is the index as it is now, read-only; the caller holds mu.
func (c *changedServices) slicesIndex() source.SliceIndex {
	if c.slicesOf != nil {
		return c.slicesOf.Done()
	}
	return c.slicesDone
}

// takeSlicesOf returns the index as it is now, to hand out: the next
// change edits a copy. The caller holds viewMu.
func (s *Source) takeSlicesOf() source.SliceIndex {
	c := &s.changedServices
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.slicesOf != nil {
		c.slicesDone, c.slicesOf = c.slicesOf.Done(), nil
	}
	return c.slicesDone
}

type namedInformer struct {
	kind     source.Kind
	informer informer
	// view is kept up to date by the informer's handler (nil: none).
	view viewUpdater
	// transform replaces trim when set.
	transform cache.TransformFunc
}

// New returns a Source that reads through client. Start begins watching.
func New(client kubeclient.Interface, opts Options) *Source {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Source{client: client, opts: opts, logger: logger, done: make(chan struct{})}
}

// Start lists every kind, waits until every informer holds its first full
// listing and has told its handler about it, and returns. Watching goes on
// until ctx is done; Done is closed once every informer has stopped. Start
// fails if the ConfigMap option is malformed or ctx ends before the caches
// have synced (a list the API server forbids is retried, and logged, until
// then). changed is called from the informers' goroutines, once for each
// object added, changed or deleted.
func (s *Source) Start(ctx context.Context, changed func(source.Change)) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("kube source: Start called twice")
	}
	synced, err := s.setup(changed)
	if err != nil {
		close(s.done)
		return err
	}
	s.authSecrets = &authWatches{client: s.client, reconnector: s.reconnector, resync: s.opts.ResyncPeriod, logger: s.logger,
		changed: changed, ctx: ctx, kind: source.KindSecret, watches: map[types.NamespacedName]*authWatch{}}
	s.authConfigMaps = &authWatches{client: s.client, reconnector: s.reconnector, resync: s.opts.ResyncPeriod, logger: s.logger,
		changed: changed, ctx: ctx, kind: source.KindConfigMap, watches: map[types.NamespacedName]*authWatch{}}
	var gateway *gatewayCaches
	if served := s.firstGatewayCheck(ctx); gatewayReadable(served) {
		gateway = s.newGatewayCaches(served)
		gatewaySynced, err := s.register(gateway.informers, changed)
		if err != nil {
			close(s.done)
			return err
		}
		synced = append(synced, gatewaySynced...)
		s.gateway.Store(gateway)
	}
	s.ready.Store(true)

	var running sync.WaitGroup
	for _, ni := range s.informers {
		running.Go(func() { ni.informer.RunWithContext(ctx) })
	}
	running.Go(func() { s.runGatewayAPI(ctx, gateway, changed) })
	go func() {
		<-ctx.Done()
		running.Wait()
		close(s.done)
	}()

	// At 10,000 Ingresses the first listing takes seconds: say how far it got.
	result := make(chan bool, 1)
	go func() { result <- cache.WaitForCacheSync(ctx.Done(), synced...) }()
	progress := time.NewTicker(listingProgressInterval)
	defer progress.Stop()
	start := time.Now()
	for {
		select {
		case ok := <-result:
			if !ok {
				return fmt.Errorf("kube source: waiting for caches to sync: %w", context.Cause(ctx))
			}
			s.logger.Info("kube caches synced", append(s.listed(), "duration", time.Since(start).Round(time.Millisecond))...)
			return nil
		case <-progress.C:
			s.logger.Info("listing from the API server", append(s.listed(), "elapsed", time.Since(start).Round(time.Second))...)
		}
	}
}

// listingProgressInterval is how often the first listing reports progress.
var listingProgressInterval = 2 * time.Second

// listed returns, as log attributes, how many objects of each kind the
// caches hold.
func (s *Source) listed() []any {
	informers := s.allInformers()
	attrs := make([]any, 0, 2*len(informers))
	for _, ni := range informers {
		attrs = append(attrs, string(ni.kind), len(cachedKeys(ni.informer)))
	}
	return attrs
}

// allInformers are the informers of every kind, the Gateway API's
// included once they are part of the snapshot.
func (s *Source) allInformers() []namedInformer {
	if g := s.gateway.Load(); g != nil {
		return append(slices.Clip(s.informers), g.informers...)
	}
	return s.informers
}

// setup creates the informers and registers handler, transform and watch
// error handler on each. It returns what must be synced before Start returns.
func (s *Source) setup(changed func(source.Change)) ([]cache.InformerSynced, error) {
	var err error
	if s.configMap, err = parseNamedConfigMap("ConfigMap", s.opts.ConfigMap); err != nil {
		return nil, err
	}
	if s.tcpServices, err = parseNamedConfigMap("TCP services ConfigMap", s.opts.TCPServices); err != nil {
		return nil, err
	}
	if s.udpServices, err = parseNamedConfigMap("UDP services ConfigMap", s.opts.UDPServices); err != nil {
		return nil, err
	}
	s.createInformers()
	return s.register(s.informers, changed)
}

// register registers handler, transform and watch error handler on each
// of informers, and returns what must be synced for them.
func (s *Source) register(informers []namedInformer, changed func(source.Change)) ([]cache.InformerSynced, error) {
	var synced []cache.InformerSynced
	for _, ni := range informers {
		kind := ni.kind
		transform := trim
		if ni.transform != nil {
			transform = ni.transform
		}
		if err := ni.informer.SetTransform(transform); err != nil {
			return nil, fmt.Errorf("kube source: %s informer: %w", kind, err)
		}
		if err := ni.informer.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
			s.logger.Warn("watching the API server", "kind", string(kind), "error", err)
		}); err != nil {
			return nil, fmt.Errorf("kube source: %s informer: %w", kind, err)
		}
		h := handler{kind: kind, changed: changed, view: ni.view}
		if kind == source.KindEndpointSlice {
			h.noteSlice, h.forget, h.lock = s.noteSlice, s.forgetSlice, &s.viewMu
		}
		handlerSynced, err := addHandler(ni.informer, h)
		if err != nil {
			return nil, fmt.Errorf("kube source: %s informer: %w", kind, err)
		}
		synced = append(synced, ni.informer.HasSynced, handlerSynced)
	}
	return synced, nil
}

// createInformers creates the informers and their listers.
func (s *Source) createInformers() {
	resync := s.opts.ResyncPeriod
	ns := s.opts.Namespace
	c := s.client
	s.reconnector = newReconnector(c, s.logger)
	r := s.reconnector
	ingresses := newViewInformer(kubeclient.NewListWatch(c, reconnecting(c.Ingresses(ns), r), nil), &networkingv1.Ingress{}, resync, &s.ingressView)
	// Cluster-scoped: the namespace does not apply.
	classes := kubeclient.NewInformer(c, reconnecting(c.IngressClasses(), r), &networkingv1.IngressClass{}, resync, nil)
	services := newViewInformer(kubeclient.NewListWatch(c, reconnecting(c.Services(ns), r), nil), &corev1.Service{}, resync, &s.serviceView)
	slices := newViewInformer(kubeclient.NewListWatch(c, reconnecting(c.EndpointSlices(ns), r), nil), &discoveryv1.EndpointSlice{}, resync, &s.sliceView)
	secrets := kubeclient.NewInformer(c, reconnecting(c.Secrets(ns), r), &corev1.Secret{}, resync,
		func(o *metav1.ListOptions) { o.FieldSelector = tlsSecretSelector })
	s.ingressClasses = networkinglisters.NewIngressClassLister(classes.GetIndexer())
	s.ingressView.observe = s.observeIngress
	// The field selector already keeps other types out; this only guards
	// against a server (or fake) that ignores it.
	s.secretView.keep = func(secret *corev1.Secret) bool { return secret.Type == corev1.SecretTypeTLS }
	s.informers = []namedInformer{
		{kind: source.KindIngress, informer: ingresses, view: &s.ingressView, transform: s.transformIngress},
		{kind: source.KindIngressClass, informer: classes, view: &s.classView},
		{kind: source.KindService, informer: services, view: &s.serviceView, transform: transformService},
		{kind: source.KindEndpointSlice, informer: slices, view: &s.sliceView, transform: s.transformSlice},
		{kind: source.KindSecret, informer: secrets, view: &s.secretView},
	}

	for _, n := range []*namedConfigMap{s.configMap, s.tcpServices, s.udpServices} {
		if n == nil {
			continue
		}
		byName := fields.OneTermEqualSelector("metadata.name", n.name).String()
		configMaps := kubeclient.NewInformer(c, reconnecting(c.ConfigMaps(n.namespace), r), &corev1.ConfigMap{}, resync,
			func(o *metav1.ListOptions) { o.FieldSelector = byName })
		n.lister = corelisters.NewConfigMapLister(configMaps.GetIndexer())
		s.informers = append(s.informers, namedInformer{kind: source.KindConfigMap, informer: configMaps})
	}
}

// Done is closed once every informer has stopped after the ctx given to
// Start ended (at once if Start failed on its options).
func (s *Source) Done() <-chan struct{} { return s.done }

// Snapshot returns the cached objects and no problems of objects (the API
// server has validated every one); its problems name the kinds of the
// Gateway API that are not read while the others are (gateway.go).
// Ingresses, IngressClasses, Services, EndpointSlices and Secrets are
// sorted by namespace and name (view.go). The lists and the objects are
// shared and must not be modified. Before Start it returns an empty
// Snapshot.
func (s *Source) Snapshot() (model.Snapshot, []model.Problem) {
	if !s.isStarted() {
		return model.Snapshot{}, nil
	}
	var snap model.Snapshot
	s.viewMu.Lock()
	snap.Ingresses = s.ingressView.objects()
	snap.IngressClasses = s.classView.objects()
	snap.Services = s.serviceView.objects()
	snap.EndpointSlices = s.sliceView.objects()
	snap.SliceServices = s.takeSliceServices().Of
	snap.SlicesOf = s.takeSlicesOf().Of
	tls := s.secretView.objects()
	var problems []model.Problem
	if g := s.gateway.Load(); g != nil {
		g.fill(&snap)
		problems = g.problems()
	}
	secretRefs, configMapRefs := s.namedRefs(snap)
	s.viewMu.Unlock()
	s.authSecrets.reconcile(secretRefs)
	snap.Secrets = s.secretsWithNamed.with(tls, s.authSecrets.secrets())
	s.authConfigMaps.reconcile(configMapRefs)
	snap.ConfigMaps = source.SortedList(s.authConfigMaps.configMaps())
	snap.ConfigMap = s.configMap.get()
	snap.TCPServices, snap.UDPServices = s.tcpServices.get(), s.udpServices.get()
	return snap, problems
}

// ConfigMapData returns a copy of the data of the agent's ConfigMap, or nil
// when none is configured or it does not exist.
func (s *Source) ConfigMapData() map[string]string {
	if !s.isStarted() {
		return nil
	}
	cm := s.configMap.get()
	if cm == nil {
		return nil
	}
	data := maps.Clone(cm.Data)
	if data == nil {
		data = map[string]string{}
	}
	return data
}

// ConfigMap returns the cached agent's ConfigMap, or nil when none is
// configured or it does not exist. It is the cache's object and must not
// be modified.
func (s *Source) ConfigMap() *corev1.ConfigMap {
	if !s.isStarted() {
		return nil
	}
	return s.configMap.get()
}

// Ingress returns the cached Ingress namespace/name, or nil. It is the
// cache's object and must not be modified.
func (s *Source) Ingress(namespace, name string) *networkingv1.Ingress {
	if !s.isStarted() {
		return nil
	}
	return s.ingressView.lookup(namespace, name)
}

// IngressClass returns the cached IngressClass name, or nil. It is the
// cache's object and must not be modified.
func (s *Source) IngressClass(name string) *networkingv1.IngressClass {
	if !s.isStarted() {
		return nil
	}
	class, err := s.ingressClasses.Get(name)
	if err != nil {
		return nil
	}
	return class
}

// withNamedSecrets returns the sorted list tls with the Secrets of named
// (those Ingresses and Gateways name, watched by name) it does not hold:
// a Secret of type kubernetes.io/tls a Gateway names may be in both.
// tls itself when it holds them all.
func withNamedSecrets(tls model.List[*corev1.Secret], named []*corev1.Secret) model.List[*corev1.Secret] {
	var edits []source.Edit[*corev1.Secret]
	seen := make(map[types.NamespacedName]bool, len(named))
	for _, secret := range named {
		key := types.NamespacedName{Namespace: secret.Namespace, Name: secret.Name}
		if _, found := source.FindNamedIn(tls, key.Namespace, key.Name); found || seen[key] {
			continue
		}
		seen[key] = true
		edits = append(edits, source.Edit[*corev1.Secret]{Namespace: key.Namespace, Name: key.Name, Obj: secret})
	}
	// One edit per name: Patched cannot refuse them.
	secrets, _ := source.Patched(tls, edits)
	return secrets
}

// observeIngress keeps refs: it is told of each Ingress ingressView puts
// in its list (nil: removed).
func (s *Source) observeIngress(key types.NamespacedName, ing *networkingv1.Ingress) {
	var secrets, configMaps []types.NamespacedName
	if ing != nil {
		secrets, configMaps = model.SecretRefs(ing), model.ConfigMapRefs(ing)
	}
	if len(secrets)+len(configMaps) == 0 {
		delete(s.refs, key)
		return
	}
	if s.refs == nil {
		s.refs = map[types.NamespacedName]ingressRefs{}
	}
	s.refs[key] = ingressRefs{ingress: ing, secrets: secrets, configMaps: configMaps}
}

// namedRefs returns the Secrets and ConfigMaps the served Ingresses of
// snap name by annotation, those its Gateways name (gatewayRefs) and the
// CA ConfigMaps of its BackendTLSPolicies, each once. The caller holds
// viewMu, and snap's Ingresses are ingressView's last list, whose refs
// are s.refs.
func (s *Source) namedRefs(snap model.Snapshot) (secrets, configMaps []types.NamespacedName) {
	ours := func(*networkingv1.Ingress) bool { return true }
	if !s.opts.EveryIngress {
		ours = model.Serves(model.Snapshot{IngressClasses: snap.IngressClasses,
			IngressClass: s.opts.IngressClass, WatchWithoutClass: s.opts.WatchWithoutClass})
	}
	add := func(refs []types.NamespacedName, seen map[types.NamespacedName]bool, more []types.NamespacedName) []types.NamespacedName {
		for _, ref := range more {
			if !seen[ref] {
				seen[ref] = true
				refs = append(refs, ref)
			}
		}
		return refs
	}
	seenSecrets, seenConfigMaps := map[types.NamespacedName]bool{}, map[types.NamespacedName]bool{}
	// Only the Ingresses that name something are looked at: most name
	// nothing, and a walk of every Ingress per Snapshot is what a change
	// must not cost. Sorted, so that the watches start in one order.
	for _, key := range slices.SortedFunc(maps.Keys(s.refs), func(a, b types.NamespacedName) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	}) {
		r := s.refs[key]
		if !ours(r.ingress) {
			continue
		}
		secrets = add(secrets, seenSecrets, r.secrets)
		configMaps = add(configMaps, seenConfigMaps, r.configMaps)
	}
	controller := cmp.Or(s.opts.GatewayController, model.GatewayControllerName)
	gatewaySecrets, gatewayConfigMaps := gatewayRefs(snap, controller, s.opts.EveryIngress)
	secrets = add(secrets, seenSecrets, gatewaySecrets)
	configMaps = add(configMaps, seenConfigMaps, gatewayConfigMaps)
	for policy := range snap.BackendTLSPolicies.All() {
		configMaps = add(configMaps, seenConfigMaps, model.BackendTLSConfigMapRefs(policy))
	}
	return secrets, configMaps
}

func (s *Source) isStarted() bool { return s.ready.Load() }

// namedSecretType says a Secret named by an Ingress or a Gateway is of a
// type whose data is kept: Opaque (basic auth, backend TLS; a listener's
// too, for the model to judge) or kubernetes.io/tls (a listener's
// certificate).
func namedSecretType(t corev1.SecretType) bool {
	return t == corev1.SecretTypeOpaque || t == corev1.SecretTypeTLS
}

// strip is source.Strip as an informer's transform: it changes the
// object in place, which a transform may do.
func strip(obj any) (any, error) {
	source.Strip(obj)
	return obj, nil
}

// namedSecretKeys are the keys of a Secret an Ingress or a Gateway names
// that the agent keeps: the htpasswd file of basic auth (annotation
// auth-secret), the CAs and client certificate of TLS to the backend
// (proxy-ssl-secret), a listener's certificate and key.
var namedSecretKeys = []string{"auth", "ca.crt", "ca.crl", "tls.crt", "tls.key"}

// stripAuthSecret is strip for the named Secret watches: it also drops
// every data key but namedSecretKeys, and all data of a Secret of a type
// other than Opaque and kubernetes.io/tls, so that no other secret value
// is ever cached.
func stripAuthSecret(obj any) (any, error) {
	obj, err := strip(obj)
	if err != nil {
		return obj, err
	}
	if secret, ok := obj.(*corev1.Secret); ok {
		kept := map[string][]byte{}
		for _, key := range namedSecretKeys {
			if v, has := secret.Data[key]; has {
				kept[key] = v
			}
		}
		secret.Data, secret.StringData = nil, nil
		if len(kept) > 0 && namedSecretType(secret.Type) {
			secret.Data = kept
		}
	}
	return obj, nil
}

// handler reports each change of one informer: its Kind and the object.
type handler struct {
	kind    source.Kind
	changed func(source.Change)
	// noteSlice, for EndpointSlices only, records the slice's Service,
	// given the slice before (nil: added) and after (nil: deleted).
	noteSlice func(oldObj, newObj any)
	// view is kept up to date before each change is reported (nil: none).
	view viewUpdater
	// forget, for EndpointSlices only, is told of each slice the view no
	// longer holds, once it does not (nil: none).
	forget func(obj any)
	// lock, for EndpointSlices only, is held while the view, the index
	// of slices by Service (noteSlice) and the names of the slices'
	// Services (forget) change: a Snapshot, which holds it, finds the
	// three in step (nil: none).
	lock sync.Locker
}

var _ cache.ResourceEventHandler = handler{}

// versioned is an object the handler is told of: one of the API's
// (metav1.Object) or a Service as cached (model.Service).
type versioned interface {
	source.Named
	GetResourceVersion() string
}

func (h handler) OnAdd(obj any, _ bool) {
	h.lockView()
	h.note(nil, obj)
	if h.view != nil {
		h.view.put(obj)
	}
	h.unlockView()
	h.report(obj)
}

func (h handler) lockView() {
	if h.lock != nil {
		h.lock.Lock()
	}
}

func (h handler) unlockView() {
	if h.lock != nil {
		h.lock.Unlock()
	}
}

// OnUpdate drops resync replays: the object did not change if its
// ResourceVersion did not. An Ingress whose status alone changed is put
// in the view (which then holds the cache's object, not the one before)
// but not reported: the model reads no Ingress status, and the status
// writer's own writes come back so, one per Ingress (50,000 at a start
// at 50,000 Ingresses, each an incremental sync when reported).
func (h handler) OnUpdate(oldObj, newObj any) {
	oldMeta, ok1 := oldObj.(versioned)
	newMeta, ok2 := newObj.(versioned)
	if ok1 && ok2 && oldMeta.GetResourceVersion() == newMeta.GetResourceVersion() {
		if h.forget != nil && oldObj != newObj && h.view != nil && newMeta.GetResourceVersion() != "" {
			// The same version again, yet not the cache's object (the
			// transform hands that back, unless this version was
			// queued before the cache held it): the view and the index
			// take the cache's, which the next change forgets.
			h.lockView()
			h.note(oldObj, newObj)
			h.view.put(newObj)
			h.forget(oldObj)
			h.unlockView()
		}
		return
	}
	h.lockView()
	h.note(oldObj, newObj)
	if h.view != nil {
		h.view.put(newObj)
	}
	if h.forget != nil && oldObj != newObj {
		h.forget(oldObj)
	}
	h.unlockView()
	if ingressStatusOnly(oldObj, newObj) {
		return
	}
	h.report(newObj)
}

// ingressStatusOnly says whether oldObj and newObj are Ingresses that
// differ in their status and resourceVersion alone (managedFields are
// stripped).
func ingressStatusOnly(oldObj, newObj any) bool {
	o, ok1 := oldObj.(*networkingv1.Ingress)
	n, ok2 := newObj.(*networkingv1.Ingress)
	if !ok1 || !ok2 || o.Generation != n.Generation {
		return false
	}
	om, nm := o.ObjectMeta, n.ObjectMeta
	om.ResourceVersion, nm.ResourceVersion = "", ""
	om.ManagedFields, nm.ManagedFields = nil, nil
	return equality.Semantic.DeepEqual(om, nm) && equality.Semantic.DeepEqual(o.Spec, n.Spec)
}

// OnDelete is also called with a cache.DeletedFinalStateUnknown when the
// watch missed the deletion; the object is gone from the cache either way.
func (h handler) OnDelete(obj any) {
	h.lockView()
	if h.view != nil {
		h.view.remove(obj)
	}
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	h.note(obj, nil)
	if h.forget != nil {
		h.forget(obj)
	}
	h.unlockView()
	h.report(obj)
}

// report tells changed which object changed (its Kind alone when obj has
// no metadata, which an informer never hands over).
func (h handler) report(obj any) {
	c := source.Change{Kind: h.kind}
	if m, ok := obj.(source.Named); ok {
		c.Namespace, c.Name = m.GetNamespace(), m.GetName()
	}
	h.changed(c)
}

func (h handler) note(oldObj, newObj any) {
	if h.noteSlice != nil {
		h.noteSlice(oldObj, newObj)
	}
}

// serviceOf is the Service an EndpointSlice belongs to (Name "" when it
// names none): its label, or what the transform kept of it.
func (s *Source) serviceOf(slice *discoveryv1.EndpointSlice) source.ServiceKey {
	return source.ServiceKey{Namespace: slice.Namespace, Name: s.sliceService(slice)}
}

// noteSlice records the Services of a changed EndpointSlice, the one it
// belonged to (oldObj, nil when added) and the one it belongs to (newObj,
// nil when deleted), and puts it in place in slicesOf.
func (s *Source) noteSlice(oldObj, newObj any) {
	c := &s.changedServices
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.slicesOf == nil {
		c.slicesOf = source.NewSliceIndexEdit(c.slicesDone)
	}
	note := func(key source.ServiceKey) {
		if c.keys == nil {
			c.keys = map[source.ServiceKey]struct{}{}
		}
		c.keys[key] = struct{}{}
	}
	// A list Get returned is never changed: each change makes a new one.
	if old, ok := oldObj.(*discoveryv1.EndpointSlice); ok {
		if key := s.serviceOf(old); key.Name != "" {
			note(key)
			c.slicesOf.Set(key, slices.DeleteFunc(slices.Clone(c.slicesOf.Get(key)),
				func(o *discoveryv1.EndpointSlice) bool { return o.Name == old.Name }))
		}
	}
	if slice, ok := newObj.(*discoveryv1.EndpointSlice); ok {
		if key := s.serviceOf(slice); key.Name != "" {
			note(key)
			list := slices.DeleteFunc(slices.Clone(c.slicesOf.Get(key)),
				func(o *discoveryv1.EndpointSlice) bool { return o.Name == slice.Name })
			c.slicesOf.Set(key, append(list, slice))
		}
	}
}

// TakeChangedServices returns the Services whose EndpointSlices changed
// since the last call, and forgets them.
func (s *Source) TakeChangedServices() []source.ServiceKey {
	s.changedServices.mu.Lock()
	defer s.changedServices.mu.Unlock()
	out := make([]source.ServiceKey, 0, len(s.changedServices.keys))
	for k := range s.changedServices.keys {
		out = append(out, k)
	}
	// Not clear: that keeps the room of the first listing's every
	// Service (3 MB at 50,000) for good.
	s.changedServices.keys = nil
	return out
}

// ServiceEndpoints returns the cached Service namespace/name (nil if none)
// and its EndpointSlices (read-only), found through an index rather than
// a scan.
func (s *Source) ServiceEndpoints(namespace, name string) (*model.Service, []*discoveryv1.EndpointSlice) {
	if !s.isStarted() {
		return nil, nil
	}
	svc := s.serviceView.lookup(namespace, name)
	c := &s.changedServices
	c.mu.Lock()
	defer c.mu.Unlock()
	return svc, c.slicesIndex().Get(source.ServiceKey{Namespace: namespace, Name: name})
}

// Service returns the cached Service namespace/name, nil if none: the
// whole object when the status writer may manage it
// (model.GatewayManaged), else one with its namespace and name alone (the
// cache holds no more of it: model.Service), which is not a Gateway's.
func (s *Source) Service(namespace, name string) *corev1.Service {
	if !s.isStarted() {
		return nil
	}
	svc := s.serviceView.lookup(namespace, name)
	switch {
	case svc == nil:
		return nil
	case svc.Object != nil:
		return svc.Object
	}
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name}}
}

// EndpointSlice returns the cached EndpointSlice namespace/name, nil if
// none.
func (s *Source) EndpointSlice(namespace, name string) *discoveryv1.EndpointSlice {
	if !s.isStarted() {
		return nil
	}
	return s.sliceView.lookup(namespace, name)
}

// GatewayServiceObjects returns the cached Services and EndpointSlices
// labelled as Gateway Services' (model.GatewayServiceManagedByLabel): the
// status writer judges each by its ownerReference.
func (s *Source) GatewayServiceObjects() ([]*corev1.Service, []*discoveryv1.EndpointSlice) {
	if !s.isStarted() {
		return nil, nil
	}
	selector := labels.SelectorFromSet(labels.Set{model.GatewayServiceManagedByLabel: model.GatewayServiceManagedBy})
	var services []*corev1.Service
	s.serviceView.each(func(svc *model.Service) {
		if svc.Object != nil && selector.Matches(labels.Set(svc.Object.Labels)) {
			services = append(services, svc.Object)
		}
	})
	var endpointSlices []*discoveryv1.EndpointSlice
	s.sliceView.each(func(slice *discoveryv1.EndpointSlice) {
		if selector.Matches(labels.Set(slice.Labels)) {
			endpointSlices = append(endpointSlices, slice)
		}
	})
	return services, endpointSlices
}
