package apply

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/luaapi"
	"github.com/restysync/restysync/agent/internal/model"
)

// serveUnix serves h on a unix socket in a temp dir and returns its path.
func serveUnix(t *testing.T, h http.Handler) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "api.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return path
}

func TestPushRetriesServerErrorsOnly(t *testing.T) {
	var calls atomic.Int32
	var got luaapi.BackendUpdate
	path := serveUnix(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		if r.URL.Path != "/backends" || r.Method != http.MethodPost {
			http.Error(w, "wrong route", http.StatusNotFound)
			return
		}
		if n == 1 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		json.NewDecoder(r.Body).Decode(&got)
		w.Write([]byte(`{"version":1}`))
	}))
	c := NewLuaClient(path)
	update := luaapi.BackendUpdate{Upserts: []luaapi.BackendPayload{{Name: "default/a:80", Endpoints: []model.Endpoint{{Address: "10.0.0.1", Port: 8080}}}}}
	n, err := c.Push(context.Background(), update)
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 2 || n == 0 || len(got.Upserts) != 1 || got.Upserts[0].Endpoints[0].Port != 8080 {
		t.Errorf("calls %d, bytes %d, received %+v", calls.Load(), n, got)
	}

	calls.Store(0)
	rejecting := serveUnix(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, `{"error":"upserts[0].name: is empty"}`, http.StatusBadRequest)
	}))
	_, err = NewLuaClient(rejecting).Push(context.Background(), update)
	if err == nil || !strings.Contains(err.Error(), "upserts[0].name") {
		t.Errorf("err %v, want Lua's reason", err)
	}
	if calls.Load() != 1 {
		t.Errorf("a 400 was retried: %d calls", calls.Load())
	}
}

// A push that runs out of time is not sent again (nginx still works
// through it; a copy behind it would only queue); one whose connection
// nginx dropped is, within the same time limit.
func TestPushOutOfTimeIsNotResent(t *testing.T) {
	var calls atomic.Int32
	release := make(chan struct{})
	slow := serveUnix(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		select {
		case <-release:
		case <-time.After(10 * time.Second):
		}
		w.Write([]byte(`{"version":1}`))
	}))
	defer close(release)
	c := NewLuaClient(slow)
	c.pushTimeout = func(int) time.Duration { return 200 * time.Millisecond }
	update := luaapi.RouteUpdate{Removes: []string{"a.example"}}
	start := time.Now()
	_, err := c.PushRoutes(context.Background(), update)
	if err == nil || !strings.Contains(err.Error(), "no answer within 200ms") {
		t.Errorf("err %v, want the time limit named", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the push took %s past its 200ms limit", took)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("nginx got %d copies of a push that ran out of time, want 1", n)
	}

	calls.Store(0)
	dropping := serveUnix(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		w.Write([]byte(`{"version":1}`))
	}))
	if _, err := NewLuaClient(dropping).PushRoutes(context.Background(), update); err != nil {
		t.Errorf("a dropped connection was not retried: %v", err)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("calls %d, want 2 (the dropped one and its retry)", n)
	}
}

func TestPushTimeoutGrowsWithTheBody(t *testing.T) {
	for _, tc := range []struct {
		bytes int
		want  time.Duration
	}{
		{0, 10 * time.Second},
		{100 << 10, 10 * time.Second},
		{1 << 20, 12 * time.Second},
		{14 << 20, 38 * time.Second},
	} {
		if got := pushTimeoutFor(tc.bytes); got != tc.want {
			t.Errorf("pushTimeoutFor(%d) = %s, want %s", tc.bytes, got, tc.want)
		}
	}
}

func TestStatusAndBackends(t *testing.T) {
	path := serveUnix(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/status":
			w.Write([]byte(`{"config_hash":"abc","boot_id":"b1","version":3,"backends":1}`))
		case "/backends":
			w.Write([]byte(`{"backends":[{"name":"default/a:80","endpoints":[{"address":"10.0.0.1","port":80}]}]}`))
		}
	}))
	c := NewLuaClient(path)
	st, err := c.Status(context.Background())
	if err != nil || st != (luaapi.Status{ConfigHash: "abc", BootID: "b1", Version: 3, Backends: 1}) {
		t.Errorf("status %+v, %v", st, err)
	}
	held, err := c.Backends(context.Background())
	if err != nil || len(held["default/a:80"].Endpoints) != 1 {
		t.Errorf("backends %+v, %v", held, err)
	}
	if _, err := NewLuaClient(filepath.Join(t.TempDir(), "none.sock")).Status(context.Background()); err == nil {
		t.Error("status from a missing socket: no error")
	}
}

func TestWriteFileAtomic(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nginx.conf")
	for _, content := range []string{"one", "two"} {
		if err := WriteFileAtomic(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		n := &Nginx{SharedDir: filepath.Dir(path)}
		got, err := n.ReadConfig()
		if err != nil || string(got) != content {
			t.Errorf("read %q, %v; want %q", got, err, content)
		}
	}
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "*"))
	if len(matches) != 1 {
		t.Errorf("temp files left behind: %v", matches)
	}
}

func TestCertificates(t *testing.T) {
	var got luaapi.CertificateUpdate
	path := serveUnix(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/certificates" && r.Method == http.MethodGet:
			w.Write([]byte(`{"certificates":[{"name":"ns/a","hosts":["a.test"],"hash":"abc"}]}`))
		case r.URL.Path == "/certificates" && r.Method == http.MethodPost:
			json.NewDecoder(r.Body).Decode(&got)
			if len(got.Removes) > 0 {
				http.Error(w, `{"error":"removes[0]: conflict"}`, http.StatusConflict)
				return
			}
			w.Write([]byte(`{"version":2}`))
		default:
			http.Error(w, "wrong route", http.StatusNotFound)
		}
	}))
	c := NewLuaClient(path)
	held, err := c.Certificates(context.Background())
	if err != nil || len(held) != 1 || held[0].Name != "ns/a" || held[0].Hash != "abc" || held[0].Hosts[0] != "a.test" {
		t.Fatalf("Certificates() = %+v, %v", held, err)
	}
	update := luaapi.CertificateUpdate{Upserts: []luaapi.CertificatePayload{{Name: "ns/a", Hosts: []string{"a.test"}, Cert: "C", Key: "K"}}}
	if _, err := c.PushCertificates(context.Background(), update); err != nil {
		t.Fatal(err)
	}
	if len(got.Upserts) != 1 || got.Upserts[0].Cert != "C" || got.Upserts[0].Key != "K" {
		t.Errorf("lua received %+v", got)
	}
	_, err = c.PushCertificates(context.Background(), luaapi.CertificateUpdate{Removes: []string{"ns/a"}})
	if err == nil || !strings.Contains(err.Error(), "pushing certificates: lua answered 409") {
		t.Errorf("error %v, want the 409 named", err)
	}
}

// encodeUpdate gives json.Marshal's bytes for each update type, every
// field of which it writes (upserts and removes), empty or not.
func TestEncodeUpdateIsMarshal(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeFor[luaapi.RouteUpdate](), reflect.TypeFor[luaapi.BackendUpdate](), reflect.TypeFor[luaapi.CertificateUpdate]()} {
		if typ.NumField() != 2 || typ.Field(0).Tag.Get("json") != "upserts" || typ.Field(1).Tag.Get("json") != "removes" {
			t.Errorf("%v has other fields than upserts and removes: encodeUpdate must write them", typ)
		}
	}
	routes := luaapi.RoutePayloads([]model.Route{
		{Host: "a.test", Locations: []model.RouteLocation{{Path: "/", Backend: "web-80"}}},
		{Host: "<b>&.test", HTTPS: true, Ordered: true, Listener: "x", Locations: []model.RouteLocation{{Path: "/\u2028", Exact: true}}},
	})
	for _, update := range []any{
		luaapi.RouteUpdate{},
		luaapi.RouteUpdate{Upserts: routes, Removes: []string{"gone.test"}},
		luaapi.RouteUpdate{Upserts: []luaapi.RoutePayload{}, Removes: []string{}},
		luaapi.BackendUpdate{Upserts: []luaapi.BackendPayload{{Name: "web-80"}}},
		luaapi.CertificateUpdate{Upserts: []luaapi.CertificatePayload{{Name: "c", Hosts: []string{"a.test"}, Cert: "PEM"}}, Removes: []string{"d"}},
	} {
		want, err := json.Marshal(update)
		if err != nil {
			t.Fatal(err)
		}
		got, err := encodeUpdate(update)
		if err != nil || string(got) != string(want) {
			t.Errorf("encodeUpdate(%T) = %s, %v; want %s", update, got, err, want)
		}
	}
}
