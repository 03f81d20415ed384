package apply_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/apply"
	"github.com/restysync/restysync/agent/internal/luaapi"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/plan"
	"github.com/restysync/restysync/agent/internal/testenv/agentnginx"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
	"github.com/restysync/restysync/agent/internal/testenv/testcert"
)

var (
	firstPushN     = flag.Int("firstpush.n", 2000, "TestBatchedFirstPushServesEveryCertificate: how many certificates (50000 for issue 31's scale)")
	firstPushBatch = flag.Int("firstpush.batch", 64<<10, "TestBatchedFirstPushServesEveryCertificate: the batch size in bytes (0: the agent's)")
	firstPushDict  = flag.String("firstpush.dict", "", "TestBatchedFirstPushServesEveryCertificate: the size of Lua's shared dict instead of nginx.conf's (64m holds about 43,000 test certificates)")
	firstPushParts = flag.Bool("firstpush.parts", false, "TestBatchedFirstPushServesEveryCertificate: first time one push of every certificate that Lua refuses at its first item (the decode), at its last (decode and checks), and the JSON encoding")
)

// pushCounter counts the certificate pushes and their largest body.
type pushCounter struct {
	mu              sync.Mutex
	pushes, largest int
	bytes           int
}

func (p *pushCounter) Pushed(kind string, bytes int, _ time.Duration, _ error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if kind == "certificates" {
		p.pushes++
		p.bytes += bytes
		p.largest = max(p.largest, bytes)
	}
}

// The first push of many certificates goes in batches (small here, so
// that 2,000 make many), and real nginx serves every certificate by SNI
// after it. Then the certificates of some hosts change their names (a
// renamed Secret: the new name takes the host the old one, removed, held):
// in batches too, each host keeps a certificate throughout, and Lua
// answers no 409 (a host taken from a certificate the batch leaves alone).
// With -firstpush.n 50000 -firstpush.batch 0 it measures the first push
// at issue 31's scale:
//
//	flock /work/notes/e2e.lock go test -count=1 -run TestBatchedFirstPushServesEveryCertificate -firstpush.n 50000 -firstpush.batch 0 -v ./agent/internal/apply
func TestBatchedFirstPushServesEveryCertificate(t *testing.T) {
	nginxproc.Binary(t)
	var edit func([]byte) []byte
	if *firstPushDict != "" {
		edit = func(conf []byte) []byte {
			return bytes.Replace(conf, []byte("lua_shared_dict restysync 64m;"), []byte("lua_shared_dict restysync "+*firstPushDict+";"), 1)
		}
	}
	n, _, settings, cfg := agentnginx.StartEdited(t, nginxproc.TempPrefix(t), edit)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	count := *firstPushN
	expiry := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	certs := make([]model.Certificate, count)
	for i := range certs {
		host := fmt.Sprintf("c%d.batch.test", i)
		cert, key := testcert.New(t, int64(i+1), expiry, host)
		certs[i] = model.Certificate{Name: fmt.Sprintf("ns/c%05d", i), Hosts: []string{host}, NotAfter: expiry, CertPEM: cert, KeyPEM: key}
	}
	pushes := &pushCounter{}
	l := apply.NewLuaState(n.Lua, pushes)
	if *firstPushBatch > 0 {
		l.SetCertificateBatchBytes(*firstPushBatch)
	}
	status, err := n.Lua.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Observe(ctx, status); err != nil {
		t.Fatal(err)
	}
	if *firstPushParts {
		timePushParts(ctx, t, n.Lua, certs)
	}
	list := model.ListOf(certs...)
	start := time.Now()
	p := plan.Compute(l.Held(status.ConfigHash, list), plan.Next{Config: cfg, Certificates: list})
	out, err := l.Execute(ctx, p, nil)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first push of %d certificates: %d batches, %.1f MB (%d bytes per certificate, the largest batch %d bytes), %s (pushing %s)",
		count, pushes.pushes, float64(pushes.bytes)/1e6, pushes.bytes/count, pushes.largest, took.Round(time.Millisecond), out.Push.Round(time.Millisecond))
	if out.CertUpserts != count {
		t.Fatalf("%d certificates pushed, want %d", out.CertUpserts, count)
	}
	if *firstPushBatch == 64<<10 && count >= 1000 && pushes.pushes < 10 {
		t.Errorf("%d pushes of %d certificates in batches of %d bytes, want many", pushes.pushes, count, *firstPushBatch)
	}
	held, err := n.Lua.Certificates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != count {
		t.Fatalf("Lua holds %d certificates, want %d", len(held), count)
	}
	for i, h := range held {
		if h.Name != certs[i].Name || h.Hash != certs[i].Hash() {
			t.Fatalf("Lua holds %s (hash %s) at %d, want %s (%s)", h.Name, h.Hash, i, certs[i].Name, certs[i].Hash())
		}
	}
	step := max(1, count/40)
	for i := 0; i < count; i += step {
		if got := servedSerial(t, settings.HTTPSPort, certs[i].Hosts[0]); got != int64(i+1) {
			t.Errorf("%s is served serial %d, want %d", certs[i].Hosts[0], got, i+1)
		}
	}

	// The first 50 hosts' certificates renamed (ns/r…, new content): each
	// takes its host from a certificate the same plan removes.
	renamed := make([]model.Certificate, 0, count)
	for i, c := range certs {
		if i < 50 {
			cert, key := testcert.New(t, int64(100000+i), expiry, c.Hosts[0])
			c = model.Certificate{Name: fmt.Sprintf("ns/r%05d", i), Hosts: c.Hosts, NotAfter: expiry, CertPEM: cert, KeyPEM: key}
		}
		renamed = append(renamed, c)
	}
	next := model.ListOf(renamed...)
	l.SetCertificateBatchBytes(1) // each hand-over a batch of its own
	p = plan.Compute(l.Held(status.ConfigHash, next), plan.Next{Config: cfg, Certificates: next})
	before := pushes.pushes
	if out, err = l.Execute(ctx, p, nil); err != nil {
		t.Fatalf("pushing the renamed certificates: %v", err)
	}
	if out.CertUpserts != 50 || out.CertRemoves != 50 || pushes.pushes-before != 50 {
		t.Errorf("renames: %d upserts, %d removes in %d pushes; want 50, 50, 50", out.CertUpserts, out.CertRemoves, pushes.pushes-before)
	}
	for i := range 50 {
		if got := servedSerial(t, settings.HTTPSPort, certs[i].Hosts[0]); got != int64(100000+i) {
			t.Errorf("%s is served serial %d after its rename, want %d", certs[i].Hosts[0], got, 100000+i)
		}
	}
}

// servedSerial does a TLS handshake with nginx's HTTPS port for sni and
// returns the serial of the certificate nginx presented.
func servedSerial(t *testing.T, httpsPort int, sni string) int64 {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", fmt.Sprintf("127.0.0.1:%d", httpsPort), &tls.Config{ServerName: sni, InsecureSkipVerify: true})
	if err != nil {
		t.Fatalf("TLS handshake with SNI %q: %v", sni, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// timePushParts logs where the time of one push of certs goes: the
// agent's JSON encoding, and Lua's answer to the same body refused at its
// first certificate (the request and cjson's decode), at its last (and
// every check: hosts, PEMs parsed by OpenSSL). The full push's time less
// those is Lua's storing.
func timePushParts(ctx context.Context, t *testing.T, lua *apply.LuaClient, certs []model.Certificate) {
	t.Helper()
	update := luaapi.CertificateUpdate{Upserts: make([]luaapi.CertificatePayload, len(certs))}
	for i, c := range certs {
		update.Upserts[i] = luaapi.CertificatePayload{Name: c.Name, Hosts: c.Hosts, Cert: c.CertPEM, Key: c.KeyPEM}
	}
	start := time.Now()
	body, err := json.Marshal(update)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("encoding %d certificates: %d bytes, %s", len(certs), len(body), time.Since(start).Round(time.Millisecond))
	for _, at := range []int{0, len(certs) - 1} {
		bad := update
		bad.Upserts = slices.Clone(update.Upserts)
		bad.Upserts[at].Name = ""
		start := time.Now()
		_, err := lua.PushCertificates(ctx, bad)
		if !errors.Is(err, apply.ErrRefused) {
			t.Fatalf("a push with upserts[%d] nameless: %v, want refused", at, err)
		}
		t.Logf("refused at upserts[%d]: %s", at, time.Since(start).Round(time.Millisecond))
	}
}
