package syncer

import (
	"encoding/base64"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/testenv/testcert"
)

var (
	heapIngresses = flag.Int("heap.n", 1000, "TestHeapAtScale: how many Ingresses (50000 for issue 31's scale)")
	heapStartGC   = flag.Int("heap.startgc", 50, "TestHeapAtScale: Go's GC percent while the source lists (the agent's startGCPercent)")
	heapProfile   = flag.String("heap.profile", "", "TestHeapAtScale: write the heap profile after the syncs here")
	heapDump      = flag.String("heap.dump", "", "TestHeapAtScale: write a heap dump (debug.WriteHeapDump) after the first sync here")
	heapChanges   = flag.Int("heap.changes", 20, "TestHeapAtScale: how many new Ingresses after the first sync")
	heapAllocs    = flag.String("heap.allocs", "", "TestHeapAtScale: write the allocs profile before and after the new Ingresses here (.0 and .1)")
	heapRoutes    = flag.Bool("heap.routes", false, "TestHeapAtScale: -heap.n HTTPRoutes on a Gateway (BenchmarkNewHTTPRoute's), and the changes new HTTPRoutes, instead of Ingresses")
	heapMetrics   = flag.Bool("heap.metrics", false, "TestHeapAtScale, BenchmarkNewIngress: the request metrics on (render.Settings.RequestMetrics, as the agent with a metrics address), each location with its labels")
	heapOwn       = flag.Bool("heap.own", false, "TestHeapAtScale: each new Ingress brings its own Service, EndpointSlice and TLS Secret (else it names an existing Service)")
	heapDict      = flag.Int("heap.dict", 0, "TestHeapAtScale, BenchmarkNewIngress: the size of Lua's shared dict in MB (render.Settings.LuaDictMB; 0: the default 64, which holds about 43,000 certificates: -heap.tls at 50,000 needs 256)")
	heapTLS       = flag.Bool("heap.tls", false, "TestHeapAtScale: each of the -heap.n Ingresses, and each new one, has spec.tls with its own TLS Secret (a certificate per Ingress)")
)

// fillTLS, when set, gives each Ingress startNewIngressEnv writes spec.tls
// and its own TLS Secret of this content (-heap.tls).
var fillTLS *struct{ cert, key string }

// firstSyncLog, when set, gets the log of startNewIngressEnv's first sync.
var firstSyncLog *syncLines

// heapListed, when set, is called by startNewIngressEnv once the source
// has listed, before the first sync.
var heapListed func()

// TestHeapAtScale measures the syncer's live heap and the heap in use
// (the spans the live heap keeps, which is what RSS follows) with -heap.n
// Ingresses, as BenchmarkNewIngress holds them: once the file source has
// listed (at the agent's GC percent of the listing), after the first sync,
// and after -heap.changes new Ingresses; and what each of those changes
// allocated, the source's publish and the saved state's write included (each change is saved before the next (FlushState), as
// a change that comes a second after the last is saved): the bytes a
// change allocates set how often the GC runs at that size. It is a
// measuring tool, not a check; the suite runs it at 1,000 so that it
// keeps working. -heap.routes measures HTTPRoutes instead (no "listed"
// figure: the routes are filled a part at a time), -heap.own new
// Ingresses that bring their own Service and Secret:
//
//	go test -run TestHeapAtScale -heap.n 50000 -v ./agent/internal/syncer
func TestHeapAtScale(t *testing.T) {
	measure := func(when string) {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		t.Logf("%s: HeapAlloc %.1f MB, HeapInuse %.1f MB, HeapObjects %d, Sys %.1f MB",
			when, float64(m.HeapAlloc)/1e6, float64(m.HeapInuse)/1e6, m.HeapObjects, float64(m.Sys)/1e6)
	}
	previous := debug.SetGCPercent(*heapStartGC)
	heapListed = func() {
		measure("listed")
		if *heapDump != "" {
			writeHeapDump(t, *heapDump+".listed")
		}
		debug.SetGCPercent(previous)
	}
	defer func() { heapListed = nil }()
	firstSyncLog = &syncLines{}
	defer func() { firstSyncLog = nil }()
	var env *newIngressEnv
	add := func() { env.add(t) }
	switch {
	case *heapRoutes:
		debug.SetGCPercent(previous)
		env = startNewRouteEnv(t, *heapIngresses)
		add = func() {
			name := fmt.Sprintf("new-%d", env.next)
			env.next++
			env.put(t, name+".yaml", benchRouteYAML(name, "f0"))
		}
	default:
		cert, key := testcert.New(t, 1, time.Now().Add(24*time.Hour), "*.bench.test")
		if *heapTLS {
			fillTLS = &struct{ cert, key string }{cert, key}
			defer func() { fillTLS = nil }()
		}
		env = startNewIngressEnv(t, *heapIngresses)
		switch {
		case *heapOwn:
			add = func() {
				name := fmt.Sprintf("new-%d", env.next)
				env.next++
				env.put(t, name+".yaml", benchOwnIngressYAML(name, 60000+env.next, cert, key))
			}
		case *heapTLS:
			add = func() {
				name := fmt.Sprintf("new-%d", env.next)
				env.next++
				env.put(t, name+".yaml", benchTLSIngressYAML(name, "f0", cert, key))
			}
		}
	}
	defer env.stop()
	// The saved state's write runs beside the syncs (apply's stateWriter),
	// and the first encodes every item: the agent waits for it before it
	// gives memory back (run.go), and so does the measure, or the figure
	// holds whatever part of that write was under way.
	t.Logf("first sync: %s", firstSyncLog.last())
	// FlushState, not only a wait for the running write: a save is
	// started at most once a second (the stage's writer), and the last
	// syncs before the measure (the fill of -heap.routes) may have left
	// one not started, which the first change would then pay (every
	// backend and route at once: 40 MB in one run at 50,000).
	env.s.stage.FlushState()
	measure("first sync")
	if *heapDump != "" {
		writeHeapDump(t, *heapDump)
	}
	writeAllocs := func(suffix string) { writeAllocsProfile(t, *heapAllocs, suffix) }
	writeAllocs(".0")
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range *heapChanges {
		add()
		if err := env.s.sync(env.ctx); err != nil {
			t.Fatal(err)
		}
		// Each change saved, as a change that comes a second after the
		// last is: the writer starts at most one save a second, so a wait
		// alone saved as many changes as the run took seconds.
		env.s.stage.FlushState()
	}
	runtime.ReadMemStats(&after)
	writeAllocs(".1")
	if n := *heapChanges; n > 0 {
		t.Logf("each new %s allocated %.0f KB (%d objects), publish to saved state", changeKind(), float64(after.TotalAlloc-before.TotalAlloc)/1e3/float64(n), (after.Mallocs-before.Mallocs)/uint64(n))
	}
	measure(fmt.Sprintf("%d changes later (each a new %s; the model has %d backends, %d certificates)",
		*heapChanges, changeKind(), env.s.built.Backends.Len(), env.s.built.Certificates.Len()))
	if *heapProfile != "" {
		f, err := os.Create(*heapProfile)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			t.Fatal(err)
		}
	}
}

// writeAllocsProfile writes the allocs profile, as of a GC made now, to
// path+suffix; nothing when path is "".
func writeAllocsProfile(t *testing.T, path, suffix string) {
	if path == "" {
		return
	}
	runtime.GC() // the profile is as of the last GC
	f, err := os.Create(path + suffix)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		t.Fatal(err)
	}
}

// writeHeapDump writes the runtime's heap dump (debug.WriteHeapDump) to
// path: every live object with its address and size, from which the free
// room in the spans in use can be found size class by size class.
func writeHeapDump(t *testing.T, path string) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	debug.WriteHeapDump(f.Fd())
}

// changeKind names what TestHeapAtScale's changes add.
func changeKind() string {
	switch {
	case *heapRoutes:
		return "HTTPRoute"
	case *heapOwn:
		return "Ingress with its Service and Secret"
	case *heapTLS:
		return "TLS Ingress with its Secret"
	}
	return "Ingress"
}

// benchOwnIngressYAML is the Ingress name with its own Service, a
// 2-endpoint EndpointSlice (addresses from i) and a TLS Secret
// (certPEM, keyPEM) its spec.tls names.
func benchOwnIngressYAML(name string, i int, certPEM, keyPEM string) string {
	var buf strings.Builder
	buf.WriteString(benchTLSIngressYAML(name, name, certPEM, keyPEM))
	fmt.Fprintf(&buf, "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: %s\n  namespace: default\nspec:\n  ports:\n  - name: http\n    port: 80\n    targetPort: 8080\n", name)
	fmt.Fprintf(&buf, "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: %s-1\n  namespace: default\n  labels:\n    kubernetes.io/service-name: %s\naddressType: IPv4\nports:\n- name: http\n  port: 8080\nendpoints:\n- addresses: [\"10.%d.%d.1\"]\n  conditions: {ready: true}\n- addresses: [\"10.%d.%d.2\"]\n  conditions: {ready: true}\n",
		name, name, i/256%256, i%256, i/256%256, i%256)
	return buf.String()
}

// benchTLSIngressYAML is the Ingress name of host name.bench.test, which
// names service, with spec.tls naming its own TLS Secret (certPEM,
// keyPEM), and that Secret.
func benchTLSIngressYAML(name, service, certPEM, keyPEM string) string {
	var buf strings.Builder
	fmt.Fprintf(&buf, "---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: %s\n  namespace: default\nspec:\n  ingressClassName: restysync\n  tls:\n  - hosts: [%s.bench.test]\n    secretName: %s-tls\n  rules:\n  - host: %s.bench.test\n    http:\n      paths:\n      - path: /\n        pathType: Prefix\n        backend:\n          service:\n            name: %s\n            port:\n              number: 80\n", name, name, name, name, service)
	fmt.Fprintf(&buf, "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: %s-tls\n  namespace: default\ntype: kubernetes.io/tls\ndata:\n  tls.crt: %s\n  tls.key: %s\n",
		name, base64.StdEncoding.EncodeToString([]byte(certPEM)), base64.StdEncoding.EncodeToString([]byte(keyPEM)))
	return buf.String()
}
