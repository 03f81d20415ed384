package syncer

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"flag"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/trace"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/source"
)

var (
	tailIngresses = flag.Int("tail.n", 1000, "TestEndpointTailAtScale: how many Ingresses (50000 for issue 31's scale)")
	tailChanges   = flag.Int("tail.changes", 200, "TestEndpointTailAtScale: how many endpoint changes")
	tailEvery     = flag.Int("tail.every", 0, "TestEndpointTailAtScale: a new Ingress (an incremental sync) before every that many endpoint changes (0: none)")
	tailTrace     = flag.String("tail.trace", "", "TestEndpointTailAtScale: write a runtime/trace of the changes' syncs here")
	tailTLS       = flag.Int("tail.tls", 0, "TestEndpointTailAtScale: that many more Ingresses, each with TLS from a Secret of its own")
)

// TestEndpointTailAtScale is B6@50k-B1's sync in-process: the endpoints of
// one Service changed (its EndpointSlice rewritten between two addresses)
// beside -tail.n Ingresses as BenchmarkNewIngress holds them, each change
// synced on the fast path and timed. With -tail.every k a new Ingress comes
// before every k-th change, so that a fast sync follows a model build as it
// does after every Ingress change in a cluster. It logs the distribution of
// the syncs' durations and, for the slowest, the sync's own log figures and
// what the Go runtime did meanwhile (GC cycles ended, assist and pause CPU,
// bytes allocated). It is a measuring tool, not a check; the suite runs it
// at 1,000 so that it keeps working:
//
//	go test -run TestEndpointTailAtScale -tail.n 50000 -v ./agent/internal/syncer
func TestEndpointTailAtScale(t *testing.T) {
	env := startNewIngressEnv(t, *tailIngresses)
	defer env.stop()
	logs := &syncLines{}
	env.s.logger = slog.New(logs)
	if *tailTLS > 0 {
		addTLSIngresses(t, env, *tailTLS, *tailIngresses)
	}
	env.write("probe.yaml", probeYAML("10.255.0.1"))
	waitForKind(t, env.s, source.KindIngress)
	if err := env.s.sync(env.ctx); err != nil {
		t.Fatal(err)
	}
	if *tailTrace != "" {
		f, err := os.Create(*tailTrace)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := trace.Start(f); err != nil {
			t.Fatal(err)
		}
		defer trace.Stop()
	}
	// The syncs run on this goroutine, locked to its thread: the thread's
	// CPU time is the sync's own work (and its GC assists), without the
	// time it waited for a CPU on a busy machine.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	type sample struct {
		i       int
		d, cpu  time.Duration
		path    string
		after   bool // the first change after a new Ingress
		line    string
		runtime runtimeDelta
	}
	var samples []sample
	var newIngress []time.Duration
	var newLines []string
	for i := range *tailChanges {
		after := false
		if *tailEvery > 0 && i%*tailEvery == 0 {
			env.write(fmt.Sprintf("new-%d.yaml", i), benchIngressYAML(fmt.Sprintf("new-%d", i), "f0"))
			waitForKind(t, env.s, source.KindIngress)
			logs.reset()
			start := time.Now()
			if err := env.s.sync(env.ctx); err != nil {
				t.Fatal(err)
			}
			newIngress = append(newIngress, time.Since(start))
			newLines = append(newLines, logs.last())
			after = true
		}
		env.write("probe.yaml", probeYAML(fmt.Sprintf("10.255.0.%d", 1+(i+1)%2)))
		waitForKind(t, env.s, source.KindEndpointSlice)
		logs.reset()
		before := readRuntime()
		region := trace.StartRegion(context.Background(), "endpoint sync")
		cpuStart := threadCPU(t)
		start := time.Now()
		err := env.s.sync(env.ctx)
		d := time.Since(start)
		cpu := threadCPU(t) - cpuStart
		region.End()
		delta := readRuntime().minus(before)
		if err != nil {
			t.Fatal(err)
		}
		line := logs.last()
		path := "?"
		if strings.Contains(line, "path=fast") {
			path = "fast"
		}
		samples = append(samples, sample{i: i, d: d, cpu: cpu, path: path, after: after, line: line, runtime: delta})
	}
	durations := func(keep func(sample) bool) []time.Duration {
		var out []time.Duration
		for _, s := range samples {
			if keep(s) {
				out = append(out, s.d)
			}
		}
		slices.Sort(out)
		return out
	}
	cpus := func(keep func(sample) bool) []time.Duration {
		var out []time.Duration
		for _, s := range samples {
			if keep(s) {
				out = append(out, s.cpu)
			}
		}
		slices.Sort(out)
		return out
	}
	t.Logf("all %d syncs: %s", len(samples), distribution(durations(func(sample) bool { return true })))
	t.Logf("fast: %s", distribution(durations(func(s sample) bool { return s.path == "fast" })))
	t.Logf("CPU of the sync's thread, all: %s", distribution(cpus(func(sample) bool { return true })))
	if *tailEvery > 0 {
		t.Logf("first after a new Ingress: %s", distribution(durations(func(s sample) bool { return s.after })))
		t.Logf("the others: %s", distribution(durations(func(s sample) bool { return !s.after })))
		t.Logf("CPU, first after a new Ingress: %s", distribution(cpus(func(s sample) bool { return s.after })))
		t.Logf("CPU, the others: %s", distribution(cpus(func(s sample) bool { return !s.after })))
		t.Logf("the new Ingresses' syncs: %s; the last: %s", distribution(slices.Sorted(slices.Values(newIngress))), newLines[len(newLines)-1])
	}
	var total runtimeDelta
	for _, s := range samples {
		total = total.plus(s.runtime)
	}
	t.Logf("over the syncs: %s", total)
	slowest := slices.Clone(samples)
	slices.SortFunc(slowest, func(a, b sample) int { return int(b.d - a.d) })
	for _, s := range slowest[:min(8, len(slowest))] {
		t.Logf("slow #%d %s cpu %s after_new_ingress=%v %s | %s", s.i, s.d.Round(10*time.Microsecond), s.cpu.Round(10*time.Microsecond), s.after, s.runtime, s.line)
	}
}

// addTLSIngresses adds n Ingresses tls0… (host tlsN.bench.test, Service
// f(N mod services)), each with TLS from its own Secret (one RSA key and certificate for
// *.bench.test, the size of a real one), 250 to a file (a file is one sync: one push of
// 1,000 outlasted the Lua client's timeout on a busy machine), each file
// synced as it comes.
func addTLSIngresses(t *testing.T, env *newIngressEnv, n, services int) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "*.bench.test"}, DNSNames: []string{"*.bench.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(365 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	crt, k := base64.StdEncoding.EncodeToString(certPEM), base64.StdEncoding.EncodeToString(keyPEM)
	for start := 0; start < n; start += 250 {
		var b strings.Builder
		for i := start; i < min(start+250, n); i++ {
			name := fmt.Sprintf("tls%d", i)
			fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: %s\n  namespace: default\ntype: kubernetes.io/tls\ndata:\n  tls.crt: %s\n  tls.key: %s\n", name, crt, k)
			fmt.Fprintf(&b, "---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: %s\n  namespace: default\nspec:\n  ingressClassName: restysync\n  tls:\n  - hosts: [%s.bench.test]\n    secretName: %s\n  rules:\n  - host: %s.bench.test\n    http:\n      paths:\n      - path: /\n        pathType: Prefix\n        backend:\n          service:\n            name: f%d\n            port:\n              number: 80\n",
				name, name, name, name, i%services)
		}
		env.write(fmt.Sprintf("tls-%06d.yaml", start), b.String())
		waitForKind(t, env.s, source.KindSecret)
		if err := env.s.sync(env.ctx); err != nil {
			t.Fatal(err)
		}
	}
	// A publish may still be gathering the last file when the flag of an
	// earlier one is seen: sync again until every certificate is in.
	deadline := time.Now().Add(30 * time.Second)
	for env.s.built.Certificates.Len() != n && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		if err := env.s.sync(env.ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := env.s.built.Certificates.Len(); got != n {
		t.Fatalf("%d certificates, want %d", got, n)
	}
}

// threadCPU is the CPU time of the calling thread (RUSAGE_THREAD).
func threadCPU(t testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rusageThread is Linux's RUSAGE_THREAD.
const rusageThread = 1

// waitForKind waits until s has a change of kind to sync (the dirty
// signal may have been taken by a put before, or be one a sync left).
func waitForKind(t testing.TB, s *Syncer, kind source.Kind) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.kindsMu.Lock()
		ok := s.kinds[kind]
		s.kindsMu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the source did not report a change of %s", kind)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// distribution is p50, p99 and max of sorted durations.
func distribution(d []time.Duration) string {
	if len(d) == 0 {
		return "none"
	}
	at := func(q float64) time.Duration { return d[min(len(d)-1, int(q*float64(len(d))))] }
	return fmt.Sprintf("n=%d p50 %s p90 %s p99 %s max %s", len(d), at(0.5).Round(10*time.Microsecond),
		at(0.9).Round(10*time.Microsecond), at(0.99).Round(10*time.Microsecond), d[len(d)-1].Round(10*time.Microsecond))
}

// runtimeDelta is what the Go runtime did between two readings.
type runtimeDelta struct {
	gcCycles      uint64
	assist, pause float64 // CPU seconds
	allocs        uint64  // bytes
}

var runtimeNames = []string{"/gc/cycles/total:gc-cycles", "/cpu/classes/gc/mark/assist:cpu-seconds",
	"/cpu/classes/gc/pause:cpu-seconds", "/gc/heap/allocs:bytes"}

func readRuntime() runtimeDelta {
	s := make([]metrics.Sample, len(runtimeNames))
	for i, name := range runtimeNames {
		s[i].Name = name
	}
	metrics.Read(s)
	return runtimeDelta{gcCycles: s[0].Value.Uint64(), assist: s[1].Value.Float64(), pause: s[2].Value.Float64(), allocs: s[3].Value.Uint64()}
}

func (r runtimeDelta) minus(o runtimeDelta) runtimeDelta {
	return runtimeDelta{r.gcCycles - o.gcCycles, r.assist - o.assist, r.pause - o.pause, r.allocs - o.allocs}
}

func (r runtimeDelta) plus(o runtimeDelta) runtimeDelta {
	return runtimeDelta{r.gcCycles + o.gcCycles, r.assist + o.assist, r.pause + o.pause, r.allocs + o.allocs}
}

func (r runtimeDelta) String() string {
	return fmt.Sprintf("gc_cycles_ended=%d assist_cpu=%.2fms pause_cpu=%.2fms alloc=%.1fKB",
		r.gcCycles, r.assist*1e3, r.pause*1e3, float64(r.allocs)/1e3)
}

// syncLines keeps the last "sync" log line, as text.
type syncLines struct {
	mu   sync.Mutex
	line string
}

func (h *syncLines) Enabled(context.Context, slog.Level) bool { return true }
func (h *syncLines) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *syncLines) WithGroup(string) slog.Handler            { return h }
func (h *syncLines) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "sync" && r.Message != "sync failed" {
		return nil
	}
	var b strings.Builder
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "action", "path", "build", "render", "status", "plan", "compared_backends", "push", "bytes", "duration", "upserts", "cert_upserts", "cert_removes":
			fmt.Fprintf(&b, "%s=%s ", a.Key, a.Value)
		}
		return true
	})
	h.mu.Lock()
	h.line = b.String()
	h.mu.Unlock()
	return nil
}

func (h *syncLines) reset() { h.mu.Lock(); h.line = ""; h.mu.Unlock() }
func (h *syncLines) last() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.line
}

// probeYAML is the Service probe, its one EndpointSlice with the endpoint
// addr, and an Ingress routing to it: rewritten with another addr, an
// endpoint change of the fast path.
func probeYAML(addr string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata:\n  name: probe\n  namespace: default\nspec:\n  ports:\n  - name: http\n    port: 80\n    targetPort: 8080\n"+
		"---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: probe-1\n  namespace: default\n  labels:\n    kubernetes.io/service-name: probe\naddressType: IPv4\nports:\n- name: http\n  port: 8080\nendpoints:\n- addresses: [%q]\n  conditions: {ready: true}\n%s",
		addr, benchIngressYAML("probe", "probe"))
}
