package syncer

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

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

// startNewRouteEnv writes a GatewayClass, a Gateway with one HTTP listener
// and n HTTPRoutes on it (500 to a file), starts nginx, the file source
// and a Syncer on them, and runs the first syncs (the second takes the
// addresses the first served).
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
	for start := 0; start < n; start += 500 {
		var buf strings.Builder
		for i := start; i < min(start+500, n); i++ {
			name := fmt.Sprintf("f%d", i)
			buf.WriteString(benchRouteYAML(name, name))
			fmt.Fprintf(&buf, "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: %s\n  namespace: default\nspec:\n  ports:\n  - name: http\n    port: 80\n    targetPort: 8080\n", name)
			fmt.Fprintf(&buf, "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: %s-1\n  namespace: default\n  labels:\n    kubernetes.io/service-name: %s\naddressType: IPv4\nports:\n- name: http\n  port: 8080\nendpoints:\n- addresses: [\"10.%d.%d.1\"]\n  conditions: {ready: true}\n- addresses: [\"10.%d.%d.2\"]\n  conditions: {ready: true}\n",
				name, name, i/256%256, i%256, i/256%256, i%256)
		}
		e.write(fmt.Sprintf("fill-%06d.yaml", start), buf.String())
	}
	nginx, settings, _ := agentnginx.Start(b)
	src := file.New(e.dir)
	e.s = New(src, nginx, Options{Render: settings, GatewayAddresses: []string{benchGatewayAddress}}, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	e.ctx, e.stop = ctx, cancel
	if err := src.Start(ctx, e.s.changed); err != nil {
		b.Fatal(err)
	}
	// The second sync takes the addresses the first served; a push of
	// every route may time out on a busy machine: the loop would retry.
	for i, synced := 0, 0; synced < 2; i++ {
		if err := e.s.sync(ctx); err != nil {
			if i > 5 {
				b.Fatal(err)
			}
			b.Logf("first syncs: %v (retrying)", err)
			continue
		}
		synced++
	}
	if got := len(e.s.built.GatewayAPI.Routes); got != n {
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
