package model

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/restysync/restysync/agent/internal/chars"
)

// annotationPrefixes are the prefixes every annotation key works under:
// restysync's own, and ingress-nginx's so that its users switch by changing
// the class alone. When both are set, restysync's wins.
var annotationPrefixes = []string{ourPrefix, ingressNginxPrefix}

// ourPrefix is restysync's own annotation prefix.
const ourPrefix = "restysync.io/"

// lookupAnnotation returns the value of key under the first prefix that has it,
// and the full key it was found under. An empty value counts as absent, as
// ingress-nginx's parser takes an empty annotation for a missing one (its
// default applies, and no error); see EmptyAnnotationReason. So does a
// value with a character package chars refuses: no field of the model ever
// holds one, checkAnnotationValues reports it, and readAccess makes the
// Ingress's paths fail closed.
func lookupAnnotation(ing *networkingv1.Ingress, key string) (value, fullKey string, ok bool) {
	if len(ing.Annotations) == 0 {
		return "", "", false
	}
	// The key is built in a buffer on the stack: a map index by
	// string(bytes) does not allocate, and this runs for every key of
	// every Ingress on each full sync.
	var buf [128]byte
	for _, prefix := range annotationPrefixes {
		full := append(append(buf[:0], prefix...), key...)
		if value, ok = ing.Annotations[string(full)]; ok && value != "" {
			if chars.CheckText(value) != nil {
				return "", "", false
			}
			return value, string(full), true
		}
	}
	return "", "", false
}

// boolAnnotation reads a "true"/"false" annotation. A value that is
// neither is a Problem on the Ingress, and the default is used.
func (b *builder) boolAnnotation(ing *networkingv1.Ingress, key string, def bool) bool {
	value, fullKey, ok := lookupAnnotation(ing, key)
	if !ok {
		return def
	}
	if reason := checkBool(value); reason != "" {
		b.annotationProblem(ing, fullKey, value, fmt.Sprintf("%s; %t is used", reason, def))
		return def
	}
	v, _ := strconv.ParseBool(value)
	return v
}

// clip shortens a user value quoted in a Problem, so that a huge
// annotation costs a line, not a megabyte, in every log and Event.
func clip(value string) string {
	const max = 64
	if len(value) <= max {
		return value
	}
	return value[:max] + "…"
}

// annotationProblem reports a bad annotation value on ing.
func (b *builder) annotationProblem(ing *networkingv1.Ingress, key, value, reason string) {
	b.ingressProblem(ing, fmt.Sprintf("annotation %s %q: %s", key, clip(value), reason))
}

// missingObjectProblem is annotationProblem for a value that names an
// object the snapshot lacks (object is "Kind namespace/name"): the value
// is right, the cluster is not (yet).
func (b *builder) missingObjectProblem(ing *networkingv1.Ingress, key, value, object, reason string) {
	b.problems = append(b.problems, Problem{Kind: "Ingress", Namespace: ing.Namespace, Name: ing.Name,
		Reason:  clipReason(fmt.Sprintf("annotation %s %q: %s", key, clip(value), reason)),
		Missing: object})
}

// isSnippet reports whether key (without prefix) is a raw nginx directive
// Build does not read (the snippets it reads are supported rows of the
// table).
func isSnippet(key string) bool {
	return strings.HasSuffix(key, "-snippet") || key == "lua-resty-waf-extra-rules"
}

// Annotation statuses, as AnnotationStatus and `restysync check` name them.
const (
	AnnotationSupported = "supported"
	AnnotationRefused   = "refused"
	AnnotationUnknown   = "unknown"
	// AnnotationIgnoredByIngressNginx is a key under ingress-nginx's
	// prefix that ingress-nginx does not read either (a ConfigMap key, a
	// removed annotation, a name nobody reads): ignoring it changes
	// nothing.
	AnnotationIgnoredByIngressNginx = "ignored-by-ingress-nginx"
	// AnnotationTypo is such a key within two edits of one key
	// ingress-nginx reads (proxy-body-sise): ignored by both, and most
	// likely not what its author meant.
	AnnotationTypo = "typo"
	// AnnotationInvalid and AnnotationMissingObject are what `restysync
	// check` adds (and package configmap, for its keys): a supported key
	// whose value Build refused, and one whose value names an object the
	// source does not hold (a Secret, a Service).
	AnnotationInvalid       = "invalid"
	AnnotationMissingObject = "missing-object"
)

// refusedReason says why a snippet annotation is refused.
const refusedReason = "raw nginx directives are refused by design: a snippet could read every certificate " +
	"and key nginx holds and break every other Ingress"

// refusedReasonOf says why the snippet annotation key (full key) is refused.
func refusedReasonOf(key string) string {
	for _, prefix := range annotationPrefixes {
		if name, ok := strings.CutPrefix(key, prefix); ok {
			if row, ok := annotationRows[name]; ok && row.Status == AnnotationRefused && row.Why != "" {
				return row.Why
			}
		}
	}
	return refusedReason
}

// AnnotationStatus classifies an annotation key: AnnotationSupported (Build
// reads it), AnnotationRefused (a raw nginx directive),
// AnnotationIgnoredByIngressNginx (not read by ingress-nginx either),
// AnnotationTypo (the same, within two edits of a key ingress-nginx
// reads), AnnotationUnknown (under one of our prefixes, not read), or ""
// (not one of ours).
func AnnotationStatus(key string) string {
	status, _, _ := AnnotationStatusReason(key)
	return status
}

// AnnotationStatusReason is AnnotationStatus with, for
// AnnotationIgnoredByIngressNginx and AnnotationTypo, why ingress-nginx
// ignores the key, and the key its author most likely meant, prefix
// included: for AnnotationTypo, and for an unknown key under
// restysync.io/ within two edits of one restysync reads ("" otherwise).
func AnnotationStatusReason(key string) (status, reason, suggestion string) {
	status = annotationStatus(key)
	if status != AnnotationUnknown {
		return status, "", ""
	}
	if why, ignored := ingressNginxIgnores(key); ignored {
		name := strings.TrimPrefix(key, ingressNginxPrefix)
		if _, row := annotationRows[name]; !row {
			if near := nearestIngressNginxAnnotation(name); near != "" {
				return AnnotationTypo, why, ingressNginxPrefix + near
			}
		}
		return AnnotationIgnoredByIngressNginx, why, ""
	}
	if name, ours := strings.CutPrefix(key, ourPrefix); ours {
		if near := TypoOf(name, supportedAnnotations()); near != "" {
			return AnnotationUnknown, "", ourPrefix + near
		}
	}
	return AnnotationUnknown, "", ""
}

func annotationStatus(key string) string {
	for _, prefix := range annotationPrefixes {
		name, ok := strings.CutPrefix(key, prefix)
		switch {
		case !ok:
			continue
		case supportedAnnotation(name):
			return AnnotationSupported
		case isSnippet(name):
			return AnnotationRefused
		default:
			return AnnotationUnknown
		}
	}
	return ""
}

// checkAnnotationKeys raises a Problem for each annotation under our
// prefixes that Build does not read: a snippet, refused by design, or a
// key not supported (yet), ignored. Users switching from ingress-nginx see
// in one place what their Ingress asks for and does not get.
func (b *builder) checkAnnotationKeys(ing *networkingv1.Ingress) {
	var keys []string
	for key := range ing.Annotations {
		if status := AnnotationStatus(key); status != "" && status != AnnotationSupported {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys) // problems in a stable order
	for _, key := range badAnnotationValues(ing) {
		value := ing.Annotations[key]
		b.annotationProblem(ing, key, value, chars.CheckText(value).Error()+
			", which no value in nginx.conf may hold; the Ingress's paths answer 503 until it is fixed")
	}
	for _, key := range keys {
		switch status, why, _ := AnnotationStatusReason(key); status {
		case AnnotationRefused:
			b.ingressProblem(ing, fmt.Sprintf("annotation %s: %s; ignored, the rest of the Ingress is served", key, refusedReasonOf(key)))
		case AnnotationIgnoredByIngressNginx, AnnotationTypo:
			b.ingressProblem(ing, fmt.Sprintf("annotation %s: ignored, as ingress-nginx ignores it: %s", key, why))
		default:
			b.ingressProblem(ing, fmt.Sprintf("annotation %s: is not supported; ignored", key))
		}
	}
}

// badAnnotationValues returns, sorted, the keys of the annotations Build
// reads whose value holds a character package chars refuses (a control
// character, a line separator, a bidi or other format character, invalid
// UTF-8). A snippet may hold tabs and line breaks; each field refuses
// those itself. checkAnnotationKeys reports each, and readAccess makes the
// Ingress's paths fail closed: the value may have been an auth-url or an
// allowlist.
func badAnnotationValues(ing *networkingv1.Ingress) []string {
	var keys []string
	for key, value := range ing.Annotations {
		if chars.CheckText(value) != nil && AnnotationStatus(key) == AnnotationSupported {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	return keys
}

// EmptyAnnotationReason is why an annotation of ours with an empty value
// changes nothing: Build takes it for absent, as ingress-nginx does.
const EmptyAnnotationReason = "an empty value, which ingress-nginx ignores too"
