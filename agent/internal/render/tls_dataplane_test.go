package render

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/luaapi"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/testenv/testcert"
)

// The TLS data plane tests push certificates to the config API of a real
// nginx and check, with real TLS handshakes, which certificate each SNI
// name gets.

// testCert is a self-signed certificate with a known serial.
type testCert struct {
	serial    int64
	cert, key string
}

func newTestCert(t testing.TB, serial int64, names ...string) testCert {
	t.Helper()
	cert, key := testcert.New(t, serial, time.Now().Add(24*time.Hour), names...)
	return testCert{serial: serial, cert: cert, key: key}
}

func upsertOf(name string, c testCert, hosts ...string) luaapi.CertificatePayload {
	if hosts == nil {
		hosts = []string{}
	}
	return luaapi.CertificatePayload{Name: name, Hosts: hosts, Cert: c.cert, Key: c.key}
}

func (dp *dataPlane) pushCerts(t *testing.T, upserts []luaapi.CertificatePayload, removes []string) int64 {
	t.Helper()
	code, reply := dp.postCerts(t, upserts, removes)
	if code != http.StatusOK {
		t.Fatalf("POST /certificates: %d %s", code, reply)
	}
	var v struct{ Version int64 }
	if err := json.Unmarshal(reply, &v); err != nil {
		t.Fatalf("POST /certificates answered %s: %v", reply, err)
	}
	return v.Version
}

func (dp *dataPlane) postCerts(t *testing.T, upserts []luaapi.CertificatePayload, removes []string) (int, []byte) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"upserts": upserts, "removes": removes})
	if err != nil {
		t.Fatal(err)
	}
	return dp.api(t, http.MethodPost, "/certificates", body)
}

func (dp *dataPlane) certificates(t *testing.T) ([]luaapi.HeldCertificate, []byte) {
	t.Helper()
	code, reply := dp.api(t, http.MethodGet, "/certificates", nil)
	if code != http.StatusOK {
		t.Fatalf("GET /certificates: %d %s", code, reply)
	}
	var body struct{ Certificates []luaapi.HeldCertificate }
	if err := json.Unmarshal(reply, &body); err != nil {
		t.Fatalf("GET /certificates answered %s: %v", reply, err)
	}
	return body.Certificates, reply
}

// leaf does a TLS handshake with nginx's HTTPS port, sending sni ("" for
// none), and returns the certificate nginx presented.
func leaf(t *testing.T, httpsPort int, sni string) *x509.Certificate {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", fmt.Sprintf("127.0.0.1:%d", httpsPort), &tls.Config{ServerName: sni, InsecureSkipVerify: true})
	if err != nil {
		t.Fatalf("TLS handshake with SNI %q: %v", sni, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

const fallbackCN = "restysync default certificate"

// served names what a handshake got: a serial, or "default".
func served(c *x509.Certificate) string {
	if c.Subject.CommonName == fallbackCN {
		return "default"
	}
	return c.SerialNumber.String()
}

func TestDataPlaneTLS(t *testing.T) {
	web := startEchoBackend(t, "web-1")
	dp, settings, _ := startDataPlane(t, dataPlaneModel(), nil)
	dp.push(t, []luaapi.BackendPayload{{Name: "ns/web:80", Endpoints: []model.Endpoint{web.ep}}, {Name: "ns/wild:80", Endpoints: []model.Endpoint{web.ep}}}, nil)
	https := settings.HTTPSPort

	app1 := newTestCert(t, 101, "app.example.com")
	app2 := newTestCert(t, 102, "app.example.com")
	wild := newTestCert(t, 201, "*.example.com")

	expect := func(t *testing.T, want map[string]string) {
		t.Helper()
		for sni, w := range want {
			if got := served(leaf(t, https, sni)); got != w {
				t.Errorf("SNI %q got certificate %s, want %s", sni, got, w)
			}
		}
	}

	t.Run("default certificate before any push", func(t *testing.T) {
		expect(t, map[string]string{"": "default", "app.example.com": "default"})
		if st := dp.status(t); st.Certificates != 0 {
			t.Errorf("status says %d certificates, want 0", st.Certificates)
		}
	})

	t.Run("push and serve by SNI", func(t *testing.T) {
		dp.pushCerts(t, []luaapi.CertificatePayload{upsertOf("ns/wild", wild, "*.example.com"), upsertOf("ns/app", app1, "app.example.com")}, nil)
		expect(t, map[string]string{
			"app.example.com": "101",
			"APP.Example.COM": "101", // SNI is case-insensitive
			"x.example.com":   "201", // one-label wildcard
			"a.b.example.com": "default",
			"example.com":     "default",
			"other.test":      "default",
			"":                "default",
		})
		if st := dp.status(t); st.Certificates != 2 {
			t.Errorf("status says %d certificates, want 2", st.Certificates)
		}
	})

	t.Run("HTTPS reaches the backend over HTTP/2", func(t *testing.T) {
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", https))
			},
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
			ForceAttemptHTTP2: true,
		}}
		resp, err := client.Get("https://app.example.com/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(body) != "web-1" || resp.ProtoMajor != 2 {
			t.Errorf("got %s %d %q, want HTTP/2 200 web-1", resp.Proto, resp.StatusCode, body)
		}
		if got := resp.TLS.PeerCertificates[0].SerialNumber.Int64(); got != 101 {
			t.Errorf("served serial %d, want 101", got)
		}
	})

	t.Run("list shows hosts and hashes, no keys", func(t *testing.T) {
		got, raw := dp.certificates(t)
		want := []luaapi.HeldCertificate{
			{Name: "ns/app", Hosts: []string{"app.example.com"}, Hash: model.Certificate{CertPEM: app1.cert, KeyPEM: app1.key}.Hash()},
			{Name: "ns/wild", Hosts: []string{"*.example.com"}, Hash: model.Certificate{CertPEM: wild.cert, KeyPEM: wild.key}.Hash()},
		}
		if !slices.EqualFunc(got, want, equalHeldCert) {
			t.Errorf("GET /certificates = %+v, want %+v", got, want)
		}
		if bytes.Contains(raw, []byte("PRIVATE")) || bytes.Contains(raw, []byte("BEGIN")) {
			t.Errorf("GET /certificates shows PEM: %s", raw)
		}
	})

	t.Run("rotate without reload", func(t *testing.T) {
		workers := dp.nginx.WorkerPIDs()
		dp.pushCerts(t, []luaapi.CertificatePayload{upsertOf("ns/app", app2, "app.example.com")}, nil)
		expect(t, map[string]string{"app.example.com": "102", "x.example.com": "201"})
		if after := dp.nginx.WorkerPIDs(); !slices.Equal(workers, after) {
			t.Errorf("workers changed from %v to %v: nginx reloaded", workers, after)
		}
	})

	t.Run("a host moves only with both certificates in the update", func(t *testing.T) {
		code, reply := dp.postCerts(t, []luaapi.CertificatePayload{upsertOf("ns/wild", wild, "*.example.com", "app.example.com")}, nil)
		var e struct{ Error string }
		json.Unmarshal(reply, &e)
		if code != http.StatusConflict || !strings.Contains(e.Error, `"app.example.com" belongs to certificate "ns/app"`) {
			t.Fatalf("got %d %s, want 409 naming the owner", code, reply)
		}
		expect(t, map[string]string{"app.example.com": "102"})
		dp.pushCerts(t, []luaapi.CertificatePayload{upsertOf("ns/wild", wild, "*.example.com", "app.example.com"), upsertOf("ns/app", app2)}, nil)
		expect(t, map[string]string{"app.example.com": "201"})
		dp.pushCerts(t, []luaapi.CertificatePayload{upsertOf("ns/wild", wild, "*.example.com"), upsertOf("ns/app", app2, "app.example.com")}, nil)
		expect(t, map[string]string{"app.example.com": "102"})
	})

	t.Run("remove falls back to the default certificate", func(t *testing.T) {
		dp.pushCerts(t, nil, []string{"ns/wild"})
		expect(t, map[string]string{"x.example.com": "default", "app.example.com": "102"})
		got, _ := dp.certificates(t)
		if len(got) != 1 || got[0].Name != "ns/app" {
			t.Errorf("GET /certificates = %+v, want only ns/app", got)
		}
		if st := dp.status(t); st.Certificates != 1 {
			t.Errorf("status says %d certificates, want 1", st.Certificates)
		}
		dp.pushCerts(t, []luaapi.CertificatePayload{upsertOf("ns/wild", wild, "*.example.com")}, nil)
	})

	t.Run("odd SNI names", func(t *testing.T) {
		long := strings.Repeat("a", 60) + "." + strings.Repeat("b", 60) + "." + strings.Repeat("c", 60) + ".example.com"
		expect(t, map[string]string{
			long:                "default",
			"a_b.example.com":   "201", // any one label matches the wildcard
			"h:app.example.com": "201", // not read as a dict key of another host
			"*.example.com":     "201",
			"app.example.com":   "102",
			"x.test":            "default",
		})
	})

	t.Run("a configured default certificate", func(t *testing.T) {
		fallback := newTestCert(t, 301, "fallback.example")
		dp.pushCerts(t, []luaapi.CertificatePayload{upsertOf("ns/fallback", fallback, "*")}, nil)
		expect(t, map[string]string{
			"":                "301", // no SNI
			"x.test":          "301",
			"app.example.com": "102",
			"x.example.com":   "201",
		})
		dp.pushCerts(t, nil, []string{"ns/fallback"})
		expect(t, map[string]string{"": "default", "x.test": "default"})
	})

	t.Run("rejected updates change nothing", func(t *testing.T) {
		before, _ := dp.certificates(t)
		version := dp.status(t).Version
		good := func(name string, hosts ...string) string {
			b, _ := json.Marshal(upsertOf(name, app1, hosts...))
			return string(b)
		}
		withField := func(field, value string) string {
			var m map[string]any
			json.Unmarshal([]byte(good("ns/x", "x.test")), &m)
			var v any
			json.Unmarshal([]byte(value), &v)
			if v == nil && value != "null" {
				delete(m, field)
			} else {
				m[field] = v
			}
			b, _ := json.Marshal(m)
			return `{"upserts":[` + good("ns/app", "app.example.com") + `,` + string(b) + `]}`
		}
		tests := []struct {
			name, body, reason string
		}{
			{"not JSON", `{"upserts":`, "body: is not valid JSON"},
			{"not an object", `[]`, "body: must be a JSON object"},
			{"unknown field", `{"certs":[]}`, "certs: unknown field"},
			{"upserts not an array", `{"upserts":{}}`, ""}, // {} decodes as an empty array: accepted below
			{"upsert not an object", `{"upserts":[5]}`, "upserts[0]: must be an object"},
			{"upsert field unknown", withField("chain", `"x"`), "upserts[1].chain: unknown field"},
			{"name missing", withField("name", ``), "upserts[1].name: must be a string"},
			{"name empty", withField("name", `""`), "upserts[1].name: must not be empty"},
			{"hosts missing", withField("hosts", ``), "upserts[1].hosts: is missing"},
			{"hosts not an array", withField("hosts", `"x.test"`), "upserts[1].hosts: must be an array"},
			{"host upper case", withField("hosts", `["X.test"]`), "upserts[1].hosts[0]: must be a lower-case DNS name"},
			{"host with port", withField("hosts", `["x.test:443"]`), "upserts[1].hosts[0]: must be"},
			{"host deep wildcard", withField("hosts", `["*.*.test"]`), "upserts[1].hosts[0]: must be"},
			{"host empty label", withField("hosts", `["x..test"]`), "upserts[1].hosts[0]: must be"},
			{"host a number", withField("hosts", `[5]`), "upserts[1].hosts[0]: must be"},
			{"host twice", withField("hosts", `["app.example.com"]`), `upserts[1].hosts[0]: "app.example.com" is also upserts[0].hosts[0]`},
			{"cert missing", withField("cert", ``), "upserts[1].cert: must be a string"},
			{"cert empty", withField("cert", `""`), "upserts[1].cert: must not be empty"},
			{"cert not PEM", withField("cert", `"hello"`), "upserts[1].cert: does not parse"},
			{"cert with NUL", withField("cert", `"a\u0000b"`), "upserts[1].cert: must not contain a NUL byte"},
			{"key not PEM", withField("key", `"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"`), "upserts[1].key: does not parse"},
			{"key too long", withField("key", `"`+strings.Repeat("k", 1<<20+1)+`"`), "upserts[1].key: is 1048577 bytes long"},
			{"duplicate name", `{"upserts":[` + good("ns/app", "a.test") + `,` + good("ns/app", "b.test") + `]}`, `upserts[1].name: "ns/app" is also upserts[0]`},
			{"upsert and remove", `{"upserts":[` + good("ns/app", "a.test") + `],"removes":["ns/app"]}`, `removes[0]: "ns/app" is also upserts[0]`},
			{"remove not a string", `{"removes":[5]}`, "removes[0]: must be a string"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				if tc.reason == "" {
					if code, reply := dp.api(t, http.MethodPost, "/certificates", []byte(tc.body)); code != http.StatusOK {
						t.Errorf("got %d %s, want 200", code, reply)
					}
					return
				}
				dp.expectRefused(t, "/certificates", tc.body, tc.reason)
			})
		}
		after, _ := dp.certificates(t)
		if !slices.EqualFunc(after, before, equalHeldCert) {
			t.Errorf("GET /certificates changed after rejected updates:\n got %+v\nwant %+v", after, before)
		}
		if v := dp.status(t).Version; v != version+1 { // +1: the empty update was accepted
			t.Errorf("version moved from %d to %d after rejected updates and one empty one", version, v)
		}
		expect(t, map[string]string{"app.example.com": "102", "x.example.com": "201"})
	})

	t.Run("reload keeps the certificates", func(t *testing.T) {
		writePrefix(t, dp.nginx.Prefix, dataPlaneModel(), settings)
		dp.nginx.Reload(t)
		expect(t, map[string]string{"app.example.com": "102", "x.example.com": "201"})
	})
	t.Run("no Lua errors", func(t *testing.T) {
		log, err := os.ReadFile(filepath.Join(dp.nginx.Prefix, ErrorLogName))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(log), "\n") {
			if strings.Contains(line, "[error]") && strings.Contains(line, "restysync") {
				t.Errorf("nginx logged: %s", line)
			}
		}
	})
}

// TestDataPlaneTLSDictFull: certificates that do not fit are refused with
// 507, and the stored ones keep serving.
func TestDataPlaneTLSDictFull(t *testing.T) {
	shrink := func(conf []byte) []byte {
		return bytes.Replace(conf, []byte("lua_shared_dict restysync 64m;"), []byte("lua_shared_dict restysync 1m;"), 1)
	}
	dp, settings, _ := startDataPlane(t, model.Model{}, shrink)
	keep := newTestCert(t, 7, "keep.test")
	dp.pushCerts(t, []luaapi.CertificatePayload{upsertOf("ns/keep", keep, "keep.test")}, nil)
	before, _ := dp.certificates(t)

	// A chain of 700 copies of one certificate: about 400 KB each, which
	// parses, and three of which do not fit in 1 MB.
	var upserts []luaapi.CertificatePayload
	for i := range 3 {
		big := newTestCert(t, int64(10+i), fmt.Sprintf("big%d.test", i))
		big.cert = strings.Repeat(big.cert, 700)
		upserts = append(upserts, upsertOf(fmt.Sprintf("ns/big%d", i), big, fmt.Sprintf("big%d.test", i)))
	}
	code, reply := dp.postCerts(t, upserts, []string{"ns/keep"})
	if code != http.StatusInsufficientStorage || !bytes.Contains(reply, []byte("nothing was changed")) {
		t.Fatalf("got %d %.300s, want 507 saying nothing was changed", code, reply)
	}
	after, _ := dp.certificates(t)
	if !slices.EqualFunc(after, before, equalHeldCert) {
		t.Errorf("certificates after the refused update %+v, want %+v", after, before)
	}
	if got := served(leaf(t, settings.HTTPSPort, "keep.test")); got != "7" {
		t.Errorf("keep.test got %s after the refused update, want 7", got)
	}
	if got := served(leaf(t, settings.HTTPSPort, "big0.test")); got != "default" {
		t.Errorf("big0.test got %s, want the default certificate", got)
	}
}

// TestWriteFallbackCertificate: generated once, kept afterwards, key 0600.
func TestWriteFallbackCertificate(t *testing.T) {
	dir := t.TempDir()
	made, err := WriteFallbackCertificate(dir)
	if err != nil || !made {
		t.Fatalf("first call: made %v, %v", made, err)
	}
	certPEM, err := os.ReadFile(filepath.Join(dir, FallbackCertName))
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, FallbackKeyName))
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatalf("the default certificate and key do not match: %v", err)
	}
	if cn := pair.Leaf.Subject.CommonName; cn != fallbackCN {
		t.Errorf("CN %q, want %q", cn, fallbackCN)
	}
	if _, ok := pair.Leaf.PublicKey.(*ecdsa.PublicKey); !ok {
		t.Errorf("key is %T, want ECDSA", pair.Leaf.PublicKey)
	}
	if info, err := os.Stat(filepath.Join(dir, FallbackKeyName)); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("key mode %v (%v), want 0600", info.Mode(), err)
	}
	made, err = WriteFallbackCertificate(dir)
	if err != nil || made {
		t.Fatalf("second call: made %v, %v; want the files kept", made, err)
	}
	again, _ := os.ReadFile(filepath.Join(dir, FallbackCertName))
	if !bytes.Equal(again, certPEM) {
		t.Error("the second call replaced the certificate")
	}
	if err := os.Remove(filepath.Join(dir, FallbackKeyName)); err != nil {
		t.Fatal(err)
	}
	if made, err = WriteFallbackCertificate(dir); err != nil || !made {
		t.Fatalf("after the key was removed: made %v, %v; want both generated again", made, err)
	}
}

func equalHeldCert(a, b luaapi.HeldCertificate) bool {
	return a.Name == b.Name && a.Hash == b.Hash && slices.Equal(a.Hosts, b.Hosts)
}
