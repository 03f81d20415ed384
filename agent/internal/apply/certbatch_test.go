package apply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/restysync/restysync/agent/internal/luaapi"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/plan"
)

func batchCert(name string, hosts ...string) model.Certificate {
	return model.Certificate{Name: name, Hosts: hosts, CertPEM: strings.Repeat("c", 600), KeyPEM: strings.Repeat("k", 240)}
}

// A plan no bigger than a batch is one batch, the plan's own lists.
func TestCertificateBatchesOneWhenSmall(t *testing.T) {
	cp := plan.CertificatePlan{Upserts: []model.Certificate{batchCert("ns/a", "a.test")}, Removes: []string{"ns/b"}}
	got := certificateBatches(cp, nil, certificateBatchBytes)
	if len(got) != 1 || len(got[0].upserts) != 1 || len(got[0].removes) != 1 {
		t.Fatalf("batches %+v, want the plan as one", got)
	}
}

// A large plan is split into batches of about the limit, every
// certificate in one of them, in the plan's order; those that hand hosts
// over to each other (as Lua holds them) are in one batch, whatever the
// limit: a host taken from a certificate removed, a chain of them, and a
// host given up by one upsert and taken by another.
func TestCertificateBatchesKeepHandOversTogether(t *testing.T) {
	held := map[string]plan.HeldCertificate{
		"ns/old":    {Hosts: []string{"moved.test"}},
		"ns/chain1": {Hosts: []string{"x.test"}},
		"ns/chain2": {Hosts: []string{"y.test"}},
		"ns/giver":  {Hosts: []string{"given.test", "kept.test"}},
	}
	var cp plan.CertificatePlan
	for i := range 100 {
		cp.Upserts = append(cp.Upserts, batchCert(fmt.Sprintf("ns/c%03d", i), fmt.Sprintf("c%d.test", i)))
	}
	cp.Upserts = append(cp.Upserts,
		batchCert("ns/new", "moved.test"),              // takes ns/old's host; ns/old is removed
		batchCert("ns/chain0", "x.test"),               // takes ns/chain1's host,
		batchCert("ns/chain1", "y.test"),               // which takes ns/chain2's, removed
		batchCert("ns/giver", "kept.test"),             // gives given.test up
		batchCert("ns/taker", "given.test", "t2.test"), // to ns/taker
		batchCert("ns/zzz-alone", "alone.test"))
	cp.Removes = []string{"ns/chain2", "ns/gone", "ns/old"}
	// 1 byte: each set of certificates that must travel together is a
	// batch of its own.
	for _, limit := range []int{10 << 10, 1} {
		batches := certificateBatches(cp, held, limit)
		if want := map[int]int{10 << 10: 8, 1: 100 + 4}[limit]; len(batches) < want {
			t.Fatalf("%d batches of at most %d bytes, want at least %d", len(batches), limit, want)
		}
		batchOf := map[string]int{}
		var order []string
		for i, b := range batches {
			size := 0
			for _, c := range b.upserts {
				batchOf[c.Name] = i
				order = append(order, c.Name)
				size += certificateBytes(c)
			}
			for _, name := range b.removes {
				batchOf["-"+name] = i
			}
			if size > limit && len(b.upserts) > 1 && limit > 1 {
				t.Errorf("batch %d: %d bytes, over %d", i, size, limit)
			}
		}
		if len(order) != len(cp.Upserts) || len(batchOf) != len(cp.Upserts)+len(cp.Removes) {
			t.Fatalf("batches hold %d upserts and %d items, want %d and %d", len(order), len(batchOf), len(cp.Upserts), len(cp.Upserts)+len(cp.Removes))
		}
		if !slices.IsSortedFunc(order[:100], strings.Compare) {
			t.Errorf("upserts out of the plan's order: %v", order[:100])
		}
		for _, together := range [][]string{{"ns/new", "-ns/old"}, {"ns/chain0", "ns/chain1", "-ns/chain2"}, {"ns/giver", "ns/taker"}} {
			for _, name := range together[1:] {
				if batchOf[name] != batchOf[together[0]] {
					t.Errorf("limit %d: %s in batch %d, %s in batch %d: want them together", limit, together[0], batchOf[together[0]], name, batchOf[name])
				}
			}
		}
	}
}

// Each batch is a request of its own, recorded once Lua took it: a batch
// Lua refuses costs only its own certificates (the others land, the
// refusal is returned), and a batch that gets no answer stops the push,
// what landed before it recorded, so that the next plan sends the rest.
func TestPushCertificatesInBatches(t *testing.T) {
	var mu sync.Mutex
	var got [][]string
	fail := map[string]int{} // a name in a batch -> the status to answer
	path := serveUnix(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var u luaapi.CertificateUpdate
		if err := json.NewDecoder(r.Body).Decode(&u); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var names []string
		status := http.StatusOK
		for _, c := range u.Upserts {
			names = append(names, c.Name)
			if s, ok := fail[c.Name]; ok {
				status = s
			}
		}
		mu.Lock()
		got = append(got, names)
		mu.Unlock()
		if status != http.StatusOK {
			http.Error(w, `{"error":"no"}`, status)
			return
		}
		w.Write([]byte(`{"version":1}`))
	}))
	client := NewLuaClient(path)
	client.push.RetryMax = 0
	var certs []model.Certificate
	for i := range 40 {
		certs = append(certs, batchCert(fmt.Sprintf("ns/c%02d", i), fmt.Sprintf("c%d.test", i)))
	}
	step := plan.Plan{Steps: []plan.Step{{Kind: plan.PushCertificates, Certificates: plan.CertificatePlan{Upserts: certs}}}}
	const perBatch = 4
	limit := perBatch * certificateBytes(certs[39]) // the largest

	l := NewLuaState(client, nil)
	l.certBatchBytes = limit
	fail["ns/c05"] = http.StatusBadRequest
	out, err := l.Execute(context.Background(), step, nil)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "batch 2 of 10") {
		t.Fatalf("Execute: %v, want batch 2's refusal", err)
	}
	if len(got) != 10 || out.CertUpserts != 36 || len(l.certs) != 36 {
		t.Errorf("%d requests, %d upserts recorded (%d held), want 10, 36, 36", len(got), out.CertUpserts, len(l.certs))
	}
	if _, ok := l.certs["ns/c05"]; ok {
		t.Errorf("the refused batch is recorded as held")
	}
	if l.current {
		t.Errorf("the record is current after a refused batch")
	}

	got = nil
	l = NewLuaState(client, nil)
	l.certBatchBytes = limit
	delete(fail, "ns/c05")
	fail["ns/c13"] = http.StatusServiceUnavailable
	out, err = l.Execute(context.Background(), step, nil)
	if err == nil || errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "batch 4 of 10") {
		t.Fatalf("Execute: %v, want batch 4's failure", err)
	}
	if len(got) != 4 || out.CertUpserts != 12 || len(l.certs) != 12 {
		t.Errorf("%d requests, %d upserts recorded (%d held), want 4, 12, 12", len(got), out.CertUpserts, len(l.certs))
	}
	// The next plan sends what did not land.
	next := plan.Certificates(l.certs, nil, model.List[model.Certificate]{}, model.ListOf(certs...))
	if len(next.Upserts) != 28 || next.Upserts[0].Name != "ns/c12" {
		t.Errorf("the next plan upserts %d from %s, want 28 from ns/c12", len(next.Upserts), next.Upserts[0].Name)
	}
}
