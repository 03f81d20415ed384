package model

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Client certificate validation of a Gateway's HTTPS listeners
// (spec.tls.frontend), after the conformance tests
// GatewayFrontendClientCertificateValidation (+InsecureFallback),
// GatewayFrontendInvalidDefaultClientCertificateValidation and
// GatewayInvalidFrontendClientCertificateValidation.

// caConfigMap is a ConfigMap with ca.crt, as the suite makes them (with
// the CA's key beside it, which must never reach a file).
func caConfigMap(namespace, name, caPEM string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Data: map[string]string{"ca.crt": caPEM, "key.crt": "-----BEGIN RSA PRIVATE KEY-----\nc2VjcmV0\n-----END RSA PRIVATE KEY-----\n"}}
}

func caRef(kind, namespace, name string) gatewayv1.ObjectReference {
	r := gatewayv1.ObjectReference{Kind: gatewayv1.Kind(kind), Name: gatewayv1.ObjectName(name)}
	if namespace != "" {
		ns := gatewayv1.Namespace(namespace)
		r.Namespace = &ns
	}
	return r
}

func validationOf(mode gatewayv1.FrontendValidationModeType, refs ...gatewayv1.ObjectReference) *gatewayv1.FrontendTLSValidation {
	return &gatewayv1.FrontendTLSValidation{Mode: mode, CACertificateRefs: refs}
}

// withFrontend sets gw's spec.tls.frontend: the default validation and
// one per port.
func withFrontend(gw *gatewayv1.Gateway, def *gatewayv1.FrontendTLSValidation, perPort map[int32]*gatewayv1.FrontendTLSValidation) *gatewayv1.Gateway {
	f := &gatewayv1.FrontendTLSConfig{Default: gatewayv1.TLSConfig{Validation: def}}
	for port, v := range perPort {
		f.PerPort = append(f.PerPort, gatewayv1.TLSPortConfig{Port: port, TLS: gatewayv1.TLSConfig{Validation: v}})
	}
	gw.Spec.TLS = &gatewayv1.GatewayTLSConfig{Frontend: f}
	return gw
}

// authFile returns the content of m's file name.
func authFile(t *testing.T, m Model, name string) string {
	t.Helper()
	for _, f := range m.AuthFiles {
		if f.Name == name {
			return f.Content
		}
	}
	t.Fatalf("no file %q in %s", name, dump(m.AuthFiles))
	return ""
}

func listenerOn(t *testing.T, m Model, port int32) Listener {
	t.Helper()
	for _, l := range m.Listeners {
		if l.Port == port {
			return l
		}
	}
	t.Fatalf("no listener on port %d: %s", port, dump(m.Listeners))
	return Listener{}
}

func TestGatewayFrontendClientCertificateValidation(t *testing.T) {
	cert := newPair(certExpiry, "example.org", "second-example.org")
	ca, perPortCA := newPair(certExpiry, "ca"), newPair(certExpiry, "per-port-ca")
	for _, c := range []struct {
		mode   gatewayv1.FrontendValidationModeType
		verify string
	}{
		{"", "on"},
		{gatewayv1.AllowValidOnly, "on"},
		{gatewayv1.AllowInsecureFallback, "optional_no_ca"},
	} {
		t.Run(cmpOrMode(c.mode), func(t *testing.T) {
			gw := withFrontend(newGateway("default", "gw",
				httpsListener("https", 443, "", secretRef("", "cert")),
				httpsListener("https-with-hostname", 8443, "second-example.org", secretRef("", "cert"))),
				validationOf(c.mode, caRef("ConfigMap", "", "ca")),
				map[int32]*gatewayv1.FrontendTLSValidation{8443: validationOf(c.mode, caRef("ConfigMap", "", "per-port-ca"))})
			m, problems := Build(gwSnapshot(gw, tlsSecret("default", "cert", cert),
				caConfigMap("default", "ca", ca.certPEM), caConfigMap("default", "per-port-ca", perPortCA.certPEM)))
			if len(problems) != 0 {
				t.Fatalf("problems: %v", problems)
			}
			for port, want := range map[int32]string{443: ca.certPEM, 8443: perPortCA.certPEM} {
				l := listenerOn(t, m, port)
				if l.ClientTLS == nil || l.ClientTLS.Verify != c.verify || l.ClientTLS.Depth != gatewayVerifyDepth || l.ClientTLS.CRLFile != "" || l.ClientTLS.ErrorPage != "" {
					t.Fatalf("port %d: client TLS %s", port, dump(l.ClientTLS))
				}
				if got := authFile(t, m, l.ClientTLS.CAFile); got != want {
					t.Errorf("port %d: CA file holds %q, want the ConfigMap's ca.crt only", port, got)
				}
			}
			g := gatewayStatusOf(t, m, "default", "gw")
			for _, name := range []string{"https", "https-with-hostname"} {
				l := listenerStatusOf(t, g, name)
				wantCondition(t, name, l.Conditions, condAccepted, true, reasonAccepted)
				wantCondition(t, name, l.Conditions, condResolvedRefs, true, reasonResolvedRefs)
				wantCondition(t, name, l.Conditions, condProgrammed, true, reasonProgrammed)
			}
			hasInsecure := false
			for _, cond := range g.Conditions {
				hasInsecure = hasInsecure || cond.Type == condInsecureFrontendValidationMode
			}
			if c.mode == gatewayv1.AllowInsecureFallback {
				wantCondition(t, "gateway", g.Conditions, condInsecureFrontendValidationMode, true, reasonConfigurationChanged)
			} else if hasInsecure {
				t.Errorf("%s: InsecureFrontendValidationMode without an insecure fallback: %s", c.mode, dump(g.Conditions))
			}
		})
	}
}

func cmpOrMode(m gatewayv1.FrontendValidationModeType) string {
	if m == "" {
		return "no mode"
	}
	return string(m)
}

// A bad CA reference affects the HTTPS listeners of its port only: the
// suite's GatewayInvalidFrontendClientCertificateValidation, plus a
// granted cross-namespace reference and a Secret.
func TestGatewayInvalidFrontendClientCertificateValidation(t *testing.T) {
	cert := newPair(certExpiry, "*.org")
	ca, webCA := newPair(certExpiry, "ca"), newPair(certExpiry, "web-ca")
	caSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ca-secret"}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"ca.crt": []byte(ca.certPEM)}}
	gw := withFrontend(newGateway("default", "gw",
		httpsListener("https", 443, "", secretRef("", "cert")),
		httpsListener("https-unresolved", 7443, "first-example.org", secretRef("", "cert")),
		httpsListener("https-invalid-kind", 8443, "second-example.org", secretRef("", "cert")),
		httpsListener("https-grant-missing", 6443, "fourth-example.org", secretRef("", "cert")),
		httpsListener("https-granted", 5443, "fifth-example.org", secretRef("", "cert")),
		httpsListener("https-secret", 4443, "sixth-example.org", secretRef("", "cert")),
		httpListener("http", 80, "")),
		validationOf("", caRef("ConfigMap", "", "ca")),
		map[int32]*gatewayv1.FrontendTLSValidation{
			7443: validationOf("", caRef("ConfigMap", "", "non-exisitng-cm")),
			8443: validationOf("", caRef("Service", "", "infra-backend-v2")),
			6443: validationOf("", caRef("ConfigMap", "web", "web-backend-cm")),
			5443: validationOf("", caRef("ConfigMap", "granted", "granted-cm")),
			4443: validationOf("", caRef("Secret", "", "ca-secret")),
			80:   validationOf("", caRef("ConfigMap", "", "non-exisitng-cm")),
		})
	m, problems := Build(gwSnapshot(gw, tlsSecret("default", "cert", cert), caConfigMap("default", "ca", ca.certPEM),
		caConfigMap("web", "web-backend-cm", webCA.certPEM), caConfigMap("granted", "granted-cm", webCA.certPEM),
		referenceGrant("granted", "Gateway", "default", "ConfigMap", "granted-cm"), caSecret))
	g := gatewayStatusOf(t, m, "default", "gw")
	for _, c := range []struct {
		listener string
		port     int32
		reason   string // "" for served
	}{
		{"https", 443, ""},
		{"https-unresolved", 7443, reasonInvalidCACertificateRef},
		{"https-invalid-kind", 8443, reasonInvalidCACertificateKind},
		{"https-grant-missing", 6443, reasonRefNotPermitted},
		{"https-granted", 5443, ""},
		{"https-secret", 4443, ""},
		{"http", 80, ""},
	} {
		l := listenerStatusOf(t, g, c.listener)
		served := false
		for _, ml := range m.Listeners {
			if ml.Port == c.port {
				served = true
				if (ml.ClientTLS != nil) != ml.HTTPS {
					t.Errorf("%s: client TLS %s on an HTTPS=%v listener", c.listener, dump(ml.ClientTLS), ml.HTTPS)
				}
			}
		}
		if c.reason == "" {
			wantCondition(t, c.listener, l.Conditions, condAccepted, true, reasonAccepted)
			wantCondition(t, c.listener, l.Conditions, condResolvedRefs, true, reasonResolvedRefs)
			wantCondition(t, c.listener, l.Conditions, condProgrammed, true, reasonProgrammed)
			if !served {
				t.Errorf("%s: not served", c.listener)
			}
			continue
		}
		wantCondition(t, c.listener, l.Conditions, condResolvedRefs, false, c.reason)
		wantCondition(t, c.listener, l.Conditions, condAccepted, false, reasonNoValidCACertificate)
		if conditionOf(t, l.Conditions, condProgrammed).Status || served {
			t.Errorf("%s: programmed or served with no valid CA: %s", c.listener, dump(l))
		}
	}
	wantCondition(t, "gateway", g.Conditions, condAccepted, true, reasonListenersNotValid)
	if len(problems) != 3 {
		t.Errorf("want a problem for each of the three bad ports, got %v", problems)
	}
	for _, p := range problems {
		if p.Kind != "Gateway" || p.Name != "gw" || !strings.Contains(p.Reason, "caCertificateRefs[0]") {
			t.Errorf("problem %s", p)
		}
	}
}

// Hostile CA references and settings: each is a Problem on the Gateway
// with the spec's reason, its HTTPS listeners are not served (never
// without the check they were given), and another Gateway is served as
// alone.
func TestGatewayFrontendHostile(t *testing.T) {
	cert := newPair(certExpiry, "a.example.com")
	ca := newPair(certExpiry, "ca")
	refs := func(n int) []gatewayv1.ObjectReference {
		var out []gatewayv1.ObjectReference
		for range n {
			out = append(out, caRef("ConfigMap", "", "ca"))
		}
		return out
	}
	for _, c := range []struct {
		name    string
		v       *gatewayv1.FrontendTLSValidation
		cmData  map[string]string
		reason  string // of Accepted=False
		resRefs string // of ResolvedRefs=False, "" when it stays true
	}{
		{"not PEM", validationOf("", caRef("ConfigMap", "", "ca")), map[string]string{"ca.crt": "ssl_verify_client off; }"}, reasonNoValidCACertificate, reasonInvalidCACertificateRef},
		{"a key, not a certificate", validationOf("", caRef("ConfigMap", "", "ca")), map[string]string{"ca.crt": cert.keyPEM}, reasonNoValidCACertificate, reasonInvalidCACertificateRef},
		{"no ca.crt", validationOf("", caRef("ConfigMap", "", "ca")), map[string]string{"tls.crt": ca.certPEM}, reasonNoValidCACertificate, reasonInvalidCACertificateRef},
		{"empty ca.crt", validationOf("", caRef("ConfigMap", "", "ca")), map[string]string{"ca.crt": ""}, reasonNoValidCACertificate, reasonInvalidCACertificateRef},
		{"larger than 1 MiB", validationOf("", caRef("ConfigMap", "", "ca")), map[string]string{"ca.crt": strings.Repeat(ca.certPEM, 1+(1<<20)/len(ca.certPEM))}, reasonNoValidCACertificate, reasonInvalidCACertificateRef},
		{"name with quotes", validationOf("", caRef("ConfigMap", "", "ca\"; ssl_verify_client off;")), nil, reasonNoValidCACertificate, reasonInvalidCACertificateRef},
		{"namespace not a name", validationOf("", caRef("ConfigMap", "../etc", "ca")), nil, reasonNoValidCACertificate, reasonInvalidCACertificateRef},
		{"other group", validationOf("", gatewayv1.ObjectReference{Group: "example.com", Kind: "ConfigMap", Name: "ca"}), nil, reasonNoValidCACertificate, reasonInvalidCACertificateKind},
		{"kind with spaces", validationOf("", caRef("Config Map\n", "", "ca")), nil, reasonNoValidCACertificate, reasonInvalidCACertificateKind},
		{"unknown mode", validationOf("AllowEverything", caRef("ConfigMap", "", "ca")), nil, reasonUnsupportedValue, ""},
		{"no references", validationOf(""), nil, reasonNoValidCACertificate, ""},
		{"17 references", validationOf("", refs(17)...), nil, reasonNoValidCACertificate, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := c.cmData
			if data == nil {
				data = map[string]string{"ca.crt": ca.certPEM}
			}
			hostile := withFrontend(newGateway("default", "gw", httpsListener("https", 443, "", secretRef("", "cert"))), c.v, nil)
			neighbour := olderBy(withFrontend(newGateway("default", "neighbour", httpsListener("https", 443, "", secretRef("", "cert"))),
				validationOf("", caRef("ConfigMap", "", "good-ca")), nil), -1)
			objects := []any{neighbour, tlsSecret("default", "cert", cert), caConfigMap("default", "good-ca", ca.certPEM),
				&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ca"}, Data: data}}
			m, problems := Build(gwSnapshot(append(objects, hostile)...))
			alone, aloneProblems := Build(gwSnapshot(objects...))
			if len(aloneProblems) != 0 {
				t.Fatalf("the neighbour alone: %v", aloneProblems)
			}
			if !reflect.DeepEqual(m.Listeners, alone.Listeners) {
				t.Errorf("listeners:\n got %s\nwant the neighbour's only: %s", dump(m.Listeners), dump(alone.Listeners))
			}
			l := listenerStatusOf(t, gatewayStatusOf(t, m, "default", "gw"), "https")
			wantCondition(t, c.name, l.Conditions, condAccepted, false, c.reason)
			if c.resRefs != "" {
				wantCondition(t, c.name, l.Conditions, condResolvedRefs, false, c.resRefs)
			}
			if conditionOf(t, l.Conditions, condProgrammed).Status {
				t.Errorf("programmed: %s", dump(l))
			}
			checkGatewayProblems(t, problems, "Gateway", "gw", "spec.tls.frontend.default")
			for _, f := range m.AuthFiles {
				if strings.Contains(f.Content, "ssl_verify_client") || strings.Contains(f.Content, "PRIVATE KEY") {
					t.Errorf("file %s holds %q", f.Name, f.Content)
				}
			}
		})
	}
}

// One bad reference beside a good one: ResolvedRefs is false, and the
// listener is served with the good CA alone.
func TestGatewayFrontendPartlyValid(t *testing.T) {
	cert := newPair(certExpiry, "a.example.com")
	ca := newPair(certExpiry, "ca")
	gw := withFrontend(newGateway("default", "gw", httpsListener("https", 443, "", secretRef("", "cert"))),
		validationOf("", caRef("ConfigMap", "", "missing"), caRef("ConfigMap", "", "ca")), nil)
	m, problems := Build(gwSnapshot(gw, tlsSecret("default", "cert", cert), caConfigMap("default", "ca", ca.certPEM)))
	l := listenerStatusOf(t, gatewayStatusOf(t, m, "default", "gw"), "https")
	wantCondition(t, "https", l.Conditions, condResolvedRefs, false, reasonInvalidCACertificateRef)
	wantCondition(t, "https", l.Conditions, condAccepted, true, reasonAccepted)
	ml := listenerOn(t, m, 443)
	if ml.ClientTLS == nil || authFile(t, m, ml.ClientTLS.CAFile) != ca.certPEM {
		t.Errorf("listener %s, want the good CA alone", dump(ml))
	}
	checkGatewayProblems(t, problems, "Gateway", "gw", "caCertificateRefs[0]", "ConfigMap default/missing not found")
}

// A Gateway with spec.infrastructure.parametersRef is not accepted: the
// agent takes no parameters (GatewayInvalidParametersRef). Labels and
// annotations alone change nothing.
func TestGatewayInfrastructure(t *testing.T) {
	withParams := newGateway("default", "params", httpListener("http", 80, ""))
	withParams.Spec.Infrastructure = &gatewayv1.GatewayInfrastructure{
		ParametersRef: &gatewayv1.LocalParametersReference{Group: "invalid.io", Kind: "InvalidParameters", Name: "invalid"}}
	withMetadata := olderBy(newGateway("default", "metadata", httpListener("http", 80, "")), -1)
	withMetadata.Spec.Infrastructure = &gatewayv1.GatewayInfrastructure{
		Labels:      map[gatewayv1.LabelKey]gatewayv1.LabelValue{"key2": "value2"},
		Annotations: map[gatewayv1.AnnotationKey]gatewayv1.AnnotationValue{"key1": "value1"}}
	m, problems := Build(gwSnapshot(withParams, withMetadata))
	p := gatewayStatusOf(t, m, "default", "params")
	wantCondition(t, "params", p.Conditions, condAccepted, false, reasonInvalidParameters)
	wantCondition(t, "params", p.Conditions, condProgrammed, false, reasonInvalid)
	if len(p.Addresses) != 0 {
		t.Errorf("a Gateway not accepted holds addresses %v", p.Addresses)
	}
	md := gatewayStatusOf(t, m, "default", "metadata")
	wantCondition(t, "metadata", md.Conditions, condAccepted, true, reasonAccepted)
	wantCondition(t, "metadata", md.Conditions, condProgrammed, true, reasonProgrammed)
	if want := []Listener{{Address: "127.0.50.1", Port: 80, Front: front1}}; !reflect.DeepEqual(m.Listeners, want) {
		t.Errorf("listeners %s, want the metadata Gateway's only", dump(m.Listeners))
	}
	checkGatewayProblems(t, problems, "Gateway", "params", `spec.infrastructure.parametersRef: invalid.io/InvalidParameters "invalid"`)
}

var _ = fmt.Sprint
