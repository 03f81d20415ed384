package apply

import (
	"fmt"
	"maps"
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
	if len(l.lastGood) != 0 || len(l.pems) != n || l.NearestExpiry() != expiry {
		t.Fatalf("the first Held: %d last good, %d contents known, nearest expiry %s; want 0 (every one is valid), %d, %s", len(l.lastGood), len(l.pems), l.NearestExpiry(), n, expiry)
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
	if len(l.lastGood) != 0 {
		t.Errorf("last good: %d, want none (every one is valid)", len(l.lastGood))
	}
	if _, known := l.pems[added.Name]; l.pems[rotated.Name].cert != rotated.CertPEM || !known || l.certs[added.Name].NotAfter != expiry {
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

// The record keeps a last good content only for a name the model names
// Invalid: the valid content the list Held went through before had for
// it, kept while the certificate stays Invalid (also through a walk of
// every certificate after a read back), dropped when it is valid again or
// gone. A valid certificate is its own last good content.
func TestHeldKeepsLastGoodOfInvalidCertificates(t *testing.T) {
	good := model.Certificate{Name: "ns/a", Hosts: []string{"a.test"}, CertPEM: "cert", KeyPEM: "key"}
	bad := model.Certificate{Name: "ns/a", Hosts: []string{"a.test"}, Invalid: "holds an unusable tls.crt"}
	other := model.Certificate{Name: "ns/b", Hosts: []string{"b.test"}, CertPEM: "cert b", KeyPEM: "key b"}
	l := NewLuaState(nil, nil)
	steps := []struct {
		name    string
		certs   []model.Certificate
		walkAll bool // as after Observe
		want    map[string]string
	}{
		{"valid", []model.Certificate{good, other}, false, map[string]string{}},
		{"turns invalid", []model.Certificate{bad, other}, false, map[string]string{"ns/a": "cert"}},
		{"stays invalid", []model.Certificate{bad}, false, map[string]string{"ns/a": "cert"}},
		{"stays invalid, read back", []model.Certificate{bad}, true, map[string]string{"ns/a": "cert"}},
		{"valid again", []model.Certificate{good}, false, map[string]string{}},
		{"invalid after a read back", []model.Certificate{bad}, true, map[string]string{"ns/a": "cert"}},
		{"gone", nil, false, map[string]string{}},
	}
	for _, step := range steps {
		l.walkAll = step.walkAll
		held := l.Held("cfg", model.ListOf(step.certs...))
		got := map[string]string{}
		for name, c := range held.LastGood {
			got[name] = c.CertPEM
		}
		if !maps.Equal(got, step.want) {
			t.Errorf("%s: last good %v, want %v", step.name, got, step.want)
		}
	}
}
