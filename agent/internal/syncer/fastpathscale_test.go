package syncer

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/source"
	"github.com/restysync/restysync/agent/internal/testenv/testcert"
)

// The first endpoint change after a model build costs what it changes: the
// fast path finds the changed Service's backends by a binary search of the
// model's sorted backends (model.ServiceBackends), not by an index of
// every backend made anew after each build, and writes its patch into the
// build's list rather than a copy of it, even after State handed the
// model out (a health probe). Both made that sync at 50,000 Ingresses
// 7 MB and 10–50 ms (TestEndpointTailAtScale), B6@50k-B1's p99. The
// allocations of that sync, count and bytes, do not grow with the
// backends, and its model is the one a full build of the new snapshot
// gives.
func TestFastPathAfterBuildCostsTheChange(t *testing.T) {
	mallocs, bytes, probe := map[int]uint64{}, map[int]uint64{}, map[int]uint64{}
	for _, n := range []int{500, 5000} {
		src := &indexSource{fakeSource: fakeSource{snap: manyIngressSnapshot(n)}}
		s := New(src, nil, Options{IngressClass: "restysync"}, slog.New(slog.DiscardHandler))
		if _, _, path := s.model(map[source.Kind]bool{source.KindIngress: true}); path != "full" {
			t.Fatalf("first build: path %s", path)
		}
		// Service s7's slice moves to another address.
		slices := src.snap.EndpointSlices.Slice()
		moved := slices[7].DeepCopy()
		moved.Endpoints[0].Addresses = []string{"10.200.0.1"}
		slices[7] = moved
		src.snap.EndpointSlices = model.ListOf(slices...)
		src.changed = []source.ServiceKey{{Namespace: "default", Name: "s7"}}
		s.update(func(st *State) { st.Model = *s.built })
		s.State() // a health probe

		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		next, _, path := s.model(map[source.Kind]bool{source.KindEndpointSlice: true})
		runtime.ReadMemStats(&after)
		if path != "fast" {
			t.Fatalf("endpoint change: path %s", path)
		}
		mallocs[n], bytes[n] = after.Mallocs-before.Mallocs, after.TotalAlloc-before.TotalAlloc
		s.update(func(st *State) { st.Model = next })
		runtime.ReadMemStats(&before)
		s.State() // the next health probe
		runtime.ReadMemStats(&after)
		probe[n] = after.TotalAlloc - before.TotalAlloc
		fresh := New(&indexSource{fakeSource: fakeSource{snap: src.snap}}, nil, Options{IngressClass: "restysync"}, slog.New(slog.DiscardHandler))
		full, _, _ := fresh.model(map[source.Kind]bool{source.KindIngress: true})
		if !reflect.DeepEqual(next.Backends, full.Backends) {
			t.Errorf("%d Ingresses: the fast path's backends differ from a full build's", n)
		}
	}
	t.Logf("allocations of the first fast sync after a build: %v, bytes %v; the State after it: bytes %v", mallocs, bytes, probe)
	if probe[5000] > probe[500]+4<<10 {
		t.Errorf("State after a fast sync allocates %d bytes at 5,000 Ingresses, %d at 500: it copies the backends", probe[5000], probe[500])
	}
	if mallocs[5000] > mallocs[500]+50 {
		t.Errorf("the first fast sync after a build allocates %d times at 5,000 Ingresses, %d at 500: it grows with the backends",
			mallocs[5000], mallocs[500])
	}
	if bytes[5000] > bytes[500]+32<<10 {
		t.Errorf("the first fast sync after a build allocates %d bytes at 5,000 Ingresses, %d at 500: it grows with the backends",
			bytes[5000], bytes[500])
	}
}

// manyIngressSnapshot is n Ingresses s0…, each with its Service and a
// one-endpoint slice, as oneIngressSnapshot's.
func manyIngressSnapshot(n int) model.Snapshot {
	one := oneIngressSnapshot("10.0.0.1")
	snap := model.Snapshot{IngressClasses: one.IngressClasses}
	for i := range n {
		name := fmt.Sprintf("s%d", i)
		ing := one.Ingresses.At(0).DeepCopy()
		ing.Name, ing.Spec.Rules[0].Host = name, name+".test"
		ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name = name
		svc := one.Services.At(0).DeepCopy()
		svc.Name = name
		slice := one.EndpointSlices.At(0).DeepCopy()
		slice.Name, slice.Labels = name+"-1", map[string]string{discoveryv1.LabelServiceName: name}
		slice.Endpoints[0].Addresses = []string{fmt.Sprintf("10.%d.%d.1", i/256%256, i%256)}
		snap.Ingresses = model.ListOf(append(snap.Ingresses.Slice(), ing)...)
		snap.Services = model.ListOf(append(snap.Services.Slice(), svc)...)
		snap.EndpointSlices = model.ListOf(append(snap.EndpointSlices.Slice(), slice)...)
	}
	return snap
}

// The fast path writes its patch into the backends list of the last build,
// which the model.Incremental built it from and builds the next model
// from: through any sequence of endpoint changes (the fast path), Ingress
// changes (the Incremental's islands, some sharing a Service's backend),
// and both at once, every model is the one a full build of the snapshot
// gives, and a model State handed out never changes.
func TestFastPathBetweenIncrementalBuilds(t *testing.T) {
	const ingresses, services = 24, 8
	snap := manyIngressSnapshot(services)
	base := snap.Ingresses.At(0)
	snap.Ingresses = model.List[*networkingv1.Ingress]{}
	for i := range ingresses {
		ing := base.DeepCopy()
		ing.Name, ing.Spec.Rules[0].Host = fmt.Sprintf("i%d", i), fmt.Sprintf("i%d.test", i)
		ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name = fmt.Sprintf("s%d", i%services)
		snap.Ingresses = model.ListOf(append(snap.Ingresses.Slice(), ing)...)
	}
	src := &indexSource{fakeSource: fakeSource{snap: snap}}
	s := New(src, nil, Options{IngressClass: "restysync"}, slog.New(slog.DiscardHandler))
	next, _, _ := s.model(map[source.Kind]bool{source.KindIngress: true})
	s.update(func(st *State) { st.Model = next })

	rng := rand.New(rand.NewPCG(41, 41))
	moveEndpoints := func() source.ServiceKey {
		i := rng.IntN(services)
		slices := src.snap.EndpointSlices.Slice()
		moved := slices[i].DeepCopy()
		moved.Endpoints[0].Addresses = []string{fmt.Sprintf("10.100.%d.%d", rng.IntN(4), rng.IntN(4))}
		slices[i] = moved
		src.snap.EndpointSlices = model.ListOf(slices...)
		return source.ServiceKey{Namespace: "default", Name: moved.Labels[discoveryv1.LabelServiceName]}
	}
	changeIngress := func() {
		ingresses := src.snap.Ingresses.Slice()
		i := rng.IntN(len(ingresses))
		ing := ingresses[i].DeepCopy()
		ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name = fmt.Sprintf("s%d", rng.IntN(services))
		ingresses[i] = ing
		src.snap.Ingresses = model.ListOf(ingresses...)
	}
	type handedOut struct{ read, kept model.Model }
	var handed []handedOut
	fast, incremental := 0, 0
	for step := range 300 {
		var kinds map[source.Kind]bool
		switch rng.IntN(3) {
		case 0, 1:
			src.changed = append(src.changed, moveEndpoints())
			kinds = map[source.Kind]bool{source.KindEndpointSlice: true}
		default:
			if rng.IntN(2) == 0 {
				src.changed = append(src.changed, moveEndpoints())
			}
			changeIngress()
			kinds = map[source.Kind]bool{source.KindIngress: true, source.KindEndpointSlice: true}
		}
		next, _, path := s.model(kinds)
		s.update(func(st *State) { st.Model = next })
		switch {
		case path == "fast":
			fast++
		case s.buildPath.Incremental:
			incremental++
		}
		fresh := New(&fakeSource{snap: src.snap}, nil, Options{IngressClass: "restysync"}, slog.New(slog.DiscardHandler))
		want, _, _ := fresh.model(map[source.Kind]bool{source.KindIngress: true})
		if !reflect.DeepEqual(next.Backends, want.Backends) || !reflect.DeepEqual(next.Servers.Slice(), want.Servers.Slice()) {
			t.Fatalf("step %d (%s): the model differs from a full build's:\n%+v\nwant\n%+v", step, path, next.Backends, want.Backends)
		}
		if rng.IntN(4) == 0 {
			handed = append(handed, handedOut{read: s.State().Model, kept: want})
		}
	}
	for i, h := range handed {
		if !reflect.DeepEqual(h.read.Backends, h.kept.Backends) {
			t.Errorf("the model State handed out %d-th changed under its reader", i)
		}
	}
	t.Logf("%d fast syncs, %d incremental builds, %d models handed out", fast, incremental, len(handed))
	if fast < 100 || incremental < 50 {
		t.Errorf("%d fast syncs, %d incremental builds: the sequence did not mix them", fast, incremental)
	}
}

// A sync that changes no certificate does not walk every certificate: Lua's
// record (apply.LuaState.Held) and the plan (plan.Next.CertificatesFrom)
// go through only the chunks the model's list does not share with the last. A new
// Ingress without TLS beside 400 TLS Ingresses allocates what it does
// beside 40 (each certificate walked is its content copied and hashed, and
// a map entry: over 1 MB at 400).
func TestSyncWithoutCertificateChangeSkipsCertificates(t *testing.T) {
	bytes := map[int]uint64{}
	for _, tls := range []int{40, 400} {
		env := startNewIngressEnv(t, 20)
		addTLSIngresses(t, env, tls, 20)
		var least uint64
		for i := range 3 {
			env.write(fmt.Sprintf("plain-%d.yaml", i), benchIngressYAML(fmt.Sprintf("plain-%d", i), "f0"))
			waitForKind(t, env.s, source.KindIngress)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			if err := env.s.sync(env.ctx); err != nil {
				t.Fatal(err)
			}
			runtime.ReadMemStats(&after)
			if got := after.TotalAlloc - before.TotalAlloc; i == 0 || got < least {
				least = got
			}
		}
		bytes[tls] = least
		if len(env.s.problems) > 0 {
			t.Fatalf("%d problems, as %v", len(env.s.problems), env.s.problems[0])
		}
		env.stop()
	}
	t.Logf("bytes allocated by a new Ingress's sync (least of 3), by TLS Ingresses beside it: %v", bytes)
	if bytes[400] > bytes[40]+256<<10 {
		t.Errorf("a new Ingress without TLS allocates %d bytes beside 400 TLS Ingresses, %d beside 40: it walks the certificates", bytes[400], bytes[40])
	}
}

// A fast sync keeps the problems of the last build, and reports them
// without a walk: beside 1,000 problems (a tenant's invalid Ingresses) an
// endpoint change makes none of their keys again. A new problem still
// gets logged once.
func TestFastSyncDoesNotWalkTheProblems(t *testing.T) {
	var logs strings.Builder
	s := New(&fakeSource{}, nil, Options{}, slog.New(slog.NewTextHandler(&logs, nil)))
	var problems []model.Problem
	for i := range 1000 {
		problems = append(problems, model.Problem{Kind: "Ingress", Namespace: "tenant", Name: fmt.Sprintf("bad-%d", i), Reason: "bad path"})
	}
	s.reportProblems(problems)
	if got := strings.Count(logs.String(), "level=WARN"); got != 1000 {
		t.Fatalf("%d problems logged, want 1000", got)
	}
	if allocs := testing.AllocsPerRun(20, func() { s.reportProblems(problems) }); allocs > 0 {
		t.Errorf("the same problems again: %.0f allocations, want none", allocs)
	}
	logs.Reset()
	s.reportProblems(append(slices.Clone(problems), model.Problem{Kind: "EndpointSlice", Namespace: "tenant", Name: "s", Reason: "address refused"}))
	if got := strings.Count(logs.String(), "level=WARN"); got != 1 {
		t.Errorf("one new problem: %d logged, want 1:\n%s", got, logs.String())
	}
}

// A new Ingress after endpoint changes compares no backend with what Lua
// holds: the fast path made its list from the one Lua held and pushed its
// changes (apply.Step.BackendsFrom), and the Incremental's next build
// hands out that very list again (model.Incremental.PatchedBackends), so
// the plan knows the list is what Lua holds. It
// once compared every backend after any endpoint change (14 ms at 45,000
// backends here).
func TestNewIngressAfterAnEndpointChangeComparesNoBackend(t *testing.T) {
	env := startNewIngressEnv(t, 20)
	defer env.stop()
	logs := &syncLines{}
	env.s.logger = slog.New(logs)
	syncLine := func(kind source.Kind) string {
		t.Helper()
		waitForKind(t, env.s, kind)
		logs.reset()
		if err := env.s.sync(env.ctx); err != nil {
			t.Fatal(err)
		}
		return logs.last()
	}
	env.write("probe.yaml", probeYAML("10.255.0.1"))
	syncLine(source.KindIngress)
	env.write("new-0.yaml", benchIngressYAML("new-0", "f0"))
	if line := syncLine(source.KindIngress); !strings.Contains(line, "compared_backends=0 ") {
		t.Errorf("a new Ingress after a build: %s; want compared_backends=0", line)
	}
	for i := range 2 {
		env.write("probe.yaml", probeYAML(fmt.Sprintf("10.255.0.%d", i+2)))
		if line := syncLine(source.KindEndpointSlice); !strings.Contains(line, "path=fast") || !strings.Contains(line, "compared_backends=1 ") {
			t.Errorf("an endpoint change: %s; want path=fast, compared_backends=1", line)
		}
	}
	env.write("new-1.yaml", benchIngressYAML("new-1", "f0"))
	if line := syncLine(source.KindIngress); !strings.Contains(line, "compared_backends=0 ") {
		t.Errorf("a new Ingress after endpoint changes: %s; want compared_backends=0", line)
	}
}

// A new TLS Ingress with its own Service and Secret, at 600 TLS Ingresses
// (three chunks of backends and of certificates): the plan compares only
// the backends of the chunk the new one falls in (plan.Next.BackendsFrom,
// model.CompareLists), not every one, and pushes its one certificate; the
// model the syncer hands out (State) and Lua hold every certificate.
// Fails when the plan walks every backend (compared_backends=601).
func TestNewTLSIngressComparesItsChunks(t *testing.T) {
	const n = 600
	cert, key := testcert.New(t, 1, time.Now().Add(24*time.Hour), "*.bench.test")
	fillTLS = &struct{ cert, key string }{cert, key}
	env := startNewIngressEnv(t, n)
	fillTLS = nil
	defer env.stop()
	logs := &syncLines{}
	env.s.logger = slog.New(logs)
	env.write("new-0.yaml", benchOwnIngressYAML("new-0", 60000, cert, key))
	waitForKind(t, env.s, source.KindIngress)
	logs.reset()
	if err := env.s.sync(env.ctx); err != nil {
		t.Fatal(err)
	}
	line := logs.last()
	compared := -1
	if _, rest, ok := strings.Cut(line, "compared_backends="); ok {
		fmt.Sscanf(rest, "%d", &compared)
	}
	if compared < 1 || compared >= n || !strings.Contains(line, "cert_upserts=1 ") || !strings.Contains(line, "cert_removes=0 ") {
		t.Errorf("a new TLS Ingress with its Service: %s; want compared_backends of the chunk it falls in (< %d), cert_upserts=1, cert_removes=0", line, n)
	}
	if got := env.s.State().Model.Certificates.Len(); got != n+1 {
		t.Errorf("State: %d certificates, want %d", got, n+1)
	}
	held, err := env.nginx.Lua.Certificates(env.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != n+1 {
		t.Errorf("Lua holds %d certificates, want %d", len(held), n+1)
	}
}
