// Package file is the source stage of the pipeline (source → model → render → plan → apply)
// that reads Kubernetes manifests from a folder instead of the
// API server, for running restysync with no cluster.
//
// It reads every *.yaml, *.yml and *.json file in the folder and in its
// subfolders (up to 8 levels deep), skipping hidden names, which also skips
// editor temp files and the "..data" internals of a ConfigMap volume.
// Symlinks to files are followed, symlinks to folders are not. Each file may
// hold several documents separated by "---"; each document is decoded
// strictly by apimachinery into one of the accepted types (Ingress,
// IngressClass, Service, EndpointSlice, TLS Secret, ConfigMap, and the
// Gateway API's GatewayClass, Gateway, HTTPRoute, GRPCRoute, TLSRoute, ReferenceGrant, ListenerSet and BackendTLSPolicy with
// the Namespaces its selectors match), and stripped of what restysync never
// reads, as the kube source strips what it caches (source.Strip:
// managedFields, kubectl's last-applied-configuration, an endpoint's pod
// and zone). What the API server would add is
// not added: the Gateway API's defaults (a listener's allowedRoutes, a
// match's path) are the model's to assume when a field is unset. A document
// that cannot be used becomes a Problem named "path#N" whose reason starts
// with the line of the file it is about; the rest of the file and every
// other file are still served. Decoding is strict (unknown fields and
// duplicate keys are problems) because a typo that silently drops a field
// would route traffic the user did not write. A document that fails to
// decode keeps the last good version of what it defined, as the API server
// refuses a bad write and keeps the last good object (lastgood.go); a file
// never read well contributes nothing. A .json file holds one object; JSON
// streams are not read. A list ("kind: List", as `kubectl get -o yaml`
// writes it, or IngressList) is read item by item (list.go).
//
// The folder is watched, not the files, because editors and kubelet replace
// a file by renaming another one over it; a watch on the old file would go
// silent. Events are gathered until the folder has been quiet for a few
// milliseconds (WithDebounce), and only the files
// they name are read again, so an edit costs one file's decoding. Deleting
// a file drops its objects. If the folder itself disappears (renamed away,
// or deleted), the objects last read from it are kept, with a Problem, and
// the folder is looked for again every second: a folder swapped for a new
// one is then read whole, and nginx is not emptied in between.
package file

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	corev1 "k8s.io/api/core/v1"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/source"
)

// Defaults of the options.
const (
	DefaultDebounce      = 2 * time.Millisecond
	DefaultMaxFileSize   = 8 << 20
	DefaultMaxDocuments  = 10_000
	DefaultRetryInterval = time.Second
)

// maxGather is how long a batch of events gathers at most, however
// often they come: 100ms, or 10 debounces if that is longer.
func (s *Source) maxGather() time.Duration {
	return max(100*time.Millisecond, 10*s.debounce)
}

// maxDepth is how many levels of subfolders are read below the folder.
const maxDepth = 8

var _ source.Source = (*Source)(nil)

// Source serves the objects found in a folder of manifests.
type Source struct {
	dir           string
	debounce      time.Duration
	maxFileSize   int64
	maxDocuments  int
	retryInterval time.Duration
	logger        *slog.Logger
	// configMap is the agent's ConfigMap, "namespace/name", or ""
	// (WithConfigMap, configmap.go); tcpServices and udpServices
	// ingress-nginx's ConfigMaps of services (WithServicesConfigMaps).
	configMap, tcpServices, udpServices string

	// Owned by Start, then by the watch goroutine.
	watcher    *fsnotify.Watcher
	files      map[string]*fileState // by path
	dirs       map[string]bool       // folders being watched
	dirProblem []problem             // folders that could not be read or watched
	folderErr  error                 // the folder itself cannot be read
	started    bool
	done       chan struct{} // closed when the watch goroutine ends
	// pending are the files whose state changed since the last publish,
	// with the state before (nil: new); pendingAll says publish builds
	// the view whole (view.go).
	pending    map[string]*fileState
	pendingAll bool

	mu   sync.RWMutex
	view *view
	// changedServices are the Services whose EndpointSlices changed since
	// TakeChangedServices was last called (endpoints.go).
	changedServices map[source.ServiceKey]struct{}
}

// Option configures a Source.
type Option func(*Source)

// WithLogger logs each Problem at Warn level when it first appears
// (default: nothing is logged; problems are still returned by Snapshot).
func WithLogger(logger *slog.Logger) Option {
	return func(s *Source) {
		if logger != nil {
			s.logger = logger
		}
	}
}

// WithDebounce sets how long the folder must be quiet after an event
// before the files the events name are read again (default
// DefaultDebounce, 2ms): each event restarts the wait, up to maxGather
// after the first. A file written in place in several writes is read
// once, whole, when its writer paused for that long, and an editor's
// write-then-rename, or a tool writing many files, is one batch.
func WithDebounce(d time.Duration) Option {
	return func(s *Source) {
		if d > 0 {
			s.debounce = d
		}
	}
}

// WithMaxFileSize sets the largest file that is read; a larger one is left
// out with a Problem (default DefaultMaxFileSize, 8 MiB).
func WithMaxFileSize(bytes int64) Option {
	return func(s *Source) {
		if bytes > 0 {
			s.maxFileSize = bytes
		}
	}
}

// WithMaxDocuments sets how many documents of one file are read; the rest
// are left out with a Problem (default DefaultMaxDocuments, 10,000).
func WithMaxDocuments(n int) Option {
	return func(s *Source) {
		if n > 0 {
			s.maxDocuments = n
		}
	}
}

// WithRetryInterval sets how often a folder that disappeared is looked for
// again (default DefaultRetryInterval, 1s).
func WithRetryInterval(d time.Duration) Option {
	return func(s *Source) {
		if d > 0 {
			s.retryInterval = d
		}
	}
}

// New returns a Source for the manifests in dir. Start reads and watches it.
func New(dir string, opts ...Option) *Source {
	s := &Source{
		dir:           filepath.Clean(dir),
		debounce:      DefaultDebounce,
		maxFileSize:   DefaultMaxFileSize,
		maxDocuments:  DefaultMaxDocuments,
		retryInterval: DefaultRetryInterval,
		logger:        slog.New(slog.DiscardHandler),
		files:         map[string]*fileState{},
		dirs:          map[string]bool{},
		done:          make(chan struct{}),
		view:          &view{},
	}
	for _, opt := range opts {
		opt(s)
	}
	return s
}

// Start reads every file once, then watches the folder until ctx is done.
// It fails if the folder cannot be read or watched. changed is called from
// one goroutine, once per object that changed, and with
// source.KindUnknown when the problems changed.
func (s *Source) Start(ctx context.Context, changed func(source.Change)) error {
	if s.started {
		return errors.New("file source: Start called twice")
	}
	s.started = true
	watcher, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching %s: %w", s.dir, err)
	}
	s.watcher = watcher
	s.readAll()
	if s.folderErr != nil {
		_ = watcher.Close()
		return s.folderErr
	}
	s.publish()
	s.TakeChangedServices() // the first listing is no change
	go s.watch(ctx, changed)
	return nil
}

// Snapshot returns the objects sorted by namespace and name, and the
// problems sorted by file and document. The slices are the view's, shared
// with every other caller and never changed (a publish makes new ones):
// read-only, like the objects. Not copying them keeps a sync at 50,000
// Ingresses from copying 150,000 pointers to change one.
func (s *Source) Snapshot() (model.Snapshot, []model.Problem) {
	s.mu.RLock()
	v := s.view
	s.mu.RUnlock()
	return model.Snapshot{
		Ingresses:      v.ingresses,
		IngressClasses: v.ingressClasses,
		Services:       v.services,
		EndpointSlices: v.endpointSlices,
		SliceServices:  v.sliceServices.Of,
		SlicesOf:       v.slicesOf.Of,
		Secrets:        v.secrets,
		ConfigMap:      namedConfigMap(v, s.configMap),
		TCPServices:    namedConfigMap(v, s.tcpServices),
		// Those Ingresses name (auth-proxy-set-headers) are among them.
		ConfigMaps:  v.configMaps,
		UDPServices: namedConfigMap(v, s.udpServices),

		GatewayClasses:     v.gatewayClasses,
		Gateways:           v.gateways,
		HTTPRoutes:         v.httpRoutes,
		GRPCRoutes:         v.grpcRoutes,
		TLSRoutes:          v.tlsRoutes,
		ReferenceGrants:    v.referenceGrants,
		ListenerSets:       v.listenerSets,
		BackendTLSPolicies: v.backendTLSPolicies,
		Namespaces:         v.namespaces,
	}, slices.Clone(v.problems)
}

// ConfigMaps returns the ConfigMaps read, sorted by namespace and name.
// They are not part of model.Snapshot yet.
func (s *Source) ConfigMaps() []*corev1.ConfigMap {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.view.configMaps.Slice()
}

// watch turns file system events into reads until ctx is done.
func (s *Source) watch(ctx context.Context, changed func(source.Change)) {
	defer close(s.done)
	defer s.watcher.Close()

	var (
		batch    = newBatch()
		debounce *time.Timer
		fire     <-chan time.Time // set while a batch is waiting
		retry    *time.Ticker
		retryC   <-chan time.Time // set while the folder is missing
	)
	// arm (re)starts the wait for the batch: debounce after this event,
	// and at most maxGather after the batch's first.
	var first time.Time
	arm := func() {
		now := time.Now()
		if fire == nil {
			first = now
		}
		wait := min(s.debounce, max(0, first.Add(s.maxGather()).Sub(now)))
		if debounce == nil {
			debounce = time.NewTimer(wait)
		} else {
			debounce.Reset(wait)
		}
		fire = debounce.C
	}
	defer func() {
		if debounce != nil {
			debounce.Stop()
		}
		if retry != nil {
			retry.Stop()
		}
	}()

	for {
		select {
		case <-ctx.Done():
			return
		case event, ok := <-s.watcher.Events:
			if !ok {
				return
			}
			if s.note(batch, event) {
				arm()
			}
		case err, ok := <-s.watcher.Errors:
			if !ok {
				return
			}
			s.logger.Warn("watching manifests", "dir", s.dir, "error", err)
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				batch.all = true
				arm()
			}
		case <-fire:
			fire = nil
			s.apply(batch)
			batch = newBatch()
			s.report(changed)
		case <-retryC:
			s.readAll()
			s.report(changed)
		}

		// Look for a folder that disappeared every retryInterval until it is back.
		switch {
		case s.folderErr != nil && retryC == nil:
			retry = time.NewTicker(s.retryInterval)
			retryC = retry.C
		case s.folderErr == nil && retryC != nil:
			retry.Stop()
			retryC = nil
		}
	}
}

// report publishes the current files and tells the caller what changed,
// the last change marked Last: the batch is whole in the snapshot.
func (s *Source) report(changed func(source.Change)) {
	objects, problemsChanged := s.publish()
	if problemsChanged {
		// Not an EndpointSlice change alone: the fast path would keep the
		// problems of the last full build.
		objects = append(objects, source.Change{Kind: source.KindUnknown})
	}
	for i, c := range objects {
		c.Last = i == len(objects)-1
		changed(c)
	}
}
