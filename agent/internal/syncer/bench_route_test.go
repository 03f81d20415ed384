package syncer

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/source/file"
	"github.com/restysync/restysync/agent/internal/testenv/agentnginx"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// BenchmarkNewHTTPRoute is B11-route's sync in-process: one new HTTPRoute
// beside n others on one Gateway (each with its own hostname, Service and
// a 2-endpoint EndpointSlice), read by the file source, through the whole
// sync as BenchmarkNewIngress.
func BenchmarkNewHTTPRoute(b *testing.B) {
	for _, n := range []int{1000, 10000, 50000} {
		var env *newIngressEnv
		b.Run(fmt.Sprintf("httproutes=%d", n), func(b *testing.B) {
			if env == nil {
				env = startNewRouteEnv(b, n)
			}
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				name := fmt.Sprintf("new-%d", env.next)
				env.next++
				env.put(b, name+".yaml", benchRouteYAML(name, "f0"))
				b.StartTimer()
				if err := env.s.sync(env.ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
		if env != nil {
			env.stop()
		}
	}
}

// benchGatewayAddress is the bench Gateway's address.
const benchGatewayAddress = "127.0.61.38"

// startNewRouteEnv writes a GatewayClass and a Gateway with one HTTP
// listener, starts nginx, the file source and a Syncer on them, and adds n
// HTTPRoutes on the Gateway (500 to a file), syncing as they come.
func startNewRouteEnv(b testing.TB, n int) *newIngressEnv {
	b.Helper()
	e := &newIngressEnv{dir: b.TempDir()}
	staging := b.TempDir()
	e.write = func(name, content string) { writeRenamed(b, staging, e.dir, name, content) }
	e.write("gateway.yaml", fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata:
  name: restysync
spec:
  controllerName: %s
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: bench
  namespace: default
spec:
  gatewayClassName: restysync
  listeners:
  - name: http
    protocol: HTTP
    port: %d
`, model.GatewayControllerName, nginxproc.FreePort(b)))
	nginx, settings, _ := agentnginx.Start(b)
	src := file.New(e.dir)
	e.s = New(src, nginx, Options{Render: settings, GatewayAddresses: []string{benchGatewayAddress}}, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	e.ctx, e.stop = ctx, cancel
	if err := src.Start(ctx, e.s.changed); err != nil {
		b.Fatal(err)
	}
	// Filled 2,500 routes at a time, each step synced until it serves
	// them: one push of 50,000 routes may not end within the Lua
	// client's timeout on a busy machine.
	const step = 2500
	for start := 0; start < n; start += step {
		for file := start; file < min(start+step, n); file += 500 {
			e.write(fmt.Sprintf("fill-%06d.yaml", file), benchRouteFill(file, min(file+500, n)))
		}
		want := min(start+step, n)
		deadline := time.Now().Add(2 * time.Minute)
		for e.s.built == nil || e.s.built.GatewayAPI.Routes.Len() != want || e.s.buildPath.Globals {
			if time.Now().After(deadline) {
				b.Fatalf("the fill did not reach %d routes", want)
			}
			if err := e.s.sync(ctx); err != nil {
				b.Logf("fill: %v (retrying)", err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// Syncs with nothing new until one is applied.
	for i := 0; ; i++ {
		err := e.s.sync(ctx)
		if err == nil {
			break
		}
		if i == 5 {
			b.Fatal(err)
		}
	}
	if got := e.s.built.GatewayAPI.Routes.Len(); got != n {
		b.Fatalf("first sync has %d route statuses, want %d", got, n)
	}
	return e
}

func benchRouteYAML(name, service string) string {
	return fmt.Sprintf("---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  name: %s\n  namespace: default\nspec:\n  parentRefs:\n  - name: bench\n  hostnames: [%s.bench.test]\n  rules:\n  - backendRefs:\n    - name: %s\n      port: 80\n", name, name, service)
}

// writeRenamed writes content to staging/name and renames it to dir/name,
// so the source reads the file whole.
func writeRenamed(b testing.TB, staging, dir, name, content string) {
	b.Helper()
	tmp := filepath.Join(staging, name)
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		b.Fatal(err)
	}
}

// benchRouteFill is the HTTPRoutes f<from>..f<to-1>, each with its
// Service and a 2-endpoint EndpointSlice.
func benchRouteFill(from, to int) string {
	var buf strings.Builder
	for i := from; i < to; i++ {
		name := fmt.Sprintf("f%d", i)
		buf.WriteString(benchRouteYAML(name, name))
		fmt.Fprintf(&buf, "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: %s\n  namespace: default\nspec:\n  ports:\n  - name: http\n    port: 80\n    targetPort: 8080\n", name)
		fmt.Fprintf(&buf, "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: %s-1\n  namespace: default\n  labels:\n    kubernetes.io/service-name: %s\naddressType: IPv4\nports:\n- name: http\n  port: 8080\nendpoints:\n- addresses: [\"10.%d.%d.1\"]\n  conditions: {ready: true}\n- addresses: [\"10.%d.%d.2\"]\n  conditions: {ready: true}\n",
			name, name, i/256%256, i%256, i/256%256, i%256)
	}
	return buf.String()
}

// TestNewHTTPRouteRendersItsRouteAlone: a new HTTPRoute beside others in
// route islands is rendered from the model's hint of its changed Gateway
// routes (render.Cache.GatewayRoutesChanged): the render looks at the new
// route alone, not at every Gateway route. Fails without the syncer
// handing the render that hint.
func TestNewHTTPRouteRendersItsRouteAlone(t *testing.T) {
	env := startNewRouteEnv(t, 200)
	defer env.stop()
	followed := 0
	for i := range 5 {
		name := fmt.Sprintf("new-%d", i)
		env.put(t, name+".yaml", benchRouteYAML(name, "f0"))
		// The source may have reported an earlier change: sync until
		// the new route is built.
		for tries := 0; env.s.built.GatewayAPI.Routes.Len() != 201+i; tries++ {
			if tries == 100 {
				t.Fatalf("%s: %d route statuses, want %d", name, env.s.built.GatewayAPI.Routes.Len(), 201+i)
			}
			time.Sleep(10 * time.Millisecond)
			if err := env.s.sync(env.ctx); err != nil {
				t.Fatal(err)
			}
		}
		stats := env.s.renderCache.Stats()
		if !stats.GatewayWalked && !stats.Whole && stats.GatewayRoutes == 1 {
			followed++
		}
	}
	if followed < 4 {
		t.Errorf("only %d of 5 new HTTPRoutes were rendered from the model's hint alone (render.Cache.GatewayRoutesChanged)", followed)
	}
}
