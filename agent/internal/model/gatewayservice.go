package model

// Gateway Services, the GatewayInfrastructure feature: with
// Snapshot.GatewayServices, each accepted Gateway of ours gets one Service
// in its namespace, named GatewayServiceName(gateway), that tenants can use
// to reach it. It has no selector (one cannot reach the proxy pods, which
// are in the agent's namespace and serve every Gateway), one TCP port per
// distinct port of the Gateway's listeners, and an EndpointSlice per
// address family listing the addresses the Gateway is served on (its
// status.addresses; those an EndpointSlice may not hold, such as loopback
// ones, left out). Both carry the Gateway's spec.infrastructure labels and
// annotations, the gateway-name label and a controller ownerReference to
// the Gateway, so the garbage collector deletes them with it.
//
// Why the model decides: a Service of that name that is not ours (a clash)
// and an infrastructure key that would forge who manages the objects are
// Problems on the Gateway like any other (inspect shows them, Events carry
// them), and the Gateway keeps serving. The leader's status writer
// (agent/internal/status) only creates, updates and deletes what the model
// says, and checks ownership again before each write. Ownership is the UID
// of the controller ownerReference, never a label: a tenant can write
// labels.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// FeatureGatewayInfrastructure is declared in supportedFeatures when
// Snapshot.GatewayServices is set.
const FeatureGatewayInfrastructure = "GatewayInfrastructure"

// The labels of a Gateway Service and its EndpointSlices besides the
// Gateway's spec.infrastructure.labels.
const (
	// GatewayServiceManagedByLabel is GatewayServiceManagedBy on every
	// Gateway Service and EndpointSlice: the writer lists them by it (and
	// then judges each by its ownerReference).
	GatewayServiceManagedByLabel = "app.kubernetes.io/managed-by"
	GatewayServiceManagedBy      = "restysync"
	// GatewayNameLabel is the Gateway's name (the spec's label; left out
	// of a Gateway whose name is longer than a label value may be).
	GatewayNameLabel = gatewayv1.GatewayNameLabelKey
	// GatewayServiceSliceManager is the EndpointSlices' managed-by
	// (discoveryv1.LabelManagedBy): not the EndpointSlice controller's, so
	// it leaves them alone.
	GatewayServiceSliceManager = "gateway-services.restysync.io"
)

// gatewayServiceSuffix ends every Gateway Service's name.
const gatewayServiceSuffix = "-restysync"

// GatewayService is the Service the leader keeps for one accepted
// Gateway, with its EndpointSlices.
type GatewayService struct {
	Namespace  string `json:"namespace"`
	Gateway    string `json:"gateway"`
	GatewayUID string `json:"gateway_uid"`
	// Name is GatewayServiceName(Gateway).
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations,omitempty"`
	// Ports are the distinct ports of the Gateway's listeners, sorted.
	Ports  []int32               `json:"ports,omitempty"`
	Slices []GatewayServiceSlice `json:"slices,omitempty"`
}

// GatewayServiceSlice is one EndpointSlice of a GatewayService: the
// Gateway's addresses of one family.
type GatewayServiceSlice struct {
	Name        string   `json:"name"`
	AddressType string   `json:"address_type"` // discoveryv1.AddressTypeIPv4 or IPv6
	Addresses   []string `json:"addresses"`
}

// GatewayServicePortName names the Service's (and EndpointSlices') port.
func GatewayServicePortName(port int32) string { return fmt.Sprintf("tcp-%d", port) }

// GatewayServiceName is the name of the Service of the Gateway named
// gateway: gateway + "-restysync" when that is a DNS label (what a
// Service's name must be), else the name cut, its dots made dashes, with
// 8 hex digits of its SHA-256, so two Gateways of one namespace never
// share it by accident.
func GatewayServiceName(gateway string) string {
	name := gateway + gatewayServiceSuffix
	if gateway != "" && isLowerLetter(gateway[0]) && !strings.Contains(gateway, ".") && len(name) <= validation.DNS1035LabelMaxLength {
		return name
	}
	sum := sha256.Sum256([]byte(gateway))
	tag := "-" + hex.EncodeToString(sum[:4]) + gatewayServiceSuffix
	base := strings.ReplaceAll(gateway, ".", "-")
	if base == "" || !isLowerLetter(base[0]) {
		base = "gw-" + base
	}
	base = strings.TrimRight(base[:min(len(base), validation.DNS1035LabelMaxLength-len(tag))], "-")
	return base + tag
}

func isLowerLetter(c byte) bool { return c >= 'a' && c <= 'z' }

// ControllerGateway returns obj's controller ownerReference when it is a
// Gateway, nil otherwise.
func ControllerGateway(obj metav1.Object) *metav1.OwnerReference {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil || ref.Kind != kindGateway || !strings.HasPrefix(ref.APIVersion, gatewayGroup+"/") {
		return nil
	}
	return ref
}

// OwnedByGateway says whether obj's controller is the Gateway whose UID
// is uid.
func OwnedByGateway(obj metav1.Object, uid types.UID) bool {
	ref := ControllerGateway(obj)
	return ref != nil && uid != "" && ref.UID == uid
}

// reservedLabels are the label keys a Gateway's spec.infrastructure may
// not set, and why.
var reservedLabels = map[string]string{
	GatewayServiceManagedByLabel: "marks the objects restysync manages",
	discoveryv1.LabelServiceName: "ties an EndpointSlice to its Service",
	discoveryv1.LabelManagedBy:   "names the controller of an EndpointSlice",
}

// gatewayServices gives the status the Service of each accepted Gateway,
// oldest first: the oldest keeps a name two Gateways would share.
func (p *gatewayProcessor) gatewayServices(statuses map[*gatewayState]GatewayStatus) {
	if !p.source.GatewayServices {
		return
	}
	claimed := map[namespacedName]string{} // Service → the Gateway it is for
	for _, g := range p.gateways {
		if !g.accepted.Status {
			continue
		}
		name := GatewayServiceName(g.gw.Name)
		key := namespacedName{g.gw.Namespace, name}
		if other, taken := claimed[key]; taken {
			p.gatewayProblem(g, fmt.Sprintf("spec.infrastructure: the Gateway's Service %s is that of the older Gateway %s; restysync keeps no Service for this one", name, other))
			continue
		}
		if svc := p.service(g.gw.Namespace, name); svc != nil && !svc.OwnedByGateway(g.gw.UID) {
			p.gatewayProblem(g, fmt.Sprintf("spec.infrastructure: Service %s exists and is not this Gateway's (its controller ownerReference does not name it); restysync leaves it alone and keeps no Service for the Gateway while it exists", name))
			continue
		}
		claimed[key] = g.gw.Name
		p.status.Services = append(p.status.Services, p.gatewayService(g, name, statuses[g].Addresses))
	}
}

// gatewayService is the Service of g, named name, for its addresses.
func (p *gatewayProcessor) gatewayService(g *gatewayState, name string, addresses []string) GatewayService {
	s := GatewayService{Namespace: g.gw.Namespace, Gateway: g.gw.Name, GatewayUID: string(g.gw.UID), Name: name,
		Labels: map[string]string{}}
	if infra := g.gw.Spec.Infrastructure; infra != nil {
		for _, k := range slices.Sorted(maps.Keys(infra.Labels)) {
			key, value := string(k), string(infra.Labels[k])
			if why := p.refusedLabel(g, key, value); why != "" {
				p.gatewayProblem(g, fmt.Sprintf("spec.infrastructure.labels[%q]: %s; the label is left out of the Gateway's Service", clip(key), why))
				continue
			}
			s.Labels[key] = value
		}
		for _, k := range slices.Sorted(maps.Keys(infra.Annotations)) {
			key, value := string(k), string(infra.Annotations[k])
			if why := refusedAnnotation(key); why != "" {
				p.gatewayProblem(g, fmt.Sprintf("spec.infrastructure.annotations[%q]: %s; the annotation is left out of the Gateway's Service", clip(key), why))
				continue
			}
			if s.Annotations == nil {
				s.Annotations = map[string]string{}
			}
			s.Annotations[key] = value
		}
	}
	s.Labels[GatewayServiceManagedByLabel] = GatewayServiceManagedBy
	if len(validation.IsValidLabelValue(g.gw.Name)) == 0 {
		s.Labels[GatewayNameLabel] = g.gw.Name
	}
	for _, l := range g.gw.Spec.Listeners {
		if port := int32(l.Port); port >= 1 && port <= 65535 && !slices.Contains(s.Ports, port) {
			s.Ports = append(s.Ports, port)
		}
	}
	slices.Sort(s.Ports)
	byFamily := map[string][]string{}
	for _, a := range addresses {
		addr, err := netip.ParseAddr(a)
		if err != nil || !endpointAddress(addr) {
			continue
		}
		family := discoveryv1.AddressTypeIPv4
		if addr.Is6() {
			family = discoveryv1.AddressTypeIPv6
		}
		byFamily[string(family)] = append(byFamily[string(family)], addr.String())
	}
	for _, family := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
		if list := byFamily[string(family)]; len(list) > 0 {
			s.Slices = append(s.Slices, GatewayServiceSlice{Name: name + "-" + strings.ToLower(string(family)), AddressType: string(family), Addresses: list})
		}
	}
	return s
}

// refusedLabel says why g's spec.infrastructure may not set the label,
// "" when it may.
func (p *gatewayProcessor) refusedLabel(g *gatewayState, key, value string) string {
	if why, reserved := reservedLabels[key]; reserved {
		return "the key is restysync's: it " + why
	}
	if key == GatewayNameLabel && value != g.gw.Name {
		return "the key names the Gateway the Service is for, and the value is not this Gateway's name"
	}
	if restysyncKey(key) {
		return "the restysync.io prefix is restysync's"
	}
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return "not a label key: " + strings.Join(errs, "; ")
	}
	if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
		return "not a label value: " + strings.Join(errs, "; ")
	}
	return ""
}

// refusedAnnotation says why a Gateway's spec.infrastructure may not set
// the annotation key, "" when it may.
func refusedAnnotation(key string) string {
	if restysyncKey(key) {
		return "the restysync.io prefix is restysync's"
	}
	if errs := validation.IsQualifiedName(strings.ToLower(key)); len(errs) > 0 {
		return "not an annotation key: " + strings.Join(errs, "; ")
	}
	return ""
}

// restysyncKey says whether key has the prefix restysync.io or a
// subdomain of it.
func restysyncKey(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	return ok && (prefix == "restysync.io" || strings.HasSuffix(prefix, ".restysync.io"))
}

// endpointAddress says whether an EndpointSlice may list addr: the API
// refuses unspecified, loopback and link-local ones.
func endpointAddress(addr netip.Addr) bool {
	return !addr.IsUnspecified() && !addr.IsLoopback() && !addr.IsLinkLocalUnicast() && !addr.IsLinkLocalMulticast()
}
