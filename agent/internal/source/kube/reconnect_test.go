package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/restysync/restysync/agent/internal/kubeclient/kubeclienttest"
	"github.com/restysync/restysync/agent/internal/source"
)

// refused is the error of a request to a stopped API server.
func refused() error {
	return &url.Error{Op: "Get", URL: "https://127.0.0.1:6443/api/v1/services", Err: &net.OpError{
		Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED),
	}}
}

func TestIsOutage(t *testing.T) {
	gr := schema.GroupResource{Resource: "services"}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"nil", context.Background(), nil, false},
		{"connection refused", context.Background(), refused(), true},
		{"connection reset", context.Background(), fmt.Errorf("list: %w", syscall.ECONNRESET), true},
		{"unexpected EOF", context.Background(), io.ErrUnexpectedEOF, true},
		{"503", context.Background(), apierrors.NewServiceUnavailable("starting"), true},
		{"403", context.Background(), apierrors.NewForbidden(gr, "", errors.New("no")), false},
		{"410", context.Background(), apierrors.NewResourceExpired("too old"), false},
		{"429", context.Background(), apierrors.NewTooManyRequests("slow down", 1), false},
		{"ctx done", cancelled, refused(), false},
		{"canceled", context.Background(), context.Canceled, false},
		{"other", context.Background(), errors.New("decoding failed"), false},
	} {
		if got := isOutage(c.ctx, c.err); got != c.want {
			t.Errorf("%s: isOutage(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

// TestReconnectorSharedProbe: calls that meet an outage share one probe,
// are each made once more when the probe succeeds, and return at once.
func TestReconnectorSharedProbe(t *testing.T) {
	var upFlag atomic.Bool
	var probes atomic.Int64
	logs := &syncWriter{w: &bytes.Buffer{}}
	r := &reconnector{
		probe: func(context.Context) bool {
			probes.Add(1)
			return upFlag.Load()
		},
		logger:   slog.New(slog.NewTextHandler(logs, nil)),
		interval: 20 * time.Millisecond,
		retry:    time.Hour,
	}
	const callers = 8
	var calls [callers]atomic.Int64
	var wg sync.WaitGroup
	var backAt atomic.Int64
	returned := make(chan time.Duration, callers)
	for i := range callers {
		wg.Go(func() {
			_, err := call(context.Background(), r, func() (int, error) {
				calls[i].Add(1)
				if upFlag.Load() {
					return 1, nil
				}
				return 0, refused()
			})
			if err != nil {
				t.Errorf("caller %d: %v", i, err)
			}
			returned <- time.Duration(time.Now().UnixNano() - backAt.Load())
		})
	}
	const down = 300 * time.Millisecond
	time.Sleep(down)
	backAt.Store(time.Now().UnixNano())
	upFlag.Store(true)
	wg.Wait()
	close(returned)
	for d := range returned {
		if d > 200*time.Millisecond {
			t.Errorf("a call returned %s after the server was back, want within about one probe interval", d)
		}
	}
	for i := range callers {
		if n := calls[i].Load(); n != 2 {
			t.Errorf("caller %d made %d calls, want 2: one failing, one after the probe", i, n)
		}
	}
	// One probe every 20 ms for the whole outage, not one per caller.
	if n := probes.Load(); n > int64(down/r.interval)+3 {
		t.Errorf("%d probes in %s at one per %s: the callers did not share them", n, down, r.interval)
	}
	out := logs.String()
	if strings.Count(out, "API server unreachable") != 1 || strings.Count(out, "API server reachable again") != 1 {
		t.Errorf("want one outage and one recovery logged, got:\n%s", out)
	}
}

// TestReconnectorRetryWithoutProbe: with no probe (or a /readyz that never
// says yes) the call is still made again every retry period.
func TestReconnectorRetryWithoutProbe(t *testing.T) {
	r := &reconnector{logger: slog.New(slog.DiscardHandler), interval: 10 * time.Millisecond, retry: 50 * time.Millisecond}
	var n atomic.Int64
	start := time.Now()
	v, err := call(context.Background(), r, func() (string, error) {
		if n.Add(1) < 4 {
			return "", refused()
		}
		return "ok", nil
	})
	if err != nil || v != "ok" {
		t.Fatalf("call = %q, %v; want ok", v, err)
	}
	if d := time.Since(start); d < 150*time.Millisecond || d > 2*time.Second {
		t.Errorf("3 retries every 50 ms took %s", d)
	}

	// A cancelled context ends the wait with the call's own error.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err = call(ctx, r, func() (string, error) { return "", refused() })
	if !isOutage(context.Background(), err) {
		t.Errorf("after ctx ended: %v, want the connection error", err)
	}
	// Other errors are returned at once.
	gone := apierrors.NewResourceExpired("too old")
	if _, err := call(context.Background(), r, func() (string, error) { return "", gone }); err != gone {
		t.Errorf("call = %v, want %v", err, gone)
	}
}

// TestSourceWaitsOutOutage: every informer's first list and watch fail as if
// the API server were down; the reflectors never see those errors (no watch
// error is logged, so client-go never backed off) and the source syncs.
func TestSourceWaitsOutOutage(t *testing.T) {
	defer func(d time.Duration) { outageRetry = d }(outageRetry)
	outageRetry = 20 * time.Millisecond // a fake clientset has no /readyz

	client := fake.NewClientset(testObjects()...)
	var mu sync.Mutex
	lists, watches := map[string]int{}, map[string]int{}
	client.PrependReactor("list", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		lists[a.GetResource().Resource]++
		if lists[a.GetResource().Resource] == 1 {
			return true, nil, refused()
		}
		return false, nil, nil
	})
	client.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		mu.Lock()
		defer mu.Unlock()
		watches[a.GetResource().Resource]++
		if watches[a.GetResource().Resource] == 1 {
			return true, nil, refused()
		}
		return false, nil, nil
	})

	logs := &syncWriter{w: &bytes.Buffer{}}
	src := New(kubeclienttest.Wrap(client), Options{
		ConfigMap: "web/restysync",
		Logger:    slog.New(slog.NewTextHandler(logs, nil)),
	})
	startSource(t, src, func(source.Change) {})
	snap, _ := src.Snapshot()
	if snap.Ingresses.Len() != 1 || snap.Services.Len() != 1 || snap.EndpointSlices.Len() != 1 {
		t.Errorf("snapshot after the outage: %d ingresses, %d services, %d slices; want 1 each",
			snap.Ingresses.Len(), snap.Services.Len(), snap.EndpointSlices.Len())
	}
	eventually(t, "every kind watched", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(watches) == 6
	})
	mu.Lock()
	for _, res := range []string{"ingresses", "ingressclasses", "services", "endpointslices", "secrets", "configmaps"} {
		// Secrets: the TLS informer (no Ingress names an auth Secret).
		if lists[res] < 2 {
			t.Errorf("%s listed %d times, want the refused list made again", res, lists[res])
		}
		if watches[res] < 2 {
			t.Errorf("%s watched %d times, want the refused watch made again", res, watches[res])
		}
	}
	mu.Unlock()
	out := logs.String()
	if strings.Contains(out, "watching the API server") {
		t.Errorf("a reflector saw an outage error (and backed off):\n%s", out)
	}
	if !strings.Contains(out, "API server unreachable") {
		t.Errorf("the outage was not logged:\n%s", out)
	}
}

// syncWriter serialises writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprint(s.w)
}
