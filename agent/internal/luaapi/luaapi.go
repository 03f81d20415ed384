// Package luaapi declares the JSON of the Lua config API (lua/restysync/
// api.lua), the wire between apply, the last stage of the pipeline, and
// the data plane: once, for the agent and for the tests that talk to a
// real nginx.
package luaapi

import (
	"fmt"

	"github.com/restysync/restysync/agent/internal/model"
)

// Status is what the Lua config API reports about the running nginx.
type Status struct {
	// ConfigHash is the hash rendered into the nginx.conf the workers run.
	ConfigHash string `json:"config_hash"`
	// BootID is new on every nginx cold start and survives a HUP.
	BootID string `json:"boot_id"`
	// Restored says this boot started from the state the agent saved
	// (apply.StateName, lua/restysync/state.lua).
	Restored bool `json:"restored"`
	// Version counts accepted changes since the boot.
	Version int64 `json:"version"`
	// Backends is how many backends Lua holds.
	Backends int `json:"backends"`
	// Certificates is how many certificates Lua holds.
	Certificates int `json:"certificates"`
	// Routes is how many hosts Lua routes.
	Routes int `json:"routes"`
	// NginxVersion is ngx.config.nginx_version (1027001 for 1.27.1),
	// LuaVersion ngx.config.ngx_lua_version (10028 for 0.10.28) and
	// Configure ngx.config.nginx_configure(): which nginx runs
	// (render.NginxFromStatus). 0 and "" from an older Lua.
	NginxVersion int    `json:"nginx_version"`
	LuaVersion   int    `json:"ngx_lua_version"`
	Configure    string `json:"nginx_configure"`
}

// LuaMetrics is what GET /metrics of the Lua config API reports.
type LuaMetrics struct {
	// Backends Lua holds, sorted by name, with their request counters.
	Backends BackendList `json:"backends"`
	// BalancerRebuilds counts the times a worker rebuilt its cached copy of
	// a backend because the backend's version moved.
	BalancerRebuilds int64 `json:"balancer_rebuilds"`
	// RegexFailures counts the regexes that could not decide a request
	// (a route's path or a canary-by-header-pattern): PCRE's match limit,
	// its JIT stack, or a request's regex budget spent (restysync.routes).
	RegexFailures int64 `json:"regex_failures"`
	// Certificates is how many certificates Lua holds.
	Certificates int `json:"certificates"`
	// Counting is false when the running nginx.conf has no counter dict
	// (rendered by an older agent): the counters are then all 0.
	Counting bool `json:"counting"`
	// APIDenied counts the requests the config API refused with 403 since
	// nginx started: no or a wrong secret, or sent by nginx itself.
	APIDenied int64 `json:"api_denied"`
	// LoopRefused counts the requests answered 508 since nginx started:
	// they came round through an auth or mirror request of nginx's own
	// (lua/restysync/loop.lua).
	LoopRefused int64 `json:"loop_refused"`
	// Nginx are nginx's processes and connections, as ingress-nginx's
	// process collector reports them (nil from an older Lua).
	Nginx *NginxProcess `json:"nginx,omitempty"`
}

// NginxProcess is nginx's processes (the master and its children) and
// connections, read by Lua at scrape time.
type NginxProcess struct {
	Procs         int     `json:"procs"`
	CPUSeconds    float64 `json:"cpu_seconds"`
	ResidentBytes float64 `json:"resident_bytes"`
	// Connections are stub_status's, by state (active, reading, writing,
	// waiting); nil when nginx has no stub_status module.
	Connections map[string]float64 `json:"connections,omitempty"`
}

// RequestMetrics is what GET /metrics/requests reports: the request
// metrics per Ingress (lua/restysync/requests.lua).
type RequestMetrics struct {
	// Time, Length and Size are the bucket bounds nginx records with.
	Time   []float64 `json:"time"`
	Length []float64 `json:"length"`
	Size   []float64 `json:"size"`
	// Histograms name the histograms of each series, in the order of its
	// values.
	Histograms []string `json:"histograms"`
	// Dropped counts the requests of the worker that answered whose
	// series were past its maximum.
	Dropped float64         `json:"dropped"`
	Series  []RequestSeries `json:"series"`
}

// RequestSeries is one series: its labels (namespace, owner, service,
// path, host, status, method, canary, joined by "\x01") and its values:
// the request count, then each histogram's count, sum and per-bucket
// counts (each bucket counts the values above the previous bound).
type RequestSeries struct {
	Labels string    `json:"k"`
	Values []float64 `json:"v"`
}

// BackendMetrics is one backend in LuaMetrics.
type BackendMetrics struct {
	Name      string `json:"name"`
	Endpoints int    `json:"endpoints"`
	// Requests counts the requests proxied to this backend since nginx
	// started (or since the backend was last added); Failures those of them
	// that ended in 502, 503 or 504.
	Requests int64 `json:"requests"`
	Failures int64 `json:"failures"`
}

// BackendUpdate is the body of POST /backends.
type BackendUpdate struct {
	Upserts []BackendPayload `json:"upserts"`
	Removes []string         `json:"removes"`
}

// BackendPayload is one backend as Lua stores it.
type BackendPayload struct {
	Name      string           `json:"name"`
	Endpoints []model.Endpoint `json:"endpoints"`
	// Policy is left out for the default one (round robin, defaults).
	Policy *model.Policy `json:"policy,omitempty"`
}

// NewBackendPayload returns the payload of b.
func NewBackendPayload(b model.Backend) BackendPayload {
	p := BackendPayload{Name: b.Name, Endpoints: b.Endpoints}
	if p.Endpoints == nil {
		p.Endpoints = []model.Endpoint{}
	}
	if b.Policy != nil && *b.Policy != (model.Policy{}) {
		// The model's, not a copy: a model is never changed once built,
		// and a copy made every payload a Policy's size (some 300 bytes)
		// of garbage, the default one too.
		p.Policy = b.Policy
	}
	return p
}

// CertificateUpdate is the body of POST /certificates.
type CertificateUpdate struct {
	Upserts []CertificatePayload `json:"upserts"`
	Removes []string             `json:"removes"`
}

// CertificatePayload is one certificate as the agent sends it.
type CertificatePayload struct {
	// Name is the Secret, "namespace/name".
	Name string `json:"name"`
	// Hosts are the SNI names it is served for, sorted.
	Hosts []string `json:"hosts"`
	// Cert is the PEM chain, leaf first; Key the PEM private key.
	Cert string `json:"cert"`
	Key  string `json:"key"`
}

// HeldCertificate is one certificate as GET /certificates lists it: no key.
type HeldCertificate struct {
	Name  string   `json:"name"`
	Hosts []string `json:"hosts"`
	// Hash is the hex SHA-1 of the chain, a newline and the key (see
	// model.Certificate.Hash).
	Hash string `json:"hash"`
}

// RouteUpdate is the body of POST /routes.
type RouteUpdate struct {
	Upserts []RoutePayload `json:"upserts"`
	Removes []string       `json:"removes"`
}

// RoutePayload is one host Lua routes (model.Route).
type RoutePayload struct {
	// Name is the host.
	Name      string                `json:"name"`
	HTTPS     bool                  `json:"https,omitempty"`
	Locations []model.RouteLocation `json:"locations"`
	// Ordered is model.Route.Ordered: a Gateway listener's route, whose
	// Name is model.FrontKey(front, host) and whose locations carry their
	// Rule (lua/restysync/gateway.lua checks what it is sent).
	Ordered bool `json:"ordered,omitempty"`
	// Listener is model.Route.Listener.
	Listener string `json:"listener,omitempty"`
}

// AccessRequest is the body of POST /access: paths under the shared dir
// that nginx's workers must read, and folders they must create files in.
type AccessRequest struct {
	Read  []string `json:"read,omitempty"`
	Write []string `json:"write,omitempty"`
}

// AccessDenied is one path a worker could not use, in Lua's words.
type AccessDenied struct {
	Path   string `json:"path"`
	Access string `json:"access"` // "read" or "write"
	Error  string `json:"error"`
}

func (d AccessDenied) String() string {
	return fmt.Sprintf("nginx workers cannot %s %s: %s", d.Access, d.Path, d.Error)
}

// RoutePayloads returns the payloads of routes.
func RoutePayloads(routes []model.Route) []RoutePayload {
	out := make([]RoutePayload, len(routes))
	for i, r := range routes {
		out[i] = NewRoutePayload(r)
	}
	return out
}

// NewRoutePayload returns the payload of r.
func NewRoutePayload(r model.Route) RoutePayload {
	return RoutePayload{Name: r.Host, HTTPS: r.HTTPS, Locations: r.Locations, Ordered: r.Ordered, Listener: r.Listener}
}
