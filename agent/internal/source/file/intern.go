package file

import (
	"strings"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/restysync/restysync/agent/internal/source"
)

// shareStrings makes the strings of obj that repeat from object to object
// (apiVersion and kind, the namespace, label and annotation keys, port
// names and protocols, the Ingress class, path types: source.ShareFewValued)
// point at one shared copy: decoding gives each object its own copy of each, some 10 MB at
// 50,000 Ingresses with a Service and an EndpointSlice each. Only such
// few-valued fields are shared (names, hosts and addresses are mostly
// unique), and the table is bounded (maxShared), so manifests cannot make
// it grow without end. obj is the decoder's own, not yet handed out.
func shareStrings(obj runtime.Object) {
	if o, ok := obj.(metav1.ObjectMetaAccessor); ok {
		m := o.GetObjectMeta()
		m.SetNamespace(shared(m.GetNamespace()))
		m.SetLabels(sharedKeys(m.GetLabels()))
		m.SetAnnotations(sharedKeys(m.GetAnnotations()))
	}
	if t, ok := obj.GetObjectKind().(*metav1.TypeMeta); ok {
		t.APIVersion, t.Kind = shared(t.APIVersion), shared(t.Kind)
	}
	source.ShareFewValued(obj, shared)
}

// maxShared bounds the shared strings; past it a string stays the
// object's own.
const maxShared = 4096

// sharedTable maps each shared string to itself; sharedCount counts its
// entries. Decoding runs in parallel workers: a sync.Map, as it is read
// far more than written.
var (
	sharedTable sync.Map
	sharedCount atomic.Int32
)

// shared returns the shared copy of s, making a copy of s it when there is
// none yet.
func shared(s string) string {
	if s == "" {
		return ""
	}
	if v, ok := sharedTable.Load(s); ok {
		return v.(string)
	}
	if sharedCount.Load() >= maxShared {
		return s
	}
	s = strings.Clone(s)
	v, loaded := sharedTable.LoadOrStore(s, s)
	if !loaded {
		sharedCount.Add(1)
	}
	return v.(string)
}

// sharedKeys returns m with shared keys (a new map; nil for none).
func sharedKeys(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[shared(k)] = v
	}
	return out
}
