//go:build linux

package kube

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restysync/restysync/agent/internal/source"
	"github.com/restysync/restysync/agent/internal/testenv/kubeapi"
)

// TestSourceAPIServerOutage stops the real API server long enough for
// client-go's default reflector backoff to reach sleeps of 10 s and more,
// checks that the source keeps its objects meanwhile, and that a change made
// once the server is back reaches the source within 5 s.
func TestSourceAPIServerOutage(t *testing.T) {
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("stops the API server for 12 s (runs whatever -short says when CI=true)")
	}
	const (
		outage = 12 * time.Second
		goal   = 5 * time.Second
	)
	srv := kubeapi.Start(t, kubeapi.Options{})
	client := adminClient(t, srv)
	createAll(t, client, namespace("web"))
	createAll(t, client, testObjects()[:6]...)

	logs := &syncWriter{w: &bytes.Buffer{}}
	src := New(agentClient(t, srv.Config()), Options{Namespace: "web", Logger: slog.New(slog.NewTextHandler(logs, nil))})
	startSource(t, src, func(source.Change) {})

	srv.StopAPIServer(t)
	for end := time.Now().Add(outage); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		snap, _ := src.Snapshot()
		if got := names(snap.Ingresses.Slice()); !slices.Equal(got, []string{"web/app"}) {
			t.Fatalf("during the outage the source has Ingresses %v, want what it had: [web/app]", got)
		}
	}
	srv.StartAPIServer(t)
	back := time.Now()

	ing := testObjects()[1].(*networkingv1.Ingress).DeepCopy()
	ing.Name = "after"
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := client.NetworkingV1().Ingresses("web").Create(ctx, ing, metav1.CreateOptions{})
		cancel()
		if err == nil {
			break
		}
		if time.Since(back) > 10*time.Second {
			t.Fatalf("creating web/after after the restart: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	eventually(t, "web/after in the snapshot", func() bool {
		snap, _ := src.Snapshot()
		return slices.Contains(names(snap.Ingresses.Slice()), "web/after")
	})
	took := time.Since(back)
	t.Logf("the new Ingress reached the source %.1f s after the API server was back (goal %s)", took.Seconds(), goal)
	if took > goal {
		t.Errorf("converged %s after the API server was back, want within %s\n%s", took.Round(time.Millisecond), goal, logs)
	}
	if out := logs.String(); !strings.Contains(out, "API server unreachable") || !strings.Contains(out, "API server reachable again") {
		t.Errorf("the outage and the recovery were not both logged:\n%s", out)
	}
}
