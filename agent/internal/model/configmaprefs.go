package model

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/restysync/restysync/agent/internal/chars"
)

// ConfigMaps that an Ingress names by annotation: only in its own
// namespace, read by name (the kube source watches each on its own).

// ConfigMapRefs returns the ConfigMaps ing names by annotation
// (auth-proxy-set-headers, custom-headers, and fastcgi-params-configmap
// when its backend-protocol is FCGI) in its own namespace, sorted, each
// once: the only ones the kube source reads besides its own, each by name.
func ConfigMapRefs(ing *networkingv1.Ingress) []types.NamespacedName {
	var values []string
	for _, key := range []string{keyAuthProxySetHeaders, keyCustomHeaders} {
		if value, _, ok := lookupAnnotation(ing, key); ok {
			values = append(values, value)
		}
	}
	if value, _, ok := fastCGIParamsRef(ing); ok {
		values = append(values, value)
	}
	var refs []types.NamespacedName
	for _, value := range values {
		if ref, ok := ingressConfigMapRef(ing, value); ok && !slices.Contains(refs, ref) {
			refs = append(refs, ref)
		}
	}
	slices.SortFunc(refs, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	return refs
}

// ingressConfigMapRef resolves a NAME or NAMESPACE/NAME that ing gives
// by annotation to a ConfigMap in ing's own namespace; ok is false for
// another namespace or a name that is not a ConfigMap's.
func ingressConfigMapRef(ing *networkingv1.Ingress, value string) (types.NamespacedName, bool) {
	namespace, name := splitAuthSecretRef(ing, strings.TrimSpace(value))
	if namespace != ing.Namespace || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: namespace, Name: name}, true
}

// ingressConfigMap returns the ConfigMap that ing names in annotation key
// (value), when it is in ing's own namespace, exists, and holds at most
// max entries (what names them, "headers" or "parameters"), each entry
// holding only what package chars accepts. Otherwise it
// reports the Problem and returns why the Ingress's paths fail closed: its
// users may rely on what the ConfigMap holds.
func (b *builder) ingressConfigMap(ing *networkingv1.Ingress, key, value string, max int, what string) (*corev1.ConfigMap, types.NamespacedName, string) {
	const closed = "; the Ingress's paths answer 503 until it is fixed"
	denied := key + " is not usable"
	ref, ok := ingressConfigMapRef(ing, value)
	if !ok {
		b.annotationProblem(ing, key, value, "must name a ConfigMap in the Ingress's own namespace (NAME or NAMESPACE/NAME)"+closed)
		return nil, ref, denied
	}
	cm := b.configMap(ref.Namespace, ref.Name)
	if cm == nil {
		object := "ConfigMap " + ref.String()
		b.missingObjectProblem(ing, key, value, object, object+" not found"+closed)
		return nil, ref, denied
	}
	if len(cm.Data) > max {
		b.annotationProblem(ing, key, value, fmt.Sprintf("ConfigMap %s has %d %s; at most %d are allowed%s", ref, len(cm.Data), what, max, closed))
		return nil, ref, denied
	}
	for _, name := range slices.Sorted(maps.Keys(cm.Data)) {
		err := chars.Check(name)
		if err == nil {
			err = chars.Check(cm.Data[name])
		}
		if err != nil {
			return nil, ref, b.entryProblem(ing, key, value, ref, fmt.Sprintf("entry %q", clip(name)), err.Error())
		}
	}
	return cm, ref, ""
}

// entryProblem reports a bad entry of the ConfigMap ingressConfigMap
// returned, and returns why the Ingress's paths fail closed.
func (b *builder) entryProblem(ing *networkingv1.Ingress, key, value string, ref types.NamespacedName, entry, reason string) string {
	b.annotationProblem(ing, key, value, fmt.Sprintf("ConfigMap %s: %s %s; the Ingress's paths answer 503 until it is fixed", ref, entry, reason))
	return key + " is not usable"
}

// checkConfigMapName checks the shape of a ConfigMap reference: NAME or
// NAMESPACE/NAME with a valid name. Whether it is the Ingress's namespace,
// and the ConfigMap exists, only Build knows.
func checkConfigMapName(value string) string {
	if len(validation.IsDNS1123Subdomain(refName(strings.TrimSpace(value)))) > 0 {
		return "must name a ConfigMap in the Ingress's own namespace (NAME or NAMESPACE/NAME)"
	}
	return ""
}
