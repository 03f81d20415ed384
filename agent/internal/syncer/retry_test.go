package syncer

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/apply"
	"github.com/restysync/restysync/agent/internal/luaapi"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
)

// fakeLua answers the Lua config API on a unix socket as a running nginx
// would, except that it fails the first failPushes POSTs with 503. (The
// real data plane is proven in the render and e2e tests; this one proves
// the loop's retry.)
type fakeLua struct {
	hash       string
	failPushes int

	mu       sync.Mutex
	pushes   int
	backends map[string][]model.Endpoint
}

func (f *fakeLua) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/status":
		json.NewEncoder(w).Encode(luaapi.Status{ConfigHash: f.hash, BootID: "boot-1"})
	case r.Method == http.MethodGet && r.URL.Path == "/backends":
		io.WriteString(w, `{"backends":[]}`)
	case r.Method == http.MethodGet && r.URL.Path == "/certificates":
		io.WriteString(w, `{"certificates":[]}`)
	case r.Method == http.MethodGet && r.URL.Path == "/routes":
		io.WriteString(w, `{"routes":[]}`)
	case r.Method == http.MethodPost && r.URL.Path == "/routes":
		io.WriteString(w, `{}`)
	case r.Method == http.MethodPost && r.URL.Path == "/backends":
		f.pushes++
		if f.pushes <= f.failPushes {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		var update luaapi.BackendUpdate
		if err := json.NewDecoder(r.Body).Decode(&update); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, b := range update.Upserts {
			f.backends[b.Name] = b.Endpoints
		}
		io.WriteString(w, `{}`)
	default:
		http.NotFound(w, r)
	}
}

// A push Lua keeps failing is retried with backoff by the loop itself,
// without waiting for another change from the source.
func TestFailedPushIsRetried(t *testing.T) {
	shared := t.TempDir()
	settings := render.Settings{SharedDir: shared, HTTPPort: 8080, HTTPSPort: 8443, WorkerProcesses: "1"}
	snap := oneIngressSnapshot("10.0.0.1")
	snap.IngressClass = "restysync"
	m, _ := model.Build(snap)
	cfg, err := render.Render(m, settings)
	if err != nil {
		t.Fatal(err)
	}
	// The client retries a push 4 times itself; 12 failures outlast two
	// whole syncs, so only the loop's retry gets the backend through.
	lua := &fakeLua{hash: cfg.Hash, failPushes: 12, backends: map[string][]model.Endpoint{}}
	socket := filepath.Join(shared, render.SocketName)
	listener, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	server := &http.Server{Handler: lua}
	go server.Serve(listener)
	defer server.Close()

	nginx := &apply.Nginx{SharedDir: shared, Lua: apply.NewLuaClient(socket)}
	s := New(&fakeSource{snap: oneIngressSnapshot("10.0.0.1")}, nginx,
		Options{IngressClass: "restysync", Render: settings}, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

	deadline := time.Now().Add(20 * time.Second)
	for {
		lua.mu.Lock()
		got, pushes := lua.backends["default/web:80"], lua.pushes
		lua.mu.Unlock()
		if len(got) == 1 && got[0].Address == "10.0.0.1" {
			t.Logf("the backend reached Lua at push %d", pushes)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the backend never reached Lua after %d pushes", pushes)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The loop records the sync just after Lua answered the push.
	for !s.State().Applied {
		if time.Now().After(deadline) {
			t.Fatal("the state is not applied after the push went through")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
