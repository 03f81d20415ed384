//go:build bench

package bench

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
	"github.com/restysync/restysync/agent/internal/testenv/podnet"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"
)

// b11Samples replaces B11's sample count (a longer run, to see how often a
// slow sample comes, say).
var b11Samples = flag.Int("b11-samples", 0, "B11, B11-route: samples a size (default 200; 8 with -quick)")

// b11Sizes replaces B11's sizes (a run of the largest alone, say).
var b11Sizes = flag.String("b11-sizes", "", "B11, B11-route: the sizes, comma-separated (default 1000,10000,50000; 200,1000,2000 with -quick)")

// TestB11NewIngressAtScale measures a new Ingress → first 200 through
// nginx with 1,000, 10,000 and 50,000 Ingresses present (each with its
// own Service and a 2-endpoint EndpointSlice), one agent a size side by
// side in one run, with the file source (the API server would take most
// of the run to hold 150,000 objects): the cost of a change should follow
// the change (issue 31), so the 50,000 figure is compared with the 1,000
// one.
func TestB11NewIngressAtScale(t *testing.T) {
	if !wanted("B11") {
		t.Skip("not selected")
	}
	b11AtScale(t, "B11", false)
}

// TestB11NewHTTPRouteAtScale is B11 for the Gateway API: a new HTTPRoute
// → first 200 through the Gateway's listener with 1,000, 10,000 and
// 50,000 HTTPRoutes present on one Gateway (each with its own Service and
// slice).
func TestB11NewHTTPRouteAtScale(t *testing.T) {
	if !wanted("B11-route") {
		t.Skip("not selected")
	}
	b11AtScale(t, "B11-route", true)
}

// b11AtScale runs B11 (routes false: Ingresses) or B11-route (HTTPRoutes)
// and reports its rows under id.
func b11AtScale(t *testing.T, id string, routes bool) {
	podnet.Require(t)
	sizes := []int{1000, 10000, 50000}
	// Two hundred samples a size. The p99 (summarize: the sample at
	// 0.99·n) of a hundred was the slowest sample, and at 50,000 that was
	// whether a GC cycle of the agent's heap fell among the samples: a
	// change there allocated about 1 MB (the copies of the 50,000-pointer
	// lists; 153 KB since they are model.Lists), so the GC ran every ~150
	// changes (2 cycles in 300 samples),
	// and its mark of the ~215 MB live heap took 0.6–0.8 s on both cores
	// (idle mark workers), during which the one or two samples it met took
	// 15–53 ms (p50 8.6; machine at load 12). At 1,000 a GC comes every
	// ~30 changes with 5–40 ms of mark and slowed no sample. A hundred samples
	// met one about every other run (the ratio met in 3 of 4 runs); two
	// hundred meet one in most runs and the p99 is the second slowest, so
	// the figure says what a change costs with the agent's GC in it, not
	// whether a cycle happened to come (with twenty, one late sample on
	// this shared machine decided the ratio). About 200 s of samples.
	n := 200
	if *quick {
		sizes, n = []int{200, 1000, 2000}, 8
	}
	if *b11Samples > 0 {
		n = *b11Samples
	}
	if *b11Sizes != "" {
		sizes = nil
		for _, field := range strings.Split(*b11Sizes, ",") {
			size, err := strconv.Atoi(field)
			if err != nil || size < 1 {
				t.Fatalf("-b11-sizes: %q is not a size", field)
			}
			sizes = append(sizes, size)
		}
	}
	kind, of := "Ingress", "Ingresses"
	if routes {
		kind, of = "HTTPRoute", "HTTPRoutes"
	}
	pod := podnet.New(t, "pod-b11")
	staging := t.TempDir()
	// write puts objs in the file name of dir.
	write := func(dir, name string, objs ...runtime.Object) {
		t.Helper()
		var buf strings.Builder
		for _, obj := range objs {
			data, err := yaml.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			buf.WriteString("---\n")
			buf.Write(data)
		}
		// Written aside and renamed in, so the source reads it whole.
		tmp := filepath.Join(staging, name)
		if err := os.WriteFile(tmp, []byte(buf.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	typed := func(obj runtime.Object, kind schema.GroupVersionKind) runtime.Object {
		obj.GetObjectKind().SetGroupVersionKind(kind)
		return obj
	}
	ingressKind := schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}
	routeKind := schema.GroupVersionKind{Group: gatewayv1.GroupName, Version: "v1", Kind: "HTTPRoute"}
	serviceKind := schema.GroupVersionKind{Version: "v1", Kind: "Service"}
	sliceKind := schema.GroupVersionKind{Group: "discovery.k8s.io", Version: "v1", Kind: "EndpointSlice"}
	// object is the Ingress or HTTPRoute name routing host to service.
	object := func(name, host, service string) runtime.Object {
		if routes {
			return typed(httpRoute(name, host, service), routeKind)
		}
		return typed(ingress(name, host, service), ingressKind)
	}
	// fill writes size objects to dir, 500 to a file.
	fill := func(dir string, size int) {
		for start := 0; start < size; start += 500 {
			var objs []runtime.Object
			for i := start; i < min(start+500, size); i++ {
				name := fmt.Sprintf("f%d", i)
				objs = append(objs, object(name, name+".b11.test", name),
					typed(service(name), serviceKind), typed(slice(name, fakeAddrs(2*i, 2)...), sliceKind))
			}
			write(dir, fmt.Sprintf("fill-%06d.yaml", start), objs...)
		}
	}
	class := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "restysync"},
		Spec: networkingv1.IngressClassSpec{Controller: controllerName}}
	setup := []runtime.Object{typed(class, schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "IngressClass"}),
		typed(service("b11"), serviceKind), typed(slice("b11", pod.IP), sliceKind)}

	// One agent (and nginx) a size, each on its own folder; the samples
	// are taken in turns, one a size each round (the order rotating), so
	// that what else this shared machine does at a moment falls on every
	// size alike and the ratio compares sizes, not moments: with the sizes
	// one after the other, a minute of a neighbour's load at 10,000 once
	// made 10,000 slower than 50,000.
	type sized struct {
		size    int
		dir     string
		a       *agent
		admin   string
		waitFor func(host, path, want string, bound time.Duration) time.Duration
	}
	var agents []*sized
	for k, size := range sizes {
		s := &sized{size: size, dir: t.TempDir()}
		var extra []string
		gatewayPort := 0
		if routes {
			gatewayPort = nginxproc.FreePort(t)
			gatewayClass := &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "restysync"},
				Spec: gatewayv1.GatewayClassSpec{ControllerName: gatewayv1.GatewayController(model.GatewayControllerName)}}
			gateway := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: benchNS},
				Spec: gatewayv1.GatewaySpec{GatewayClassName: "restysync", Listeners: []gatewayv1.Listener{
					{Name: "http", Protocol: gatewayv1.HTTPProtocolType, Port: gatewayv1.PortNumber(gatewayPort)}}}}
			write(s.dir, "gateway.yaml", typed(gatewayClass, schema.GroupVersionKind{Group: gatewayv1.GroupName, Version: "v1", Kind: "GatewayClass"}),
				typed(gateway, schema.GroupVersionKind{Group: gatewayv1.GroupName, Version: "v1", Kind: "Gateway"}))
			extra = []string{"--gateway-addresses", gatewayAddress}
		}
		// Each agent its own admin address (the default is one port).
		admin := "127.0.0.1:" + strconv.Itoa(nginxproc.FreePort(t))
		extra = append(extra, "--metrics-address", admin)
		if *profileDir != "" && k == len(sizes)-1 {
			s.admin = admin
			extra = append(extra, "--profiling")
		}
		write(s.dir, "b11.yaml", setup...)
		fill(s.dir, size)
		write(s.dir, "ready.yaml", object("ready", "ready.b11.test", "b11"))
		s.a = startAgentOn(t, []string{"--source", "file:" + s.dir}, extra...)
		s.waitFor = s.a.waitFor
		if routes {
			client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
				DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
					var d net.Dialer
					return d.DialContext(ctx, network, net.JoinHostPort(gatewayAddress, strconv.Itoa(gatewayPort)))
				},
			}}
			a := s.a
			s.waitFor = func(host, path, _ string, bound time.Duration) time.Duration {
				t.Helper()
				return timeUntil(t, a, host, bound, func() (bool, string) {
					req, _ := http.NewRequest(http.MethodGet, "http://"+host+path, nil)
					status, body := fetch(client, req)
					return status == http.StatusOK, fmt.Sprintf("%d %s", status, body)
				})
			}
		}
		s.waitFor("ready.b11.test", "/", "", 300*time.Second)
		agents = append(agents, s)
	}
	for _, s := range agents {
		s.a.waitIdle(time.Second, 60*time.Second)
	}
	from := make([]int, len(agents))
	for k, s := range agents {
		from[k] = s.a.log.Len()
	}

	// With -profile-dir, every size's samples are written (when each
	// began, how long it took), and the largest size's agent is profiled
	// over the samples: its CPU, and a runtime trace (what ran when:
	// goroutines, GC, the scheduler), to line up slow samples with.
	largest := agents[len(agents)-1]
	profiled, traced := make(chan []byte, 1), make(chan []byte, 1)
	if largest.admin != "" {
		saveProfile(t, fmt.Sprintf("%s-%d-allocs0.pprof", id, largest.size), fetchProfile(fmt.Sprintf("http://%s/debug/pprof/allocs", largest.admin)))
		// The samples take a little over 300 ms each.
		seconds := n*len(agents)*35/100 + 1
		go func() {
			profiled <- fetchProfile(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", largest.admin, seconds))
		}()
		go func() {
			traced <- fetchProfile(fmt.Sprintf("http://%s/debug/pprof/trace?seconds=%d", largest.admin, seconds))
		}()
	}
	latencies := make([][]time.Duration, len(agents))
	samples := make([]strings.Builder, len(agents))
	for i := range n {
		for j := range agents {
			k := (i + j) % len(agents)
			s := agents[k]
			name := fmt.Sprintf("new-%d-%d", s.size, i)
			began := time.Now()
			write(s.dir, name+".yaml", object(name, name+".b11.test", "b11"))
			// A minute: before issue 31 a full sync took seconds at 50,000.
			took := s.waitFor(name+".b11.test", "/", "", time.Minute)
			latencies[k] = append(latencies[k], took)
			fmt.Fprintf(&samples[k], "%s %s %s\n", began.UTC().Format("15:04:05.000000"), name, took.Round(10*time.Microsecond))
			time.Sleep(300 * time.Millisecond) // let the syncs of this one end
		}
	}
	if largest.admin != "" {
		saveProfile(t, fmt.Sprintf("%s-%d-allocs1.pprof", id, largest.size), fetchProfile(fmt.Sprintf("http://%s/debug/pprof/allocs", largest.admin)))
		saveProfile(t, fmt.Sprintf("%s-%d-cpu.pprof", id, largest.size), <-profiled)
		saveProfile(t, fmt.Sprintf("%s-%d-trace.out", id, largest.size), <-traced)
		saveProfile(t, id+"-agent.log", []byte(largest.a.log.String()))
	}
	results := map[int]stats{}
	var lines []string
	for k, s := range agents {
		results[s.size] = summarize(latencies[k])
		if *profileDir != "" {
			fmt.Fprintf(&samples[k], "agent RSS after the samples: %.0f MB\n", float64(s.a.rssKiB())/1024)
			saveProfile(t, fmt.Sprintf("%s-%d-samples.txt", id, s.size), []byte(samples[k].String()))
		}
		for _, line := range strings.Split(s.a.log.String()[from[k]:], "\n") {
			if strings.Contains(line, "msg=sync ") && strings.Contains(line, "new-") {
				t.Logf("%d: %s", s.size, line)
				lines = append(lines, fmt.Sprintf("%d: %s", s.size, syncFields(line)))
				break
			}
		}
	}
	for _, size := range sizes {
		r := results[size]
		report(t, Row{ID: fmt.Sprintf("%s-%d", id, size), What: fmt.Sprintf("new %s → first 200, %d %s present (file source)", kind, size, of),
			Target: "p99 ≤ 50 ms", Measured: r.String(), Pass: r.n > 0 && r.p99 <= 50*time.Millisecond,
			Note: "each " + kind + " with its own Service and a 2-endpoint EndpointSlice; one agent a size, the sizes' samples taken in turns"})
	}
	first, last := results[sizes[0]], results[sizes[len(sizes)-1]]
	ratio := float64(last.p50) / float64(first.p50)
	ratio99 := float64(last.p99) / float64(first.p99)
	report(t, Row{ID: id + "-ratio", What: fmt.Sprintf("%s at %d over %s at %d %s", id, sizes[len(sizes)-1], id, sizes[0], of), Target: "≤ 1.5×",
		Measured: fmt.Sprintf("p50 %.2f×, p99 %.2f×", ratio, ratio99), Pass: first.n > 0 && ratio99 <= 1.5,
		Note: "measured side by side in one run (one agent a size, samples in turns); the first new " + kind + "'s sync at each size: " + strings.Join(lines, "; ")})
}

// syncFields are the path, build and render fields of a sync log line.
func syncFields(line string) string {
	var kept []string
	for _, field := range strings.Fields(line) {
		if strings.HasPrefix(field, "path=") || strings.HasPrefix(field, "build=") || strings.HasPrefix(field, "render=") {
			kept = append(kept, field)
		}
	}
	return strings.Join(kept, " ")
}
