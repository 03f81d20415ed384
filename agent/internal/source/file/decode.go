package file

import (
	"bytes"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/validation"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/source"
)

// acceptedKinds names what the decoder reads, for the Problem of any other kind.
const acceptedKinds = "networking.k8s.io/v1 Ingress and IngressClass, " +
	"v1 Service, Secret (type kubernetes.io/tls) and ConfigMap, discovery.k8s.io/v1 EndpointSlice, " +
	"gateway.networking.k8s.io/v1 GatewayClass, Gateway, HTTPRoute, GRPCRoute, TLSRoute, ReferenceGrant, ListenerSet and BackendTLSPolicy, v1 Namespace"

// readKinds are the kinds the decoder reads, each with the apiVersion it
// reads it as: the same kind of another apiVersion is an error, not a
// document of another kind (OtherKind).
var readKinds = map[string]string{
	"Ingress": "networking.k8s.io/v1", "IngressClass": "networking.k8s.io/v1", "Service": "v1",
	"Secret": "v1", "ConfigMap": "v1", "EndpointSlice": "discovery.k8s.io/v1",
	"GatewayClass": gatewayv1.GroupVersion.String(), "Gateway": gatewayv1.GroupVersion.String(),
	"HTTPRoute": gatewayv1.GroupVersion.String(), "GRPCRoute": gatewayv1.GroupVersion.String(), "TLSRoute": gatewayv1.GroupVersion.String(), "ReferenceGrant": gatewayv1.GroupVersion.String(),
	"ListenerSet": gatewayv1.GroupVersion.String(), "BackendTLSPolicy": gatewayv1.GroupVersion.String(), "Namespace": "v1",
}

// otherKindNote is in the reason of a document of a kind the decoder
// does not read (OtherKind).
const otherKindNote = "is not read (the file source reads " + acceptedKinds + ")"

// OtherKind says p is the file source's Problem about a document of a kind
// it does not read (a Deployment beside the Ingresses): left out as it
// should be, unlike a document that does not decode. restysync check
// fails on the others.
func OtherKind(p model.Problem) bool {
	return p.Kind == "File" && strings.Contains(p.Reason, otherKindNote)
}

// OtherKinds splits problems, the file source's, into the documents of
// kinds it does not read, counted by "Kind (apiVersion)", and the other
// problems: a GitOps folder holds Deployments and RBAC beside its
// Ingresses, which are no problem of restysync's.
func OtherKinds(problems []model.Problem) (counts map[string]int, rest []model.Problem) {
	counts = map[string]int{}
	for _, p := range problems {
		kind, apiVersion, ok := otherKindOf(p)
		if !ok {
			rest = append(rest, p)
			continue
		}
		counts[kind+" ("+apiVersion+")"]++
	}
	return counts, rest
}

// otherKindOf returns the kind and apiVersion an OtherKind problem names,
// as decodeErrorReason writes them: kind "K" of apiVersion "V".
func otherKindOf(p model.Problem) (kind, apiVersion string, ok bool) {
	if !OtherKind(p) {
		return "", "", false
	}
	_, rest, _ := strings.Cut(p.Reason, "kind ")
	kind, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return "", "", false
	}
	rest = strings.TrimPrefix(rest[len(kind):], " of apiVersion ")
	apiVersion, err = strconv.QuotedPrefix(rest)
	if err != nil {
		return "", "", false
	}
	kind, _ = strconv.Unquote(kind)
	apiVersion, _ = strconv.Unquote(apiVersion)
	return kind, apiVersion, true
}

// maxReasonLen caps a decoder message, which may quote the input, in a Problem.
const maxReasonLen = 400

// manifestDecoder decodes one YAML or JSON document (YAML is a superset of
// JSON) into one of the accepted types. It is strict: unknown fields and
// duplicate keys are errors. jsonDecoder is the same for JSON only.
var manifestDecoder, jsonDecoder = newManifestDecoders()

func newManifestDecoders() (yamlDecoder, jsonDecoder runtime.Decoder) {
	scheme := runtime.NewScheme()
	scheme.AddKnownTypes(networkingv1.SchemeGroupVersion, &networkingv1.Ingress{}, &networkingv1.IngressClass{})
	scheme.AddKnownTypes(corev1.SchemeGroupVersion, &corev1.Service{}, &corev1.Secret{}, &corev1.ConfigMap{}, &corev1.Namespace{})
	scheme.AddKnownTypes(discoveryv1.SchemeGroupVersion, &discoveryv1.EndpointSlice{})
	scheme.AddKnownTypes(gatewayv1.SchemeGroupVersion,
		&gatewayv1.GatewayClass{}, &gatewayv1.Gateway{}, &gatewayv1.HTTPRoute{}, &gatewayv1.GRPCRoute{}, &gatewayv1.TLSRoute{}, &gatewayv1.ReferenceGrant{},
		&gatewayv1.ListenerSet{}, &gatewayv1.BackendTLSPolicy{})
	codecs := serializer.NewCodecFactory(scheme, serializer.EnableStrict)
	strict := func(mediaType string) runtime.Decoder {
		info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), mediaType)
		if !ok || info.StrictSerializer == nil {
			panic("file source: apimachinery has no strict " + mediaType + " serializer")
		}
		return info.StrictSerializer
	}
	return strict(runtime.ContentTypeYAML), strict(runtime.ContentTypeJSON)
}

// decodeObject decodes one document with manifestDecoder, parsing its YAML
// once. apimachinery's strict YAML decoder parses a document's YAML twice
// (once to convert it to JSON, once more for duplicate keys), which was
// most of the file source's start at 50,000 Ingresses. Here the YAML is
// converted once, duplicate keys refused (YAMLToJSONStrict), and the JSON
// decoded strictly; any failure is decoded again by manifestDecoder, so
// that every error reads as it always did.
func decodeObject(raw []byte) (runtime.Object, *schema.GroupVersionKind, error) {
	if data, err := yaml.YAMLToJSONStrict(raw); err == nil {
		if obj, gvk, err := jsonDecoder.Decode(data, nil, nil); err == nil {
			return obj, gvk, nil
		}
	}
	return manifestDecoder.Decode(raw, nil, nil)
}

// objectKey identifies an object; two documents with the same key are duplicates.
type objectKey struct {
	kind      source.Kind
	namespace string
	name      string
}

func (k objectKey) String() string {
	if k.namespace == "" {
		return string(k.kind) + " " + k.name
	}
	return string(k.kind) + " " + k.namespace + "/" + k.name
}

// document is one object decoded from a manifest file. Its key is read
// from the object (key), not held beside it: 150,000 keys held 8 MB.
type document struct {
	index int // 1-based, counting documents that are not empty
	// obj is one of the API types the decoder reads, but a Service's is
	// what the stages read of it (model.Service: its type alone is 112
	// bytes where the whole object's is 592).
	obj source.Named
	// service is the Service of an EndpointSlice whose labels compact
	// dropped (source.DropServiceLabel), "" for any other object.
	service string
}

// sliceService is the Service of the document's EndpointSlice (its
// namespace's, named by its label or by service), zero for another
// object.
func (d document) sliceService() source.ServiceKey {
	slice, ok := d.obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return source.ServiceKey{}
	}
	if d.service != "" {
		return source.ServiceKey{Namespace: slice.Namespace, Name: d.service}
	}
	return source.ServiceKey{Namespace: slice.Namespace, Name: slice.Labels[discoveryv1.LabelServiceName]}
}

// servedCopy is the copy of obj, a document's, that the source serves
// (compact).
func servedCopy(obj source.Named) source.Named {
	if svc, ok := obj.(*model.Service); ok {
		return svc.DeepCopy()
	}
	return obj.(runtime.Object).DeepCopyObject().(source.Named)
}

// key is the key of the document's object.
func (d document) key() objectKey { return keyOf(d.obj) }

// keyOf is the key of obj, one of the types the decoder reads.
func keyOf(obj source.Named) objectKey {
	return objectKey{kind: kindOfType[reflect.TypeOf(obj)], namespace: obj.GetNamespace(), name: obj.GetName()}
}

// problem is a document or file left out. index 0 means the whole file.
type problem struct {
	path   string
	index  int
	reason string
	// failed says the document or file could not be used (it is not YAML,
	// strict decoding refused it, a required field is missing, or the file
	// could not be read), as opposed to one left out by design (a kind the
	// source does not read): readFile then keeps the last good version of
	// what it defined (keepLastGood, lastgood.go).
	failed bool
	// defines is the object a failed document names (its kind,
	// metadata.namespace and metadata.name read leniently), nil when that
	// is unclear (not YAML): then every object of the file's last good
	// version that no good document defines is kept.
	defines *objectKey
}

// decodeManifests splits data into documents and decodes each one. A
// document that cannot be used becomes a problem, whose reason names the
// line of the file it is about, and the others are still returned.
// Documents holding only comments and blank lines are skipped; after
// maxDocuments documents the rest of the file is left out.
func decodeManifests(path string, data []byte, maxDocuments int) ([]document, []problem) {
	var docs []document
	var problems []problem
	split := splitter{data: data}
	index := 0
	for {
		raw, ok := split.next()
		if !ok {
			break
		}
		if raw.err == nil && isEmptyDocument(raw.data) {
			continue
		}
		index++
		if index > maxDocuments {
			problems = append(problems, problem{path: path, index: index,
				reason: fmt.Sprintf("line %d: the file has more than %d documents; this one and the rest are left out", raw.line, maxDocuments)})
			break
		}
		if raw.err != nil {
			// A malformed separator line ended the document.
			problems = append(problems, problem{path: path, index: index, failed: true,
				reason: fmt.Sprintf("line %d: %s; document left out", raw.errLine, shorten(raw.err.Error()))})
			continue
		}
		if items, ok := listItems(raw.data); ok {
			listDocs, listProblems := decodeList(path, index, items)
			docs, problems = append(docs, listDocs...), append(problems, listProblems...)
			continue
		}
		doc, reason, byDesign := decodeDocument(raw.data)
		if reason != "" && bytes.Contains(raw.data, []byte("{{")) {
			reason = "a template, not a manifest ({{ }} is Helm's or Go's): render it first (helm template) and read the output; " + reason
		}
		if reason != "" {
			p := problem{path: path, index: index, reason: locate(raw, reason), failed: !byDesign}
			if p.failed {
				p.defines = identify(raw.data)
			}
			problems = append(problems, p)
			continue
		}
		doc.index = index
		docs = append(docs, doc)
	}
	return docs, problems
}

// isEmptyDocument reports whether a document holds only comments, blank
// lines and a separator (the reader keeps the separator that opens a file).
func isEmptyDocument(raw []byte) bool {
	for line := range bytes.SplitSeq(raw, []byte("\n")) {
		if bytes.HasPrefix(line, []byte("---")) {
			continue
		}
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' {
			return false
		}
	}
	return true
}

// strip drops what restysync never reads from each object decoded, as
// the kube source does from each object it caches (source.Strip), so the
// model sees the same objects from either. A variable only for the test
// that builds the model over objects stripped and not.
var strip = source.Strip

// decodeDocument decodes and checks one document. On failure it returns the
// reason for a Problem, and byDesign when the document is left out because
// it is of a kind or Secret type the source does not read, not because it
// is broken.
func decodeDocument(raw []byte) (doc document, reason string, byDesign bool) {
	if reason := checkAliases(raw); reason != "" {
		return document{}, reason, false
	}
	obj, gvk, err := decodeObject(raw)
	if err != nil {
		reason := decodeErrorReason(err, gvk)
		return document{}, reason, strings.Contains(reason, otherKindNote)
	}
	var (
		kind          source.Kind
		meta          *metav1.ObjectMeta
		clusterScoped bool
		validateName  = validation.IsDNS1123Subdomain
	)
	switch o := obj.(type) {
	case *networkingv1.Ingress:
		kind, meta = source.KindIngress, &o.ObjectMeta
	case *networkingv1.IngressClass:
		kind, meta, clusterScoped = source.KindIngressClass, &o.ObjectMeta, true
	case *corev1.Service:
		kind, meta, validateName = source.KindService, &o.ObjectMeta, validation.IsDNS1035Label
	case *discoveryv1.EndpointSlice:
		kind, meta = source.KindEndpointSlice, &o.ObjectMeta
	case *corev1.ConfigMap:
		kind, meta = source.KindConfigMap, &o.ObjectMeta
	case *corev1.Secret:
		kind, meta = source.KindSecret, &o.ObjectMeta
	case *corev1.Namespace:
		kind, meta, clusterScoped, validateName = source.KindNamespace, &o.ObjectMeta, true, validation.IsDNS1123Label
	case *gatewayv1.GatewayClass:
		kind, meta, clusterScoped = source.KindGatewayClass, &o.ObjectMeta, true
	case *gatewayv1.Gateway:
		kind, meta = source.KindGateway, &o.ObjectMeta
		defaultGateway(o)
	case *gatewayv1.HTTPRoute:
		kind, meta = source.KindHTTPRoute, &o.ObjectMeta
		defaultHTTPRoute(o)
	case *gatewayv1.GRPCRoute:
		kind, meta = source.KindGRPCRoute, &o.ObjectMeta
		defaultParentRefs(o.Spec.ParentRefs)
	case *gatewayv1.TLSRoute:
		kind, meta = source.KindTLSRoute, &o.ObjectMeta
		defaultParentRefs(o.Spec.ParentRefs)
	case *gatewayv1.ReferenceGrant:
		kind, meta = source.KindReferenceGrant, &o.ObjectMeta
	case *gatewayv1.ListenerSet:
		kind, meta = source.KindListenerSet, &o.ObjectMeta
		defaultListenerSet(o)
	case *gatewayv1.BackendTLSPolicy:
		kind, meta = source.KindBackendTLSPolicy, &o.ObjectMeta
	default:
		// Unreachable: the scheme knows only the types above.
		return document{}, fmt.Sprintf("%T is not read; document left out", obj), true
	}

	if meta.Name == "" {
		return document{}, fmt.Sprintf("%s has no metadata.name; document left out", kind), false
	}
	if errs := validateName(meta.Name); len(errs) > 0 {
		return document{}, shorten(fmt.Sprintf("%s metadata.name %q: %s; document left out",
			kind, meta.Name, strings.Join(errs, "; "))), false
	}
	switch {
	case clusterScoped:
		meta.Namespace = "" // as the API server does for cluster-scoped kinds
	case meta.Namespace == "":
		meta.Namespace = metav1.NamespaceDefault // as kubectl does
	default:
		if errs := validation.IsDNS1123Label(meta.Namespace); len(errs) > 0 {
			return document{}, shorten(fmt.Sprintf("%s %s metadata.namespace %q: %s; document left out",
				kind, meta.Name, meta.Namespace, strings.Join(errs, "; "))), false
		}
	}
	strip(obj)
	shareStrings(obj)
	key := objectKey{kind: kind, namespace: meta.Namespace, name: meta.Name}

	if secret, ok := obj.(*corev1.Secret); ok {
		if reason, byDesign := checkSecret(key, secret); reason != "" {
			return document{}, reason, byDesign
		}
	}
	if svc, ok := obj.(*corev1.Service); ok {
		// What the stages read of it, from here on.
		return document{obj: model.ServiceOf(svc)}, "", false
	}
	return document{obj: obj.(source.Named)}, "", false // every type of the switch is
}

// checkSecret accepts TLS Secrets and Opaque ones (the htpasswd of basic
// auth), and folds stringData into data as the API server does, so
// hand-written manifests may use plain PEM or htpasswd text.
// It also says whether a refused Secret is of a type the source does not
// read (byDesign) rather than a broken one.
func checkSecret(key objectKey, secret *corev1.Secret) (reason string, byDesign bool) {
	if secret.Type == "" {
		secret.Type = corev1.SecretTypeOpaque // the API server's default
	}
	if secret.Type != corev1.SecretTypeTLS && secret.Type != corev1.SecretTypeOpaque {
		return fmt.Sprintf("%s has type %q: only kubernetes.io/tls and Opaque Secrets are read; document left out", key, secret.Type), true
	}
	if len(secret.StringData) > 0 {
		if secret.Data == nil {
			secret.Data = make(map[string][]byte, len(secret.StringData))
		}
		for k, v := range secret.StringData {
			secret.Data[k] = []byte(v)
		}
		secret.StringData = nil
	}
	if secret.Type == corev1.SecretTypeOpaque {
		return "", false
	}
	for _, k := range []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey} {
		if _, ok := secret.Data[k]; !ok {
			return fmt.Sprintf("%s has no %q in data or stringData; document left out", key, k), false
		}
	}
	return "", false
}

// decodeErrorReason turns a decoder error into a short sentence. Some
// apimachinery errors quote the whole document; those are replaced.
func decodeErrorReason(err error, gvk *schema.GroupVersionKind) string {
	switch {
	case runtime.IsMissingKind(err):
		return "kind is not set; document left out"
	case runtime.IsMissingVersion(err):
		return "apiVersion is not set; document left out"
	case strings.HasPrefix(err.Error(), "couldn't get version/kind"):
		// The document is a list, a scalar, or has a non-string kind.
		return "not an object with string fields apiVersion and kind; document left out"
	case runtime.IsNotRegisteredError(err) && gvk != nil && gvk.Kind == "Ingress":
		return fmt.Sprintf("Ingress of apiVersion %q is not read: that API was removed in Kubernetes 1.22; "+
			"write it as networking.k8s.io/v1 (pathType, backend.service.name, backend.service.port.number); document left out",
			shorten(gvk.GroupVersion().String()))
	case runtime.IsNotRegisteredError(err) && gvk != nil && readKinds[gvk.Kind] != "":
		return fmt.Sprintf("%s of apiVersion %q is not read: the file source reads it as %s; document left out",
			gvk.Kind, shorten(gvk.GroupVersion().String()), readKinds[gvk.Kind])
	case runtime.IsNotRegisteredError(err) && gvk != nil:
		return fmt.Sprintf("kind %q of apiVersion %q %s; document left out",
			shorten(gvk.Kind), shorten(gvk.GroupVersion().String()), otherKindNote)
	case strings.Contains(err.Error(), "of type v1.ServiceBackendPort"):
		// "port: 80" where networking.k8s.io/v1 wants an object.
		return "a backend's service.port is written as a number or a name (port: 80); networking.k8s.io/v1 wants " +
			"port: {number: 80} or port: {name: http}; document left out"
	default:
		return shorten(err.Error()) + "; document left out"
	}
}

// shorten cuts s to maxReasonLen bytes on a UTF-8 boundary.
func shorten(s string) string {
	if len(s) <= maxReasonLen {
		return s
	}
	cut := maxReasonLen
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
