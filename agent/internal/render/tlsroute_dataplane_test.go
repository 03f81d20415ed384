package render

import (
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// startTLSBackend starts a TLS server presenting a certificate for name
// that writes name on each connection and closes it.
func startTLSBackend(t *testing.T, serial int64, name string) model.Endpoint {
	t.Helper()
	c := newTestCert(t, serial, name)
	pair, err := tls.X509KeyPair([]byte(c.cert), []byte(c.key))
	if err != nil {
		t.Fatal(err)
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}})
	if err != nil {
		t.Fatal(err)
	}
	return serveName(t, l, name)
}

// serveName writes name on each connection l accepts and closes it, until
// the test ends; it returns l's address.
func serveName(t *testing.T, l net.Listener, name string) model.Endpoint {
	t.Helper()
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			conn.SetDeadline(time.Now().Add(5 * time.Second))
			conn.Write([]byte(name))
			conn.Close()
		}
	}()
	return model.Endpoint{Address: "127.0.0.1", Port: int32(l.Addr().(*net.TCPAddr).Port)}
}

// dialTLS connects to addr asking for sni and returns what the backend
// wrote and the name of the certificate it presented, or the error.
func dialTLS(addr, sni string) (string, string, error) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{ServerName: sni, InsecureSkipVerify: true})
	if err != nil {
		return "", "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 256)
	n, _ := conn.Read(buf)
	return string(buf[:n]), conn.ConnectionState().PeerCertificates[0].DNSNames[0], nil
}

// TestDataPlaneTLSRoute serves a Gateway listener port of protocol TLS
// (model.TLSFront) on a real nginx: each connection goes to the backend of
// the most specific host that matches its SNI, its TLS untouched (the
// backend's own certificate), or, for a host of a Terminate listener
// (mixed on the same port), ended with the listener's certificate and the
// plain bytes sent on; a name no host matches, and a host without a usable
// backend, are closed.
func TestDataPlaneTLSRoute(t *testing.T) {
	exact := startTLSBackend(t, 3001, "abc.example.com")
	wild := startTLSBackend(t, 3002, "wild.example.com")
	plain := startPlainBackend(t, "plain")
	port := freeGatewayPort(t)
	nginxproc.Binary(t)
	prefix := nginxproc.TempPrefix(t)
	c := newTestCert(t, 3003, "tls.example.com")
	certFile, keyFile := "auth/ns_cert.000000000001.tls.crt", "auth/ns_cert.000000000001.tls.key"
	if err := os.MkdirAll(filepath.Join(prefix, "auth"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{certFile: c.cert, keyFile: c.key} {
		if err := os.WriteFile(filepath.Join(prefix, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var m model.Model
	m.Stream.Backends = []model.StreamBackend{
		{Name: "tcp:ns/exact:443", Namespace: "ns", Service: "exact", Endpoints: []model.Endpoint{exact}},
		{Name: "tcp:ns/plain:80", Namespace: "ns", Service: "plain", Endpoints: []model.Endpoint{plain}},
		{Name: "tcp:ns/wild:443", Namespace: "ns", Service: "wild", Endpoints: []model.Endpoint{wild}},
	}
	m.Stream.Gateways = []model.TLSFront{{Address: gatewayAddrA, Port: int32(port), Front: model.FrontName(gatewayAddrA, int32(port)), Hosts: []model.TLSHost{
		{Host: "*.example.com", Backend: "tcp:ns/wild:443", Route: "ns/wild"},
		{Host: "abc.example.com", Backend: "tcp:ns/exact:443", Route: "ns/exact"},
		{Host: "closed.example.com", Route: "ns/closed"},
		{Host: "tls.example.com", Backend: "tcp:ns/plain:80", Route: "ns/ended", CertFile: certFile, KeyFile: keyFile},
	}}}
	settings := Settings{
		SharedDir: prefix, ListenAddress: "127.0.0.1",
		HTTPPort: nginxproc.FreePort(t), HTTPSPort: nginxproc.FreePort(t), StatusPort: nginxproc.FreePort(t),
		LoadModules:     append(nginxproc.DebianLoadModules(), nginxproc.StreamLoadModules(t)...),
		WorkerProcesses: "1",
	}
	cfg := writePrefix(t, prefix, m, settings)
	nginxproc.Start(t, prefix)
	if !strings.Contains(string(cfg.Bytes), `"abc.example.com" restysync_stream_0;`) {
		t.Fatalf("nginx.conf has no map entry for abc.example.com:\n%s", cfg.Bytes)
	}
	addr := net.JoinHostPort(gatewayAddrA, strconv.Itoa(port))
	for _, tc := range []struct{ sni, want, cert string }{
		{"abc.example.com", "abc.example.com", "abc.example.com"},
		{"other.example.com", "wild.example.com", "wild.example.com"},
		{"a.b.example.com", "wild.example.com", "wild.example.com"}, // a Gateway wildcard matches any number of labels
		{"tls.example.com", "plain", "tls.example.com"},             // ended by nginx with the listener's certificate
		{"example.org", "", ""},
		{"closed.example.com", "", ""},
	} {
		got, cert, err := dialTLS(addr, tc.sni)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("SNI %s: reached %q, want the connection closed", tc.sni, got)
		case tc.want != "" && err != nil:
			t.Errorf("SNI %s: %v, want %s", tc.sni, err, tc.want)
		case tc.want != "" && (got != tc.want || cert != tc.cert):
			t.Errorf("SNI %s: reached %q with certificate %q, want %q with %q", tc.sni, got, cert, tc.want, tc.cert)
		}
	}
}

// startPlainBackend starts a TCP server that writes name on each
// connection and closes it.
func startPlainBackend(t *testing.T, name string) model.Endpoint {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveName(t, l, name)
}
