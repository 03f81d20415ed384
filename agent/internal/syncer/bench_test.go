package syncer

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/apply"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
	"github.com/restysync/restysync/agent/internal/source/file"
	"github.com/restysync/restysync/agent/internal/testenv/agentnginx"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// BenchmarkNewIngress is B11's sync in-process: one new Ingress beside
// n others (each with its own Service and a 2-endpoint EndpointSlice),
// read by the file source, through the whole sync — snapshot, model,
// render, plan, apply (a push to a real nginx's Lua), status. The file's
// write and the source's publish are outside the timer (the file source's
// BenchmarkPublishNewFile measures those).
func BenchmarkNewIngress(b *testing.B) {
	for _, n := range []int{1000, 10000, 50000} {
		var env *newIngressEnv
		b.Run(fmt.Sprintf("ingresses=%d", n), func(b *testing.B) {
			if env == nil {
				env = startNewIngressEnv(b, n)
			}
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				env.add(b)
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

type newIngressEnv struct {
	s     *Syncer
	nginx *apply.Nginx
	dir   string
	ctx   context.Context
	stop  func()
	write func(name, content string)
	next  int
}

// startNewIngressEnv writes n Ingresses (500 to a file), starts nginx, the
// file source and a Syncer on them, and runs the first sync.
func startNewIngressEnv(b testing.TB, n int) *newIngressEnv {
	b.Helper()
	dir, staging := b.TempDir(), b.TempDir()
	// Written aside and renamed in, so the source reads each file whole.
	write := func(name, content string) {
		tmp := filepath.Join(staging, name)
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			b.Fatal(err)
		}
	}
	write("class.yaml", fmt.Sprintf("apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata:\n  name: restysync\nspec:\n  controller: %s\n", model.ControllerName))
	for start := 0; start < n; start += 500 {
		var buf strings.Builder
		for i := start; i < min(start+500, n); i++ {
			name := fmt.Sprintf("f%d", i)
			if fillTLS != nil {
				buf.WriteString(benchTLSIngressYAML(name, name, fillTLS.cert, fillTLS.key))
			} else {
				buf.WriteString(benchIngressYAML(name, name))
			}
			fmt.Fprintf(&buf, "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: %s\n  namespace: default\nspec:\n  ports:\n  - name: http\n    port: 80\n    targetPort: 8080\n", name)
			fmt.Fprintf(&buf, "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: %s-1\n  namespace: default\n  labels:\n    kubernetes.io/service-name: %s\naddressType: IPv4\nports:\n- name: http\n  port: 8080\nendpoints:\n- addresses: [\"10.%d.%d.1\"]\n  conditions: {ready: true}\n- addresses: [\"10.%d.%d.2\"]\n  conditions: {ready: true}\n",
				name, name, i/256%256, i%256, i/256%256, i%256)
		}
		write(fmt.Sprintf("fill-%06d.yaml", start), buf.String())
	}
	nginx, settings, _ := startBenchNginx(b)
	if *heapMetrics {
		rm := render.DefaultRequestMetrics()
		settings.RequestMetrics = &rm
	}
	src := file.New(dir)
	logger := slog.New(slog.DiscardHandler)
	if firstSyncLog != nil {
		logger = slog.New(firstSyncLog)
	}
	s := New(src, nginx, Options{Render: settings, IngressClass: "restysync"}, logger)
	ctx, cancel := context.WithCancel(context.Background())
	if err := src.Start(ctx, s.changed); err != nil {
		b.Fatal(err)
	}
	if heapListed != nil {
		heapListed()
	}
	if err := s.sync(ctx); err != nil {
		b.Fatal(err)
	}
	s.logger = slog.New(slog.DiscardHandler)
	if got := s.built.Servers.Len(); got != n {
		b.Fatalf("first sync serves %d hosts, want %d", got, n)
	}
	return &newIngressEnv{s: s, nginx: nginx, dir: dir, ctx: ctx, stop: cancel, write: write}
}

// add writes one new Ingress and waits for the source to report it.
func (e *newIngressEnv) add(b testing.TB) {
	name := fmt.Sprintf("new-%d", e.next)
	e.next++
	e.put(b, name+".yaml", benchIngressYAML(name, "f0"))
}

// put writes the file name (or removes it, content "") and waits for
// the source to report it.
func (e *newIngressEnv) put(b testing.TB, name, content string) {
	b.Helper()
	if content == "" {
		if err := os.Remove(filepath.Join(e.dir, name)); err != nil {
			b.Fatal(err)
		}
	} else {
		e.write(name, content)
	}
	select {
	case <-e.s.dirty:
	case <-time.After(10 * time.Second):
		b.Fatalf("the source did not report %s", name)
	}
}

func benchIngressYAML(name, service string) string {
	return fmt.Sprintf("---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: %s\n  namespace: default\nspec:\n  ingressClassName: restysync\n  rules:\n  - host: %s.bench.test\n    http:\n      paths:\n      - path: /\n        pathType: Prefix\n        backend:\n          service:\n            name: %s\n            port:\n              number: 80\n", name, name, service)
}

// startBenchNginx starts nginx for startNewIngressEnv, its shared dict
// -heap.dict MB from the start when that is set (the first sync's pushes
// come before its reload).
func startBenchNginx(b testing.TB) (*apply.Nginx, render.Settings, render.Config) {
	if *heapDict == 0 {
		return agentnginx.Start(b)
	}
	nginxproc.Binary(b)
	edit := func(conf []byte) []byte {
		return bytes.Replace(conf, []byte("lua_shared_dict restysync 64m;"), fmt.Appendf(nil, "lua_shared_dict restysync %dm;", *heapDict), 1)
	}
	nginx, _, settings, cfg := agentnginx.StartEdited(b, nginxproc.TempPrefix(b), edit)
	settings.LuaDictMB = *heapDict
	return nginx, settings, cfg
}
