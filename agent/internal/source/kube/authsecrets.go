package kube

import (
	"context"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/restysync/restysync/agent/internal/kubeclient"
	"github.com/restysync/restysync/agent/internal/source"
)

// authWatches reads the objects that served Ingresses name by annotation,
// and nothing else of their kind: the Opaque Secrets of basic auth, backend
// TLS and client certificates (model.SecretRefs), and the ConfigMaps of
// auth-proxy-set-headers (model.ConfigMapRefs); and the Secrets and CA
// ConfigMaps served Gateways name (gatewayRefs), which may be in a
// namespace the TLS Secret informer does not watch, or Opaque. One list and watch per
// object, by name in its namespace (field selector metadata.name), started
// when an Ingress names it and stopped when none does any more. Each cached
// Secret keeps only namedSecretKeys (stripAuthSecret).
//
// A per-namespace or cluster-wide Opaque informer would be one watch
// instead of many, but it would stream every Opaque Secret's data
// (database passwords, tokens) through the agent; reading only what an
// Ingress names is the least the agent can read.
type authWatches struct {
	client      kubeclient.Interface
	reconnector *reconnector
	resync      time.Duration
	logger      *slog.Logger
	changed     func(source.Change)
	ctx         context.Context
	// kind is what is watched: source.KindSecret or source.KindConfigMap.
	kind source.Kind

	mu      sync.Mutex
	watches map[types.NamespacedName]*authWatch
}

type authWatch struct {
	informer cache.SharedIndexInformer
	synced   cache.InformerSynced
	stop     context.CancelFunc
}

// authSyncWait bounds how long a Snapshot waits for the first listing of a
// Secret an Ingress has just started to name. Until it arrives the
// Ingress fails closed, so waiting briefly saves a spurious Problem.
const authSyncWait = 5 * time.Second

// reconcile starts a watch for every ref not yet watched, stops those of
// Secrets no longer named, and waits (at most authSyncWait) for the new
// ones to hold their first listing.
func (a *authWatches) reconcile(refs []types.NamespacedName) {
	a.mu.Lock()
	wanted := make(map[types.NamespacedName]bool, len(refs))
	var started []cache.InformerSynced
	for _, ref := range refs {
		wanted[ref] = true
		if _, ok := a.watches[ref]; ok {
			continue
		}
		w := a.start(ref)
		a.watches[ref] = w
		started = append(started, w.synced)
	}
	for ref, w := range a.watches {
		if !wanted[ref] {
			w.stop()
			delete(a.watches, ref)
		}
	}
	a.mu.Unlock()
	if len(started) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(a.ctx, authSyncWait)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), started...) {
		a.logger.Warn("objects Ingresses name not listed yet; their Ingresses fail closed until they are", "kind", string(a.kind), "count", len(started), "waited", authSyncWait)
	}
}

// start begins the list and watch of the one object ref.
func (a *authWatches) start(ref types.NamespacedName) *authWatch {
	byName := func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", ref.Name).String()
	}
	var informer cache.SharedIndexInformer
	if a.kind == source.KindConfigMap {
		informer = kubeclient.NewInformer(a.client, reconnecting(a.client.ConfigMaps(ref.Namespace), a.reconnector),
			&corev1.ConfigMap{}, a.resync, byName)
		_ = informer.SetTransform(func(obj any) (any, error) {
			if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name != ref.Name {
				cm.Data, cm.BinaryData = nil, nil
			}
			return strip(obj)
		})
	} else {
		informer = kubeclient.NewInformer(a.client, reconnecting(a.client.Secrets(ref.Namespace), a.reconnector),
			&corev1.Secret{}, a.resync, byName)
		// Errors from these three only come after the informer has started.
		_ = informer.SetTransform(func(obj any) (any, error) {
			// A server (or fake) that ignores the field selector must not
			// get another Secret's data into the cache.
			if secret, ok := obj.(*corev1.Secret); ok && secret.Name != ref.Name {
				secret.Data, secret.StringData = nil, nil
			}
			return stripAuthSecret(obj)
		})
	}
	_ = informer.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		a.logger.Warn("watching the API server", "kind", string(a.kind), "name", ref.String(), "error", err)
	})
	reg, _ := informer.AddEventHandler(handler{kind: a.kind, changed: a.changed})
	ctx, stop := context.WithCancel(a.ctx)
	go informer.RunWithContext(ctx)
	return &authWatch{
		informer: informer,
		synced:   func() bool { return informer.HasSynced() && reg.HasSynced() },
		stop:     stop,
	}
}

// secrets returns the cached Secrets of namedSecretType that hold data.
func (a *authWatches) secrets() []*corev1.Secret {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []*corev1.Secret
	for ref, w := range a.watches {
		for _, obj := range w.informer.GetStore().List() {
			secret, ok := obj.(*corev1.Secret)
			if !ok || !namedSecretType(secret.Type) || secret.Name != ref.Name || secret.Namespace != ref.Namespace {
				continue
			}
			if len(secret.Data) > 0 {
				out = append(out, secret)
			}
		}
	}
	return out
}

// configMaps returns the cached ConfigMaps.
func (a *authWatches) configMaps() []*corev1.ConfigMap {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []*corev1.ConfigMap
	for ref, w := range a.watches {
		for _, obj := range w.informer.GetStore().List() {
			if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name == ref.Name && cm.Namespace == ref.Namespace {
				out = append(out, cm)
			}
		}
	}
	return out
}
