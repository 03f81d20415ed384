package model

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// TLS from nginx to the backends of Gateway routes: BackendTLSPolicies
// (the CAs and the name a Service's certificate is checked against) and a
// Gateway's client certificate (spec.tls.backend.clientCertificateRef).
//
// nginx checks a backend's certificate with a CA file it reads when it
// loads its config, per location; so each distinct (CAs, hostname) is a
// BackendTLS: one named location in every Gateway server, which render
// writes and a WeightedBackend names (its TLS). A new route to a Service
// whose policy already has its location is a push; a new policy, a new
// hostname or new CA content is a new location and a reload, as a rotated
// CA is on the Ingress side (proxyssl.go). The Gateway's client
// certificate is its listeners' (Listener.BackendCertFile), so every
// Gateway server presents its own, and nginx keeps the idle connections
// of each (location, certificate) apart.
//
// A policy that cannot be used (no valid CA, a field restysync does not
// support) fails its Service's shares closed (500) rather than send the
// request unchecked; of two policies for the same Service (and section),
// the older wins and the other is Conflicted, as GEP-713 says. The CAs
// are ConfigMaps of the policy's own namespace, read by name: a policy
// cannot name another namespace's (LocalObjectReference).

// BackendTLS is one setting of TLS to Gateway backends: render writes the
// named location Name in every Gateway server, which proxies over TLS and
// checks the backend's certificate against CAFile and ServerName.
type BackendTLS struct {
	// Name is the named location, "@restysync_btls_<hash>" of the rest.
	Name string `json:"name"`
	// CAFile is a file under the shared dir (Model.AuthFiles).
	CAFile string `json:"ca_file"`
	// ServerName is sent by SNI and checked in the certificate.
	ServerName string `json:"server_name"`
}

// BackendTLSPrefix starts every BackendTLS.Name; Lua checks it.
const BackendTLSPrefix = "@restysync_btls_"

const (
	kindBackendTLSPolicy = "BackendTLSPolicy"

	// NoValidCACertificate and InvalidCACertificateRef are
	// gatewayfrontend.go's, the same words.
	reasonConflicted           = string(gatewayv1.PolicyReasonConflicted)
	reasonInvalidKind          = string(gatewayv1.BackendTLSPolicyReasonInvalidKind)
	reasonInvalidClientCertRef = string(gatewayv1.GatewayReasonInvalidClientCertificateRef)
	reasonListenersNotResolved = string(gatewayv1.GatewayReasonListenersNotResolved)

	// maxPolicyAncestors is the most entries status.ancestors may hold.
	maxPolicyAncestors = 16
	// maxPolicyCARefs and maxPolicyTargets bound a policy as the CRD does.
	maxPolicyCARefs  = 8
	maxPolicyTargets = 16
)

// backendTLSPolicy is one BackendTLSPolicy while it is processed.
type backendTLSPolicy struct {
	policy *gatewayv1.BackendTLSPolicy
	// accepted and resolved are its conditions (Conflicted is set per
	// target, in conflicted).
	accepted, resolved Condition
	conflicted         bool
	// tls is what its Services' shares use when it is accepted.
	tls *BackendTLS
	// ancestors are the Gateways of the routes that send to its targets.
	ancestors map[*gatewayState]bool
}

// backendTLSTarget is what a policy applies to: a Service of its
// namespace, and a port name ("" for every port).
type backendTLSTarget struct {
	namespace, service, section string
}

// processBackendTLSPolicies reads every BackendTLSPolicy, oldest first:
// its targets (the older policy of two on one target wins), its CAs and
// its hostname.
func (p *gatewayProcessor) processBackendTLSPolicies() {
	policies := p.source.BackendTLSPolicies.Slice()
	slices.SortFunc(policies, compareObjects[*gatewayv1.BackendTLSPolicy])
	p.tlsTargets = make(map[backendTLSTarget][]*backendTLSPolicy)
	for _, policy := range policies {
		if len(validation.IsDNS1123Label(policy.Namespace)) > 0 || len(validation.IsDNS1123Subdomain(policy.Name)) > 0 {
			p.problem(kindBackendTLSPolicy, policy.Namespace, policy.Name, fmt.Sprintf("metadata: namespace %q or name %q is not a Kubernetes name; the policy is left out", clip(policy.Namespace), clip(policy.Name)))
			continue
		}
		bp := &backendTLSPolicy{policy: policy, ancestors: map[*gatewayState]bool{}}
		p.checkBackendTLSPolicy(bp)
		targets := policy.Spec.TargetRefs
		if len(targets) > maxPolicyTargets {
			p.problem(kindBackendTLSPolicy, policy.Namespace, policy.Name, fmt.Sprintf("spec.targetRefs: has %d entries, more than %d; only the first %d are read", len(targets), maxPolicyTargets, maxPolicyTargets))
			targets = targets[:maxPolicyTargets]
		}
		for _, ref := range targets {
			if ref.Group != "" || ref.Kind != "Service" {
				continue // not a target restysync sends to
			}
			t := backendTLSTarget{namespace: policy.Namespace, service: string(ref.Name)}
			if ref.SectionName != nil {
				t.section = string(*ref.SectionName)
			}
			if held := p.tlsTargets[t]; len(held) > 0 && held[0] != bp {
				bp.conflicted = true
				p.problem(kindBackendTLSPolicy, policy.Namespace, policy.Name, fmt.Sprintf("spec.targetRefs: Service %s (section %q) is already the target of the older BackendTLSPolicy %s; this one is not used there", t.service, t.section, held[0].policy.Name))
			}
			if !slices.Contains(p.tlsTargets[t], bp) {
				p.tlsTargets[t] = append(p.tlsTargets[t], bp)
			}
		}
	}
}

// checkBackendTLSPolicy sets bp's Accepted and ResolvedRefs conditions
// from its validation, and its BackendTLS when it can be used.
func (p *gatewayProcessor) checkBackendTLSPolicy(bp *backendTLSPolicy) {
	policy := bp.policy
	v := &policy.Spec.Validation
	bp.accepted = condition(condAccepted, true, reasonAccepted, "")
	bp.resolved = condition(condResolvedRefs, true, reasonResolvedRefs, "")
	refuse := func(reason, msg string) {
		p.problem(kindBackendTLSPolicy, policy.Namespace, policy.Name, msg+"; requests to its Services answer 500")
		bp.accepted = condition(condAccepted, false, reason, msg)
	}
	switch {
	case len(v.SubjectAltNames) > 0:
		refuse(reasonInvalid, "spec.validation.subjectAltNames: is not supported (nginx checks one name, the hostname)")
		return
	case v.WellKnownCACertificates != nil:
		refuse(reasonInvalid, fmt.Sprintf("spec.validation.wellKnownCACertificates %q: is not supported; name the CAs in caCertificateRefs", clip(string(*v.WellKnownCACertificates))))
		return
	case len(policy.Spec.Options) > 0:
		refuse(reasonInvalid, "spec.options: restysync knows no option")
		return
	case len(v.CACertificateRefs) > maxPolicyCARefs:
		refuse(reasonInvalid, fmt.Sprintf("spec.validation.caCertificateRefs: has %d entries, more than %d", len(v.CACertificateRefs), maxPolicyCARefs))
		return
	}
	hostname := string(v.Hostname)
	if reason := validHost(hostname); reason != "" || strings.HasPrefix(hostname, "*") {
		if reason == "" {
			reason = "must not be a wildcard"
		}
		refuse(reasonInvalid, fmt.Sprintf("spec.validation.hostname %q: %s", clip(hostname), reason))
		return
	}
	var bundle []byte
	for i, ref := range v.CACertificateRefs {
		field := fmt.Sprintf("spec.validation.caCertificateRefs[%d]", i)
		unresolved := func(reason, msg string) {
			p.problem(kindBackendTLSPolicy, policy.Namespace, policy.Name, field+": "+msg+"; that CA is left out")
			if bp.resolved.Status {
				bp.resolved = condition(condResolvedRefs, false, reason, field+": "+msg)
			}
		}
		if ref.Group != "" || ref.Kind != "ConfigMap" {
			unresolved(reasonInvalidKind, fmt.Sprintf("%s/%s is not a ConfigMap", clip(string(ref.Group)), clip(string(ref.Kind))))
			continue
		}
		cm := p.configMap(policy.Namespace, string(ref.Name))
		if cm == nil {
			unresolved(reasonInvalidCACertificateRef, fmt.Sprintf("ConfigMap %s/%s not found", policy.Namespace, clip(string(ref.Name))))
			continue
		}
		ca, ok := cm.Data["ca.crt"]
		if !ok {
			unresolved(reasonInvalidCACertificateRef, fmt.Sprintf("ConfigMap %s/%s has no key ca.crt", policy.Namespace, cm.Name))
			continue
		}
		if reason := checkCABundle([]byte(ca)); reason != "" {
			unresolved(reasonInvalidCACertificateRef, fmt.Sprintf("ConfigMap %s/%s key ca.crt %s", policy.Namespace, cm.Name, reason))
			continue
		}
		bundle = append(bundle, strings.TrimSpace(ca)+"\n"...)
	}
	if len(bundle) == 0 {
		msg := "no CA certificate in spec.validation.caCertificateRefs is usable"
		if !bp.resolved.Status {
			msg = bp.resolved.Message
		}
		refuse(reasonNoValidCACertificate, msg)
		return
	}
	caFile := p.secretFile(policy.Namespace, policy.Name, "ca.crt", bundle)
	sum := sha256.Sum256([]byte(caFile + "\n" + hostname))
	bp.tls = &BackendTLS{Name: BackendTLSPrefix + hex.EncodeToString(sum[:12]), CAFile: caFile, ServerName: hostname}
}

// backendTLSPolicies returns the policies that target Service
// namespace/service on port (a number): those of the port's name, then
// those of the whole Service; the first is the one that applies.
func (p *gatewayProcessor) backendTLSPolicies(namespace, service string, port int32) []*backendTLSPolicy {
	if len(p.tlsTargets) == 0 {
		return nil
	}
	var section string
	if svc := p.service(namespace, service); svc != nil {
		for _, sp := range svc.Ports {
			if sp.Port == port {
				section = sp.Name
			}
		}
	}
	var out []*backendTLSPolicy
	if section != "" {
		out = append(out, p.tlsTargets[backendTLSTarget{namespace, service, section}]...)
	}
	return append(out, p.tlsTargets[backendTLSTarget{namespace, service, ""}]...)
}

// applyBackendTLS gives share the TLS of the policy that applies to its
// Service port, or takes its backend away (500) when that policy cannot
// be used. It returns every policy that targets it (for their ancestors).
func (p *gatewayProcessor) applyBackendTLS(share *WeightedBackend, namespace, service string, port int32) []*backendTLSPolicy {
	policies := p.backendTLSPolicies(namespace, service, port)
	if len(policies) == 0 {
		return nil
	}
	if first := policies[0]; first.accepted.Status && first.tls != nil {
		share.TLS = first.tls.Name
		p.backendTLS[first.tls.Name] = *first.tls
	} else {
		share.Backend = ""
	}
	return policies
}

// backendTLSStatus returns the status of each policy some route of a
// Gateway of ours sends through: one ancestor per such Gateway.
func (p *gatewayProcessor) backendTLSStatus() []*RouteStatus {
	seen := map[*backendTLSPolicy]bool{}
	var out []*RouteStatus
	for _, policies := range p.tlsTargets {
		for _, bp := range policies {
			if seen[bp] || len(bp.ancestors) == 0 {
				continue
			}
			seen[bp] = true
			accepted := bp.accepted
			if bp.conflicted && accepted.Status {
				accepted = condition(condAccepted, false, reasonConflicted, "an older BackendTLSPolicy targets the same Service and section")
			}
			st := RouteStatus{Kind: kindBackendTLSPolicy, Namespace: bp.policy.Namespace, Name: bp.policy.Name, Generation: bp.policy.Generation}
			for g := range bp.ancestors {
				st.Parents = append(st.Parents, RouteParentStatus{Namespace: g.gw.Namespace, Name: g.gw.Name, Conditions: []Condition{accepted, bp.resolved}})
			}
			slices.SortFunc(st.Parents, func(a, b RouteParentStatus) int {
				return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
			})
			if len(st.Parents) > maxPolicyAncestors {
				st.Parents = st.Parents[:maxPolicyAncestors]
			}
			out = append(out, &st)
		}
	}
	return out
}

// checkBackendClientCertificate reads g's spec.tls.backend: the client
// certificate its servers present to TLS backends: its files, and the
// condition gatewayResolvedRefs starts from (nil when it names none).
func (p *gatewayProcessor) checkBackendClientCertificate(g *gatewayState) {
	if g.gw.Spec.TLS == nil || g.gw.Spec.TLS.Backend == nil || g.gw.Spec.TLS.Backend.ClientCertificateRef == nil {
		return
	}
	ref := g.gw.Spec.TLS.Backend.ClientCertificateRef
	field := "spec.tls.backend.clientCertificateRef"
	unresolved := func(reason, msg string) {
		p.gatewayProblem(g, field+": "+msg+"; no client certificate is sent to backends")
		c := condition(condResolvedRefs, false, reason, field+": "+msg)
		g.backendCertRefs = &c
	}
	group, kind := "", "Secret"
	if ref.Group != nil {
		group = string(*ref.Group)
	}
	if ref.Kind != nil {
		kind = string(*ref.Kind)
	}
	namespace := g.gw.Namespace
	if ref.Namespace != nil && *ref.Namespace != "" {
		namespace = string(*ref.Namespace)
	}
	name := string(ref.Name)
	switch {
	case group != "" || kind != "Secret":
		unresolved(reasonInvalidClientCertRef, fmt.Sprintf("%s/%s is not a Secret", clip(group), clip(kind)))
		return
	case len(validation.IsDNS1123Subdomain(name)) > 0 || len(validation.IsDNS1123Label(namespace)) > 0:
		unresolved(reasonInvalidClientCertRef, fmt.Sprintf("%q in namespace %q is not a Secret name", clip(name), clip(namespace)))
		return
	case namespace != g.gw.Namespace && !p.granted(gatewayGroup, kindGateway, g.gw.Namespace, "", "Secret", namespace, name):
		unresolved(reasonRefNotPermitted, fmt.Sprintf("Secret %s/%s is in another namespace and no ReferenceGrant there allows it", namespace, name))
		return
	}
	secret := p.secret(namespace, name)
	if secret == nil {
		unresolved(reasonInvalidClientCertRef, fmt.Sprintf("Secret %s/%s not found", namespace, name))
		return
	}
	if reason := clientCertificateReason(secret); reason != "" {
		unresolved(reasonInvalidClientCertRef, fmt.Sprintf("Secret %s/%s %s", namespace, name, reason))
		return
	}
	g.backendCert = p.secretFile(namespace, name, "tls.crt", secret.Data[corev1.TLSCertKey])
	g.backendKey = p.secretFile(namespace, name, "tls.key", secret.Data[corev1.TLSPrivateKeyKey])
	c := condition(condResolvedRefs, true, reasonResolvedRefs, "")
	g.backendCertRefs = &c
}

// clientCertificateReason returns why secret does not hold a client
// certificate and its key (tls.crt, tls.key), or "".
func clientCertificateReason(secret *corev1.Secret) string {
	cert, hasCert := secret.Data[corev1.TLSCertKey]
	key, hasKey := secret.Data[corev1.TLSPrivateKeyKey]
	switch {
	case !hasCert || !hasKey:
		return "has no tls.crt and tls.key"
	case len(cert)+len(key) > maxSecretFile:
		return "holds a tls.crt and tls.key larger than 1 MiB"
	}
	if _, err := tls.X509KeyPair(cert, key); err != nil {
		return "holds a tls.crt and tls.key that are not a certificate and its key"
	}
	if reason := checkCABundle(cert); reason != "" {
		return "key tls.crt " + reason
	}
	return ""
}

// BackendTLSConfigMapRefs returns the ConfigMaps policy names as CAs
// (caCertificateRefs of kind ConfigMap): the kube source reads each by
// name, in the policy's own namespace only.
func BackendTLSConfigMapRefs(policy *gatewayv1.BackendTLSPolicy) []types.NamespacedName {
	var refs []types.NamespacedName
	for _, ref := range policy.Spec.Validation.CACertificateRefs {
		if ref.Group != "" || ref.Kind != "ConfigMap" || len(validation.IsDNS1123Subdomain(string(ref.Name))) > 0 {
			continue
		}
		r := types.NamespacedName{Namespace: policy.Namespace, Name: string(ref.Name)}
		if !slices.Contains(refs, r) {
			refs = append(refs, r)
		}
	}
	return refs
}
