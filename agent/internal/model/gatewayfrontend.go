package model

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Client certificates on a Gateway's HTTPS listeners (spec.tls.frontend):
// the validation of a port is its perPort entry's, else the default's,
// and it holds for every HTTPS listener on that port. A Gateway has
// addresses of its own, so one of its ports is one server block
// (Listener), and nginx checks client certificates per server block
// (ssl_verify_client), as it does for an Ingress host with auth-tls-*: the
// same ClientTLS, without the Ingress's headers, error page or CRL.
//
// Each CA reference must be a core ConfigMap (the spec's Core support) or
// Secret with a PEM bundle under ca.crt, in the Gateway's namespace or
// granted by a ReferenceGrant. The valid ones make one bundle; any bad one
// makes ResolvedRefs false on the port's HTTPS listeners, and when none
// is valid they are not accepted (NoValidCACertificate) and not served:
// they never serve without the check they were given.

// Condition types and reasons of client certificate validation, as the
// spec names them.
const (
	condInsecureFrontendValidationMode = "InsecureFrontendValidationMode"

	reasonConfigurationChanged     = "ConfigurationChanged"
	reasonNoValidCACertificate     = "NoValidCACertificate"
	reasonInvalidCACertificateRef  = "InvalidCACertificateRef"
	reasonInvalidCACertificateKind = "InvalidCACertificateKind"
)

// gatewayVerifyDepth is the ssl_verify_depth of a Gateway's client
// certificates: a chain of the client's certificate and up to four
// intermediates below a CA of the bundle. The spec leaves the depth to
// the implementation; nginx's default (1) would refuse every
// intermediate.
const gatewayVerifyDepth = 5

// maxCACertificateRefs bounds a validation's caCertificateRefs, as the
// CRD does.
const maxCACertificateRefs = 16

// frontendCheck is what the validation of one port of a Gateway came to.
type frontendCheck struct {
	// clientTLS is what the port's server checks; nil when it checks
	// nothing (no validation) or nothing is valid.
	clientTLS *ClientTLS
	// resolved is ResolvedRefs=False with the first bad reference's
	// reason, nil when every reference resolved.
	resolved *Condition
	// refused is Accepted=False (no valid CA, or a mode not supported),
	// nil when the port's HTTPS listeners may be served.
	refused *Condition
}

// frontendValidation returns the validation of port on g: its perPort
// entry's (the first, should the CRD's uniqueness check not have run),
// else the default's; nil when there is none.
func frontendValidation(g *gatewayv1.Gateway, port gatewayv1.PortNumber) (*gatewayv1.FrontendTLSValidation, string) {
	if g.Spec.TLS == nil || g.Spec.TLS.Frontend == nil {
		return nil, ""
	}
	f := g.Spec.TLS.Frontend
	for i, pp := range f.PerPort {
		if pp.Port == port {
			return pp.TLS.Validation, fmt.Sprintf("spec.tls.frontend.perPort[%d]", i)
		}
	}
	return f.Default.Validation, "spec.tls.frontend.default"
}

// insecureFrontend returns the fields of g's spec.tls.frontend that allow
// an insecure fallback, for the InsecureFrontendValidationMode condition.
func insecureFrontend(g *gatewayv1.Gateway) []string {
	if g.Spec.TLS == nil || g.Spec.TLS.Frontend == nil {
		return nil
	}
	var fields []string
	f := g.Spec.TLS.Frontend
	if v := f.Default.Validation; v != nil && v.Mode == gatewayv1.AllowInsecureFallback {
		fields = append(fields, "default")
	}
	for _, pp := range f.PerPort {
		if v := pp.TLS.Validation; v != nil && v.Mode == gatewayv1.AllowInsecureFallback {
			fields = append(fields, "perPort "+strconv.Itoa(int(pp.Port)))
		}
	}
	return fields
}

// insecureFrontendCondition is g's InsecureFrontendValidationMode
// condition, nil when no validation allows an insecure fallback (the
// spec removes the condition then).
func insecureFrontendCondition(g *gatewayv1.Gateway) *Condition {
	fields := insecureFrontend(g)
	if len(fields) == 0 {
		return nil
	}
	c := condition(condInsecureFrontendValidationMode, true, reasonConfigurationChanged,
		fmt.Sprintf("spec.tls.frontend (%s): AllowInsecureFallback lets clients without a valid certificate through", strings.Join(fields, ", ")))
	return &c
}

// checkFrontend resolves the client certificate validation of port on g
// once per port; every HTTPS listener on the port shares the result.
func (p *gatewayProcessor) checkFrontend(g *gatewayState, port gatewayv1.PortNumber) frontendCheck {
	if c, ok := g.frontend[port]; ok {
		return c
	}
	c := p.resolveFrontend(g, port)
	if g.frontend == nil {
		g.frontend = map[gatewayv1.PortNumber]frontendCheck{}
	}
	g.frontend[port] = c
	return c
}

func (p *gatewayProcessor) resolveFrontend(g *gatewayState, port gatewayv1.PortNumber) frontendCheck {
	v, field := frontendValidation(g.gw, port)
	if v == nil {
		return frontendCheck{}
	}
	var c frontendCheck
	refuse := func(reason, msg string) frontendCheck {
		p.gatewayProblem(g, fmt.Sprintf("%s: %s; the HTTPS listeners on port %d are not served", field, msg, port))
		cond := condition(condAccepted, false, reason, msg)
		c.refused = &cond
		c.clientTLS = nil
		return c
	}
	verify := ""
	switch v.Mode {
	case "", gatewayv1.AllowValidOnly:
		verify = "on"
	case gatewayv1.AllowInsecureFallback:
		verify = "optional_no_ca"
	default:
		return refuse(reasonUnsupportedValue, fmt.Sprintf("validation.mode %q is not supported; AllowValidOnly and AllowInsecureFallback are", clip(string(v.Mode))))
	}
	if n := len(v.CACertificateRefs); n == 0 || n > maxCACertificateRefs {
		return refuse(reasonNoValidCACertificate, fmt.Sprintf("validation.caCertificateRefs: has %d references; 1 to %d are allowed", n, maxCACertificateRefs))
	}
	var bundle bytes.Buffer
	var bad []string
	for i, ref := range v.CACertificateRefs {
		ca, reason, msg := p.caCertificate(g, ref)
		if reason != "" {
			msg = fmt.Sprintf("validation.caCertificateRefs[%d]: %s", i, msg)
			bad = append(bad, msg)
			if c.resolved == nil {
				cond := condition(condResolvedRefs, false, reason, msg)
				c.resolved = &cond
			}
			continue
		}
		bundle.Write(ca)
		if !bytes.HasSuffix(ca, []byte("\n")) {
			bundle.WriteByte('\n')
		}
	}
	if len(bad) > 0 {
		c.resolved.Message = clipReason(strings.Join(bad, "; "))
	}
	if bundle.Len() == 0 {
		return refuse(reasonNoValidCACertificate, "no CA certificate reference is valid: "+strings.Join(bad, "; "))
	}
	if len(bad) > 0 {
		p.gatewayProblem(g, fmt.Sprintf("%s: %s; the valid ones are used", field, strings.Join(bad, "; ")))
	}
	// The file's name is the namespace's and the bundle's hash: bounded
	// whatever the Gateway's name, and the same bundle is one file.
	c.clientTLS = &ClientTLS{CAFile: p.secretFile(g.gw.Namespace, "gateway-ca", "ca.crt", bundle.Bytes()), Verify: verify, Depth: gatewayVerifyDepth}
	return c
}

// caCertificate returns the CA bundle ref names (ca.crt of a ConfigMap or
// Secret), or the spec's reason it cannot be used and why.
func (p *gatewayProcessor) caCertificate(g *gatewayState, ref gatewayv1.ObjectReference) (ca []byte, reason, msg string) {
	group, kind := string(ref.Group), string(ref.Kind)
	namespace := g.gw.Namespace
	if ref.Namespace != nil && *ref.Namespace != "" {
		namespace = string(*ref.Namespace)
	}
	name := string(ref.Name)
	switch {
	case group != "" || kind != "ConfigMap" && kind != "Secret":
		return nil, reasonInvalidCACertificateKind, fmt.Sprintf("kind %q of group %q is not supported; a ConfigMap or a Secret of the core group is", clip(kind), clip(group))
	case len(validation.IsDNS1123Subdomain(name)) > 0 || len(validation.IsDNS1123Label(namespace)) > 0:
		return nil, reasonInvalidCACertificateRef, fmt.Sprintf("%q in namespace %q is not a %s name", clip(name), clip(namespace), kind)
	case namespace != g.gw.Namespace && !p.granted(gatewayGroup, kindGateway, g.gw.Namespace, "", kind, namespace, name):
		return nil, reasonRefNotPermitted, fmt.Sprintf("%s %s/%s is in another namespace and no ReferenceGrant there allows it", kind, namespace, name)
	}
	id := namespace + "/" + name
	if kind == "ConfigMap" {
		cm := p.configMaps[namespacedName{namespace, name}]
		if cm == nil {
			return nil, reasonInvalidCACertificateRef, fmt.Sprintf("ConfigMap %s not found", id)
		}
		data, ok := cm.Data["ca.crt"]
		if !ok {
			return nil, reasonInvalidCACertificateRef, fmt.Sprintf("ConfigMap %s has no ca.crt", id)
		}
		ca = []byte(data)
	} else {
		secret := p.secrets[namespacedName{namespace, name}]
		if secret == nil {
			return nil, reasonInvalidCACertificateRef, fmt.Sprintf("Secret %s not found", id)
		}
		var ok bool
		if ca, ok = secret.Data["ca.crt"]; !ok {
			return nil, reasonInvalidCACertificateRef, fmt.Sprintf("Secret %s has no ca.crt", id)
		}
	}
	if why := checkCABundle(ca); why != "" {
		return nil, reasonInvalidCACertificateRef, fmt.Sprintf("%s %s key ca.crt %s", kind, id, why)
	}
	return ca, "", ""
}

// applyFrontend gives an HTTPS listener l of g its port's client
// certificate validation: the conditions of a bad one, the ClientTLS of
// a good one. An earlier ResolvedRefs=False (a bad certificate) keeps its
// reason.
func (p *gatewayProcessor) applyFrontend(g *gatewayState, l *listenerState) {
	c := p.checkFrontend(g, l.spec.Port)
	if c.resolved != nil && l.resolved.Status {
		l.resolved = *c.resolved
	}
	if c.refused != nil && l.accepted.Status {
		l.accepted = *c.refused
	}
	l.clientTLS = c.clientTLS
}
