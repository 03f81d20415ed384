package render

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/luaapi"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
	"github.com/restysync/restysync/agent/internal/testenv/testcert"
)

func (dp *dataPlane) metrics(t *testing.T) luaapi.LuaMetrics {
	t.Helper()
	code, reply := dp.api(t, http.MethodGet, "/metrics", nil)
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", code, reply)
	}
	var m luaapi.LuaMetrics
	if err := json.Unmarshal(reply, &m); err != nil {
		t.Fatalf("GET /metrics answered %s: %v", reply, err)
	}
	return m
}

// backendCounters returns the counters of name in m, and whether GET
// /metrics lists it.
func backendCounters(m luaapi.LuaMetrics, name string) (endpoints int, requests, failures int64, ok bool) {
	for b := range m.Backends.All() {
		if b.Name == name {
			return b.Endpoints, b.Requests, b.Failures, true
		}
	}
	return 0, 0, 0, false
}

// certExpiring is a self-signed certificate for name that expires at notAfter.
func certExpiring(t *testing.T, name string, notAfter time.Time) luaapi.CertificatePayload {
	t.Helper()
	cert, key := testcert.New(t, 7, notAfter, name)
	return luaapi.CertificatePayload{Name: "ns/" + name, Hosts: []string{name}, Cert: cert, Key: key}
}

// GET /metrics reports what Lua holds and the counters the balancer keeps
// in the log phase: requests per backend, those that ended in 502-504, and
// worker rebuilds; a removed backend loses its counters.
func TestDataPlaneMetrics(t *testing.T) {
	web := []echoBackend{startEchoBackend(t, "web-1"), startEchoBackend(t, "web-2")}
	dead := model.Endpoint{Address: "127.0.0.1", Port: int32(nginxproc.FreePort(t))} // nothing listens here
	dp, _, _ := startDataPlane(t, dataPlaneModel(), nil)
	dp.push(t, []luaapi.BackendPayload{
		{Name: "ns/web:80", Endpoints: []model.Endpoint{web[0].ep, web[1].ep}},
		{Name: "ns/empty:80", Endpoints: []model.Endpoint{}},
		{Name: "ns/retry:80", Endpoints: []model.Endpoint{dead}},
	}, nil)

	m := dp.metrics(t)
	if !m.Counting {
		t.Fatal("counting is off: the rendered nginx.conf has no restysync_metrics dict")
	}
	if eps, req, _, ok := backendCounters(m, "ns/web:80"); !ok || eps != 2 || req != 0 {
		t.Fatalf("ns/web:80 before any request: endpoints %d requests %d listed %v; want 2, 0, true", eps, req, ok)
	}
	if eps, _, _, ok := backendCounters(m, "ns/empty:80"); !ok || eps != 0 {
		t.Fatalf("ns/empty:80: endpoints %d listed %v; want 0, true", eps, ok)
	}

	dp.spread(t, "app.example.com", "/", 5)
	for range 2 {
		if code, _ := dp.get(t, "app.example.com", "/empty"); code != http.StatusServiceUnavailable {
			t.Fatalf("GET /empty: %d, want 503", code)
		}
	}
	if code, _ := dp.get(t, "app.example.com", "/retry"); code != http.StatusBadGateway {
		t.Fatalf("GET /retry with a dead endpoint: %d, want 502", code)
	}
	// The log phase runs after the response: give it a moment.
	deadline := time.Now().Add(5 * time.Second)
	for {
		m = dp.metrics(t)
		_, webReq, webFail, _ := backendCounters(m, "ns/web:80")
		_, emptyReq, emptyFail, _ := backendCounters(m, "ns/empty:80")
		_, retryReq, retryFail, _ := backendCounters(m, "ns/retry:80")
		got := [6]int64{webReq, webFail, emptyReq, emptyFail, retryReq, retryFail}
		if got == [6]int64{5, 0, 2, 2, 1, 1} {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("requests/failures of web, empty, retry: %v, want [5 0 2 2 1 1]", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// One worker: a rebuild per backend served, not one per request.
	if m.BalancerRebuilds != 3 {
		t.Errorf("balancer_rebuilds %d after 8 requests to 3 backends, want 3 (one per backend served)", m.BalancerRebuilds)
	}

	dp.push(t, nil, []string{"ns/web:80"})
	dp.push(t, []luaapi.BackendPayload{{Name: "ns/web:80", Endpoints: []model.Endpoint{web[0].ep}}}, nil)
	if eps, req, _, _ := backendCounters(dp.metrics(t), "ns/web:80"); eps != 1 || req != 0 {
		t.Errorf("ns/web:80 removed and added again: endpoints %d requests %d, want 1, 0", eps, req)
	}
	// Only a backend whose version moved is rebuilt, once.
	dp.spread(t, "app.example.com", "/", 3)
	for range 3 {
		dp.get(t, "app.example.com", "/empty")
	}
	if m := dp.metrics(t); m.BalancerRebuilds != 4 {
		t.Errorf("balancer_rebuilds %d after a new version of one backend, want 4", m.BalancerRebuilds)
	}

	if m := dp.metrics(t); m.Certificates != 0 {
		t.Errorf("no certificates: count %d, want 0", m.Certificates)
	}
	soon := certExpiring(t, "soon.example.com", time.Now().Add(48*time.Hour).Truncate(time.Second))
	late := certExpiring(t, "late.example.com", time.Date(2061, 3, 4, 5, 6, 7, 0, time.UTC))
	dp.pushCerts(t, []luaapi.CertificatePayload{late}, nil)
	if m := dp.metrics(t); m.Certificates != 1 {
		t.Errorf("one certificate: count %d, want 1", m.Certificates)
	}
	dp.pushCerts(t, []luaapi.CertificatePayload{soon}, nil)
	if m := dp.metrics(t); m.Certificates != 2 {
		t.Errorf("two certificates: count %d, want 2", m.Certificates)
	}
}
