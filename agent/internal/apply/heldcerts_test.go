package apply

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/plan"
)

// Once Held has walked the model's certificates (the first time, and after
// a read back), the next list made from that one (a new TLS Ingress, a
// rotated Secret: model.Edited) is looked at only in the chunks it does not
// share with it: what the walk learns of the changed certificates still
// comes (their last good content, the expiry and content of what Lua holds
// under their name), names the model dropped are forgotten, and the saved
// state still holds every certificate whose content the agent knows. Fails
// when Held walks every certificate again (a map of every name and a hash
// of every certificate Lua holds: ~100 KB at 2,000, megabytes at 50,000).
func TestHeldLooksOnlyAtTheChangedCertificates(t *testing.T) {
	const n = 2000
	expiry := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	cert := func(i int, content string) model.Certificate {
		return model.Certificate{Name: fmt.Sprintf("ns/c%04d", i), Hosts: []string{fmt.Sprintf("h%d.test", i)},
			CertPEM: "cert " + content, KeyPEM: "key " + content, NotAfter: expiry}
	}
	l := NewLuaState(nil, nil)
	var certs []model.Certificate
	for i := range n {
		c := cert(i, "a")
		certs = append(certs, c)
		// As read back after a restart: the hash, no expiry, no content.
		l.certs[c.Name] = plan.HeldCertificate{Hosts: c.Hosts, Hash: c.Hash()}
	}
	list := model.ListOf(certs...)
	l.Held("cfg", list)
	if len(l.lastGood) != n || len(l.pems) != n || l.NearestExpiry() != expiry {
		t.Fatalf("the first Held: %d last good, %d contents known, nearest expiry %s; want %d, %d, %s", len(l.lastGood), len(l.pems), l.NearestExpiry(), n, n, expiry)
	}

	// Lua holds the rotated content and the new certificate (as if
	// pushed by another agent before a restart: content to learn).
	rotated, added := cert(1500, "b"), cert(n, "a")
	for _, c := range []model.Certificate{rotated, added} {
		l.certs[c.Name] = plan.HeldCertificate{Hosts: c.Hosts, Hash: c.Hash()}
	}
	byName := func(c model.Certificate, name string) int { return strings.Compare(c.Name, name) }
	next := model.Edited(list, []model.ListEdit[string, model.Certificate]{
		{Key: "ns/c0007", Remove: true}, {Key: rotated.Name, Value: rotated}, {Key: added.Name, Value: added}}, byName)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	l.Held("cfg", next)
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 32<<10 {
		t.Errorf("Held of a list with 3 changes at %d certificates allocated %d bytes, want at most 32 KB (a walk of every one)", n, got)
	}
	if _, ok := l.lastGood["ns/c0007"]; ok || len(l.lastGood) != n || l.lastGood[rotated.Name].CertPEM != rotated.CertPEM {
		t.Errorf("last good: %d, ns/c0007 kept %v, rotated %q; want %d, false, the new content", len(l.lastGood), ok, l.lastGood[rotated.Name].CertPEM, n)
	}
	if l.pems[rotated.Name].payload.Cert != rotated.CertPEM || l.pems[added.Name].hash != added.Hash() || l.certs[added.Name].NotAfter != expiry {
		t.Errorf("the content and expiry of the changed certificates Lua holds are not learnt")
	}
	l.unsaved = true
	dir := t.TempDir()
	if _, err := l.Save(dir, "cfg", nil); err != nil {
		t.Fatal(err)
	}
	// Lua still holds ns/c0007 (no plan ran): n+1 known.
	if s := readState(t, dir); len(s.Certificates) != n+1 {
		t.Errorf("the saved state holds %d certificates, want %d", len(s.Certificates), n+1)
	}
}
