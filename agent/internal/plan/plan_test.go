package plan

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
)

func ep(addr string) model.Endpoint { return model.Endpoint{Address: addr, Port: 80} }

func TestCompute(t *testing.T) {
	a1 := model.Backend{Name: "ns/a:80", Endpoints: []model.Endpoint{ep("10.0.0.1")}}
	a2 := model.Backend{Name: "ns/a:80", Endpoints: []model.Endpoint{ep("10.0.0.2")}}
	ewma := model.Backend{Name: "ns/a:80", Endpoints: []model.Endpoint{ep("10.0.0.1")}, Policy: &model.Policy{Algorithm: model.AlgorithmEWMA}}
	b1 := model.Backend{Name: "ns/b:80", Endpoints: []model.Endpoint{ep("10.0.1.1")}}
	cfg := render.Config{Hash: "cfg1"}
	cfg2 := render.Config{Hash: "cfg2"}
	route := model.Route{Host: "r.example.com", Locations: []model.RouteLocation{{Path: "/", Backend: "ns/a:80"}}}
	route2 := model.Route{Host: "r.example.com", Locations: []model.RouteLocation{{Path: "/x", Backend: "ns/a:80"}}}
	other := model.Route{Host: "o.example.com", Locations: []model.RouteLocation{{Path: "/", Backend: "ns/a:80"}}}
	cert := model.Certificate{Name: "ns/tls", Hosts: []string{"r.example.com"}, CertPEM: "c", KeyPEM: "k"}
	certs := model.ListOf(cert)
	a2s := model.ListOf([]model.Backend{a2}...)
	held := func(hash string, backends ...model.Backend) Held {
		return Held{ConfigHash: hash, Backends: slices.SortedFunc(slices.Values(backends), byName), Certificates: map[string]HeldCertificate{}, Current: true}
	}
	withRoute := held("cfg1", a1)
	withRoute.Routes = render.NewRouteList([]model.Route{route})
	withOld := held("cfg1", a1, b1)

	tests := []struct {
		name string
		held Held
		next Next
		want []Step
	}{
		{"first sync: backends, then reload", Held{}, Next{Config: cfg, Backends: model.ListOf([]model.Backend{a1}...)},
			[]Step{{Kind: PushBackends, Backends: []model.Backend{a1}}, {Kind: Reload, Config: cfg}}},
		{"nothing changed", held("cfg1", a1), Next{Config: cfg, Backends: model.ListOf([]model.Backend{a1}...)}, nil},
		{"endpoint moved: push only", held("cfg1", a1), Next{Config: cfg, Backends: model.ListOf([]model.Backend{a2}...)},
			[]Step{{Kind: PushBackends, Backends: []model.Backend{a2}}}},
		{"policy changed: push only", held("cfg1", a1), Next{Config: cfg, Backends: model.ListOf([]model.Backend{ewma}...)},
			[]Step{{Kind: PushBackends, Backends: []model.Backend{ewma}}}},
		{"config changed: reload only", held("cfg1", a1), Next{Config: cfg2, Backends: model.ListOf([]model.Backend{a1}...)},
			[]Step{{Kind: Reload, Config: cfg2}}},
		{"lua lost its state: push all, no reload", held("cfg1"), Next{Config: cfg, Backends: model.ListOf([]model.Backend{a1}...)},
			[]Step{{Kind: PushBackends, Backends: []model.Backend{a1}}}},
		{"the whole order: certificates, backends, routes, reload, removes", withOld,
			Next{Config: cfg2, Backends: model.ListOf([]model.Backend{a2}...), Routes: render.NewRouteList([]model.Route{route}), Certificates: model.ListOf([]model.Certificate{cert}...)},
			[]Step{
				{Kind: PushCertificates, Certificates: CertificatePlan{Upserts: []model.Certificate{cert}}},
				{Kind: PushBackends, Backends: []model.Backend{a2}},
				{Kind: PushRoutes, Routes: []model.Route{route}},
				{Kind: Reload, Config: cfg2},
				{Kind: RemoveBackends, Names: []string{"ns/b:80"}},
			}},
		{"route changed: push only", withRoute, Next{Config: cfg, Backends: model.ListOf([]model.Backend{a1}...), Routes: render.NewRouteList([]model.Route{route2})},
			[]Step{{Kind: PushRoutes, Routes: []model.Route{route2}}}},
		{"route gone: removed", withRoute, Next{Config: cfg, Backends: model.ListOf([]model.Backend{a1}...)},
			[]Step{{Kind: RemoveRoutes, Names: []string{route.Host}}}},
		// The fast path: only the changed backends are compared; a backend
		// gone or a route changed elsewhere waits for the next full build.
		{"endpoints only: the changed backend alone", withOld,
			Next{Config: cfg, Backends: model.ListOf([]model.Backend{a2}...), EndpointsOnly: true, ChangedBackends: []model.Backend{a2}},
			[]Step{{Kind: PushBackends, Backends: []model.Backend{a2}}}},
		{"endpoints only, but the record is not current: everything", func() Held { h := withOld; h.Current = false; return h }(),
			Next{Config: cfg, Backends: model.ListOf([]model.Backend{a2}...), EndpointsOnly: true, ChangedBackends: []model.Backend{a2}},
			[]Step{{Kind: PushBackends, Backends: []model.Backend{a2}}, {Kind: RemoveBackends, Names: []string{"ns/b:80"}}}},
		// The backends of the previous plan, which ran whole: not compared;
		// the routes still are.
		{"backends unchanged: no backend compared", withOld,
			Next{Config: cfg, Backends: a2s, Routes: render.NewRouteList([]model.Route{route}), BackendsFrom: a2s},
			[]Step{{Kind: PushRoutes, Routes: []model.Route{route}}}},
		{"backends unchanged, but the record is not current: compared", func() Held { h := withOld; h.Current = false; return h }(),
			Next{Config: cfg, Backends: a2s, BackendsFrom: a2s},
			[]Step{{Kind: PushBackends, Backends: []model.Backend{a2}}, {Kind: RemoveBackends, Names: []string{"ns/b:80"}}}},
		// Only the hosts render says may have changed are compared: one
		// outside them that differs is taken as held; a named host next
		// does not route is removed.
		{"changed routes: only those hosts compared", withRoute,
			Next{Config: cfg, Backends: model.ListOf([]model.Backend{a1}...), Routes: render.NewRouteList([]model.Route{route2, other}), ChangedRoutes: map[string]bool{other.Host: true}},
			[]Step{{Kind: PushRoutes, Routes: []model.Route{other}}}},
		{"changed routes: a named host gone is removed", withRoute,
			Next{Config: cfg, Backends: model.ListOf([]model.Backend{a1}...), Routes: render.NewRouteList([]model.Route{other}), ChangedRoutes: map[string]bool{route.Host: true}},
			[]Step{{Kind: RemoveRoutes, Names: []string{route.Host}}}},
		{"changed routes, but the record is not current: every host compared", func() Held { h := withRoute; h.Current = false; return h }(),
			Next{Config: cfg, Backends: model.ListOf([]model.Backend{a1}...), Routes: render.NewRouteList([]model.Route{route2, other}), ChangedRoutes: map[string]bool{other.Host: true}},
			[]Step{{Kind: PushRoutes, Routes: []model.Route{other, route2}}}},
		// The certificates of the previous plan, which left the record
		// current: not compared (hashed); a record not current compares them.
		{"certificates unchanged: none compared", held("cfg1", a1),
			Next{Config: cfg, Backends: model.ListOf([]model.Backend{a1}...), Certificates: certs, CertificatesFrom: certs}, nil},
		{"certificates unchanged, but the record is not current: compared", func() Held { h := held("cfg1", a1); h.Current = false; return h }(),
			Next{Config: cfg, Backends: model.ListOf([]model.Backend{a1}...), Certificates: certs, CertificatesFrom: certs},
			[]Step{{Kind: PushCertificates, Certificates: CertificatePlan{Upserts: []model.Certificate{cert}}}}},
		{"full push: every backend when one changed", held("cfg1", a1, b1),
			Next{Config: cfg, Backends: model.ListOf([]model.Backend{a2, b1}...), FullPush: true},
			[]Step{{Kind: PushBackends, Backends: []model.Backend{a2, b1}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Compute(tt.held, tt.next)
			if !reflect.DeepEqual(got.Steps, tt.want) {
				t.Errorf("Compute() =\n%+v\nwant\n%+v", got.Steps, tt.want)
			}
		})
	}
}

// HoldReload keeps the steps ahead of a reload that must not run, and marks
// the plan partial; without a reload to hold, nothing is held.
func TestComputeHoldReload(t *testing.T) {
	a1 := model.Backend{Name: "ns/a:80", Endpoints: []model.Endpoint{ep("10.0.0.1")}}
	b1 := model.Backend{Name: "ns/b:80", Endpoints: []model.Endpoint{ep("10.0.1.1")}}
	held := Held{ConfigHash: "cfg1", Backends: []model.Backend{b1}}
	got := Compute(held, Next{Config: render.Config{Hash: "cfg2"}, Backends: model.ListOf([]model.Backend{a1}...), HoldReload: true})
	want := []Step{{Kind: PushBackends, Backends: []model.Backend{a1}}}
	if !reflect.DeepEqual(got.Steps, want) || !got.Partial {
		t.Errorf("HoldReload: %+v, want %+v, partial", got, want)
	}
	same := Compute(held, Next{Config: render.Config{Hash: "cfg1"}, Backends: model.ListOf([]model.Backend{a1}...), HoldReload: true})
	if same.Partial || len(same.Steps) != 2 {
		t.Errorf("no reload to hold: %+v, want the whole plan", same)
	}
}

func TestCertificates(t *testing.T) {
	cert := func(name, content string, hosts ...string) model.Certificate {
		return model.Certificate{Name: name, Hosts: hosts, CertPEM: "cert " + content, KeyPEM: "key " + content}
	}
	invalid := func(name string, hosts ...string) model.Certificate {
		return model.Certificate{Name: name, Hosts: hosts, Invalid: "holds an unusable tls.crt"}
	}
	heldOf := func(c model.Certificate) HeldCertificate { return HeldCertificate{Hosts: c.Hosts, Hash: c.Hash()} }
	a1 := cert("ns/a", "1", "a.test")
	a2 := cert("ns/a", "2", "a.test")
	b1 := cert("ns/b", "1", "b.test")

	tests := []struct {
		name     string
		held     map[string]HeldCertificate
		lastGood map[string]model.Certificate
		next     []model.Certificate
		want     CertificatePlan
	}{
		{"first push", nil, nil, []model.Certificate{a1, b1}, CertificatePlan{Upserts: []model.Certificate{a1, b1}}},
		{"nothing changed", map[string]HeldCertificate{"ns/a": heldOf(a1)}, nil, []model.Certificate{a1}, CertificatePlan{}},
		{"rotated: only that one", map[string]HeldCertificate{"ns/a": heldOf(a1), "ns/b": heldOf(b1)}, nil, []model.Certificate{a2, b1},
			CertificatePlan{Upserts: []model.Certificate{a2}}},
		{"hosts changed", map[string]HeldCertificate{"ns/a": heldOf(a1)}, nil, []model.Certificate{cert("ns/a", "1", "a.test", "c.test")},
			CertificatePlan{Upserts: []model.Certificate{cert("ns/a", "1", "a.test", "c.test")}}},
		{"gone: removed", map[string]HeldCertificate{"ns/a": heldOf(a1), "ns/b": heldOf(b1)}, nil, []model.Certificate{a1},
			CertificatePlan{Removes: []string{"ns/b"}}},
		{"invalid keeps the last good one", map[string]HeldCertificate{"ns/a": heldOf(a1)}, map[string]model.Certificate{"ns/a": a1},
			[]model.Certificate{invalid("ns/a", "a.test")}, CertificatePlan{Kept: []string{"ns/a"}}},
		{"invalid keeps the last good one with new hosts", map[string]HeldCertificate{"ns/a": heldOf(a1)}, map[string]model.Certificate{"ns/a": a1},
			[]model.Certificate{invalid("ns/a", "a.test", "c.test")},
			CertificatePlan{Upserts: []model.Certificate{cert("ns/a", "1", "a.test", "c.test")}, Kept: []string{"ns/a"}}},
		{"invalid after a restart keeps what Lua holds", map[string]HeldCertificate{"ns/a": heldOf(a1)}, nil,
			[]model.Certificate{invalid("ns/a", "a.test")}, CertificatePlan{Kept: []string{"ns/a"}}},
		{"invalid after a restart with other hosts: removed", map[string]HeldCertificate{"ns/a": heldOf(a1)}, nil,
			[]model.Certificate{invalid("ns/a", "c.test")}, CertificatePlan{Removes: []string{"ns/a"}}},
		{"invalid and never good: nothing", nil, nil, []model.Certificate{invalid("ns/a", "a.test")}, CertificatePlan{}},
		{"lua lost its state: push the last good one", map[string]HeldCertificate{}, map[string]model.Certificate{"ns/a": a1},
			[]model.Certificate{invalid("ns/a", "a.test")}, CertificatePlan{Upserts: []model.Certificate{a1}, Kept: []string{"ns/a"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Certificates(tt.held, tt.lastGood, model.List[model.Certificate]{}, model.ListOf(tt.next...))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func routedServer(host, path, backend string) model.Server {
	return model.Server{Host: host, Locations: []model.Location{{Path: path, PathType: model.PathPrefix, Backend: backend}}}
}

func TestRoutes(t *testing.T) {
	a := model.Route{Host: "a.example.com", Locations: []model.RouteLocation{{Path: "/", Backend: "ns/a:80"}}}
	b := model.Route{Host: "b.example.com", Locations: []model.RouteLocation{{Path: "/x", Exact: true, Backend: "ns/b:80"}}}
	b2 := model.Route{Host: "b.example.com", Locations: []model.RouteLocation{{Path: "/x", Backend: "ns/b:80"}}}
	gone := model.Route{Host: "gone.example.com", Locations: a.Locations}
	held := render.NewRouteList([]model.Route{a, b, gone})
	p := Routes(held, render.NewRouteList([]model.Route{a, b2}))
	if len(p.Upserts) != 1 || p.Upserts[0].Host != b.Host || !slices.Equal(p.Upserts[0].Locations, b2.Locations) {
		t.Errorf("upserts %+v, want only b.example.com with its new location", p.Upserts)
	}
	if !slices.Equal(p.Removes, []string{"gone.example.com"}) {
		t.Errorf("removes %v, want gone.example.com", p.Removes)
	}
	if p := Routes(render.NewRouteList([]model.Route{a}), render.NewRouteList([]model.Route{a})); !p.Empty() {
		t.Errorf("plan %+v for what Lua holds, want empty", p)
	}
	secure := a
	secure.HTTPS = true
	if p := Routes(render.NewRouteList([]model.Route{a}), render.NewRouteList([]model.Route{secure})); len(p.Upserts) != 1 {
		t.Errorf("plan %+v when the host starts to serve HTTPS, want it upserted", p)
	}
}

// The Reload step says why it reloads when the config nginx runs is known
// (render.Changes), and leaves that to apply when it is not.
func TestReloadReasons(t *testing.T) {
	settings := render.Settings{SharedDir: "/srv/restysync", HTTPPort: 80, HTTPSPort: 443}
	running, err := render.Render(model.Model{}, settings)
	if err != nil {
		t.Fatal(err)
	}
	settings.HTTPPort = 8080
	next, err := render.Render(model.Model{}, settings)
	if err != nil {
		t.Fatal(err)
	}
	known := Compute(Held{ConfigHash: running.Hash, Config: running}, Next{Config: next})
	if step, ok := known.Step(Reload); !ok || !slices.Equal(step.Reasons, []string{render.ReasonListener}) {
		t.Errorf("reload from a known config: %+v, want the reason %q", step.Reasons, render.ReasonListener)
	}
	unknown := Compute(Held{ConfigHash: "something else"}, Next{Config: next})
	if step, ok := unknown.Step(Reload); !ok || step.Reasons != nil {
		t.Errorf("reload from an unknown config: reasons %q, want none", step.Reasons)
	}
}

// With what Lua holds known (the previous plan's lists, Held.Current),
// the plan compares only the items of the chunks the next lists do not
// share with them: the new certificate and backend are pushed, what the
// next lists dropped is removed, and the items of the chunks no edit fell
// in are not looked at (the record here holds them otherwise, which a
// walk of every item would push). Fails when the plan walks every item.
func TestComputeComparesOnlyTheChangedChunks(t *testing.T) {
	const n = 1000
	var certs []model.Certificate
	var backends []model.Backend
	for i := range n {
		certs = append(certs, model.Certificate{Name: fmt.Sprintf("ns/c%04d", i), Hosts: []string{fmt.Sprintf("h%04d.test", i)}, CertPEM: "c", KeyPEM: "k"})
		backends = append(backends, model.Backend{Name: fmt.Sprintf("ns/b%04d:80", i), Endpoints: []model.Endpoint{ep("10.0.0.1")}})
	}
	fromCerts, fromBackends := model.ListOf(certs...), model.ListOf(backends...)
	added := model.Certificate{Name: "ns/c0500x", Hosts: []string{"new.test"}, CertPEM: "c", KeyPEM: "k"}
	addedB := model.Backend{Name: "ns/b0500x:80", Endpoints: []model.Endpoint{ep("10.0.0.2")}}
	byCert := func(c model.Certificate, name string) int { return strings.Compare(c.Name, name) }
	byBackend := func(b model.Backend, name string) int { return strings.Compare(b.Name, name) }
	nextCerts := model.Edited(fromCerts, []model.ListEdit[string, model.Certificate]{
		{Key: "ns/c0100", Remove: true}, {Key: added.Name, Value: added}}, byCert)
	nextBackends := model.Edited(fromBackends, []model.ListEdit[string, model.Backend]{
		{Key: "ns/b0100:80", Remove: true}, {Key: addedB.Name, Value: addedB}}, byBackend)
	// The edits fall in two chunks (of model.listChunk items); the record
	// holds every item of from, those past them with other content.
	held := Held{ConfigHash: "cfg", Current: true, Certificates: map[string]HeldCertificate{}}
	for i, c := range certs {
		h, b := HeldCertificate{Hosts: c.Hosts, Hash: c.Hash()}, backends[i]
		if i >= 600 {
			h.Hash, b.Endpoints = "other", []model.Endpoint{ep("10.9.9.9")}
		}
		if i == 5 {
			// In an edited chunk, the same in from and next: not
			// hashed (the record is current: Lua holds from's).
			h.Hash = "not looked at"
		}
		held.Certificates[c.Name] = h
		held.Backends = append(held.Backends, b)
	}
	p := Compute(held, Next{Config: render.Config{Hash: "cfg"}, Backends: nextBackends, BackendsFrom: fromBackends,
		Certificates: nextCerts, CertificatesFrom: fromCerts})
	cs, _ := p.Step(PushCertificates)
	if !reflect.DeepEqual(cs.Certificates, CertificatePlan{Upserts: []model.Certificate{added}, Removes: []string{"ns/c0100"}}) {
		t.Errorf("certificates: %+v, want the new one pushed and ns/c0100 removed", cs.Certificates)
	}
	bs, _ := p.Step(PushBackends)
	if !reflect.DeepEqual(bs.Backends, []model.Backend{addedB}) || p.ComparedBackends >= 600 {
		t.Errorf("backends: pushed %d, compared %d; want the new one, of its chunks only", len(bs.Backends), p.ComparedBackends)
	}
	if rs, _ := p.Step(RemoveBackends); !reflect.DeepEqual(rs.Names, []string{"ns/b0100:80"}) {
		t.Errorf("backends removed: %+v, want ns/b0100:80", rs.Names)
	}

	// Not current: every item compared, as before.
	held.Current = false
	p = Compute(held, Next{Config: render.Config{Hash: "cfg"}, Backends: nextBackends, BackendsFrom: fromBackends,
		Certificates: nextCerts, CertificatesFrom: fromCerts})
	if cs, _ := p.Step(PushCertificates); len(cs.Certificates.Upserts) != n-600+2 {
		t.Errorf("record not current: %d certificates pushed, want %d (those held otherwise and the new one)", len(cs.Certificates.Upserts), n-600+2)
	}
}
