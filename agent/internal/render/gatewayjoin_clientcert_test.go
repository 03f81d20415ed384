package render_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/testenv/testcert"
)

// clientCertPool are the Gateway addresses of TestGatewayJoinClientCertificates,
// apart from joinPool's: another test's nginx on the same address would
// answer in its place.
var clientCertPool = []string{"127.29.31.1", "127.29.31.2", "127.29.31.3", "127.29.31.4", "127.29.31.5", "127.29.31.6"}

// TestGatewayJoinClientCertificates runs the suite's client certificate
// tests through the join harness: the suite's manifests with the CA
// ConfigMaps it makes in code (a CA for the default validation, another
// for port 8443), and its requests with and without client certificates
// of either CA, over TLS 1.2 and 1.3. A refused client must get no answer
// at all (the suite wants the request to fail), an accepted one its
// backend's. Each Snapshot applied again does nothing.
func TestGatewayJoinClientCertificates(t *testing.T) {
	j := startJoin(t)
	ca, perPortCA := testcert.NewClientCA(t, "default-ca"), testcert.NewClientCA(t, "per-port-ca")
	client, perPortClient := ca.Client(t, "client"), perPortCA.Client(t, "per-port-client")
	// The suite's CAs all have one name: a certificate of another CA of
	// the same name fails its signature check, which optional_no_ca does
	// not let through by itself.
	impostor := testcert.NewClientCA(t, "default-ca").Client(t, "impostor")
	configMaps := []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Namespace: infraNS, Name: "tls-validity-checks-ca-certificate"}, Data: map[string]string{"ca.crt": ca.PEM}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: infraNS, Name: "tls-validity-checks-per-port-ca-certificate"}, Data: map[string]string{"ca.crt": perPortCA.PEM}},
	}
	snapshot := func(t *testing.T, file string) model.Snapshot {
		s := j.snapshot(t, file)
		s.GatewayAddresses = clientCertPool
		s.ConfigMaps = model.ListOf(configMaps...)
		return s
	}
	type try struct {
		port    int
		sni     string
		cert    *tls.Certificate
		backend string // "" when refused
	}
	for _, tt := range []struct {
		name, file, gateway string
		tries               []try
	}{
		{"GatewayFrontendClientCertificateValidation", "tests/gateway-with-clientcertificate-validation.yaml", "client-validation-default", []try{
			{443, "example.org", &client, v1},
			{443, "example.org", &perPortClient, ""},
			{443, "example.org", nil, ""},
			{443, "example.org", &impostor, ""},
			{8443, "second-example.org", &perPortClient, v2},
			{8443, "second-example.org", &client, ""},
			{8443, "second-example.org", nil, ""},
		}},
		{"GatewayFrontendClientCertificateValidationInsecureFallback", "tests/gateway-with-clientcertificate-validation-insecure-fallback.yaml", "client-validation-insecure-fallback", []try{
			{443, "example.org", &client, v1},
			{443, "example.org", &perPortClient, v1},
			{443, "example.org", nil, v1},
			{443, "example.org", &impostor, v1},
			{8443, "second-example.org", &perPortClient, v2},
			{8443, "second-example.org", &client, v2},
			{8443, "second-example.org", nil, v2},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := j.sync(t, snapshot(t, tt.file))
			addr := gatewayAddress(t, m, tt.gateway)
			// nginx's old worker accepts for 100 ms after a reload: the
			// answers must all be right in one pass within a bound, as
			// the suite's eventually consistent requests.
			var wrong []string
			for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				wrong = nil
				for _, c := range tt.tries {
					for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
						if w := checkClientCert(addr, c.port, c.sni, c.cert, version, c.backend); w != "" {
							wrong = append(wrong, w)
						}
					}
				}
				if len(wrong) == 0 || time.Now().After(deadline) {
					break
				}
			}
			for _, w := range wrong {
				t.Error(w)
			}
			j.wantNothingAgain(t, snapshot(t, tt.file))
		})
	}

	// An invalid default validation: the HTTPS listener is not served, the
	// HTTP one is (its perPort validation is for HTTPS listeners only).
	t.Run("GatewayFrontendInvalidDefaultClientCertificateValidation", func(t *testing.T) {
		file := "tests/gateway-invalid-default-frontend-client-certificate-validation.yaml"
		m, _ := j.sync(t, snapshot(t, file))
		j.check(t, m, joinCase{gateway: "invalid-default-client-validation-config", host: "example.org", path: "/", backend: v1})
		addr := gatewayAddress(t, m, "invalid-default-client-validation-config")
		w := "not tried"
		for deadline := time.Now().Add(3 * time.Second); w != "" && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			w = checkClientCert(addr, 443, "example.org", nil, tls.VersionTLS13, "")
		}
		if w != "" {
			t.Errorf("the HTTPS listener without a valid CA: %s", w)
		}
		j.wantNothingAgain(t, snapshot(t, file))
	})
}

// checkClientCert sends a request as clientCertGet does and says what is
// wrong with the outcome: backend "" wants no answer at all.
func checkClientCert(addr string, port int, sni string, cert *tls.Certificate, version uint16, backend string) string {
	what := fmt.Sprintf("port %d SNI %s, client certificate %v, TLS 0x%x", port, sni, cert != nil, version)
	echo, status, err := clientCertGet(addr, port, sni, cert, version)
	switch {
	case backend == "" && err == nil:
		return fmt.Sprintf("%s: answered %d (%s), want no answer", what, status, echo.Service)
	case backend != "" && err != nil:
		return fmt.Sprintf("%s: %v, want %s's answer", what, err, backend)
	case backend != "" && (status != http.StatusOK || echo.Service != backend):
		return fmt.Sprintf("%s: answered %d by %q, want 200 by %s", what, status, echo.Service, backend)
	}
	return ""
}

// clientCertGet sends GET / over TLS to addr:port with SNI and Host sni,
// showing cert when the server asks for one (nothing when cert is nil),
// and returns the answer's status and what the backend echoed; err is
// for no answer (or one that is no echo).
func clientCertGet(addr string, port int, sni string, cert *tls.Certificate, version uint16) (joinEcho, int, error) {
	var echo joinEcho
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", net.JoinHostPort(addr, strconv.Itoa(port)))
		},
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, ServerName: sni, MinVersion: version, MaxVersion: version,
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				if cert == nil {
					return &tls.Certificate{}, nil
				}
				return cert, nil
			}},
		DisableKeepAlives: true,
	}}
	resp, err := client.Get("https://" + sni + ":" + strconv.Itoa(port) + "/")
	if err != nil {
		return echo, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return echo, resp.StatusCode, nil
	}
	return echo, resp.StatusCode, json.NewDecoder(resp.Body).Decode(&echo)
}
