package syncer

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restysync/restysync/agent/internal/apply"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
	"github.com/restysync/restysync/agent/internal/source"
)

// After the loop's first sync (and check ticks after it), a new host's
// build beside 20,000 allocates less than half a flat list of the hosts
// (8 bytes a host): the servers list is made from the last one, sharing
// all but the chunk the host falls in (model.Edited).
func TestNewHostBuildCopiesNoServersList(t *testing.T) {
	const n = 20000
	ingress := func(name string) *networkingv1.Ingress {
		class := "restysync"
		prefix := networkingv1.PathTypePrefix
		paths := []networkingv1.HTTPIngressPath{{Path: "/", PathType: &prefix, Backend: networkingv1.IngressBackend{
			Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}
		return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: networkingv1.IngressSpec{IngressClassName: &class, Rules: []networkingv1.IngressRule{{Host: name + ".example.com",
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}}}}}}
	}
	snap := model.Snapshot{
		IngressClasses: model.ListOf(&networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "restysync"},
			Spec: networkingv1.IngressClassSpec{Controller: model.ControllerName}}),
		Services: model.ListOf(model.ServiceOf(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}})),
	}
	for i := range n {
		snap.Ingresses = model.ListOf(append(snap.Ingresses.Slice(), ingress(fmt.Sprintf("h%05d", i)))...)
	}
	src := &fakeSource{snap: snap}
	shared := t.TempDir()
	nginx := &apply.Nginx{SharedDir: shared, Lua: apply.NewLuaClient(filepath.Join(shared, "none.sock"))}
	s := New(src, nginx, Options{
		Render:        render.Settings{SharedDir: shared, HTTPPort: 8080, HTTPSPort: 8443, WorkerProcesses: "1"},
		IngressClass:  "restysync",
		CheckInterval: 10 * time.Millisecond,
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	deadline := time.Now().Add(60 * time.Second)
	for st := s.State(); st.Syncs == 0 || !st.LastLoop.After(st.LastSync.Add(50*time.Millisecond)); st = s.State() {
		if time.Now().After(deadline) {
			t.Fatalf("state %+v: want a sync and loop rounds after it", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if got := s.built.Servers.Len(); got != n {
		t.Fatalf("the loop's build serves %d hosts, want %d", got, n)
	}

	src.snap.Ingresses = model.ListOf(append(src.snap.Ingresses.Slice(), ingress("new"))...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	next, _, _ := s.model(map[source.Kind]bool{source.KindIngress: true})
	runtime.ReadMemStats(&after)
	if next.Servers.Len() != n+1 || !s.buildPath.Incremental {
		t.Fatalf("%d hosts, build %+v: want %d, incremental", next.Servers.Len(), s.buildPath, n+1)
	}
	if got, list := after.TotalAlloc-before.TotalAlloc, uint64(8*n); got >= list/2 {
		t.Errorf("the new host's build allocated %d bytes, want less than %d: the servers list was copied", got, list/2)
	}
}
