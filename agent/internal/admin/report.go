package admin

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/restysync/restysync/agent/internal/luaapi"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
	"github.com/restysync/restysync/agent/internal/status"
	"github.com/restysync/restysync/agent/internal/syncer"
)

// Report is what `restysync inspect` prints and GET /debug/state returns:
// what the agent wants nginx to serve, what is wrong with the input, and,
// for a running agent, whether nginx and Lua hold what it wants.
type Report struct {
	// DryRun is true when the report was computed from a source, with no
	// agent and no nginx: Config, Lua and Sync are then absent.
	DryRun bool `json:"dry_run"`
	// Hosts sorted by name; the default server (Host "") comes first when
	// it has paths (host-less rules or a default backend).
	Hosts []Host `json:"hosts"`
	// Certificates the model names, sorted by name.
	Certificates []Certificate `json:"certificates"`
	// Stream is what nginx's stream module serves: TLS passed through by
	// SNI, and TCP and UDP services, sorted.
	Stream []StreamEntry `json:"stream"`
	// NotServed are the Ingresses the agent leaves to another controller,
	// sorted, each with why (its class decision).
	NotServed []NotServed `json:"not_served"`
	// Problems are the invalid input left out of the model.
	Problems []Problem `json:"problems"`
	// GatewayAPI is the status of our GatewayClasses, Gateways and
	// HTTPRoutes, as the leader writes it (absent when there are none).
	// A running agent's says Programmed only of what nginx is confirmed
	// to serve (status.ServedGatewayAPI); a dry run's says what would be.
	GatewayAPI *model.GatewayAPIStatus `json:"gateway_api,omitempty"`
	// NotIngressRelated counts, in a dry run of a folder or file, the
	// documents of kinds the source does not read (Deployments, RBAC),
	// by "Kind (apiVersion)": passed over, not Problems.
	NotIngressRelated map[string]int `json:"not_ingress_related,omitempty"`
	// QuarantinedIngresses ("namespace/name") are the Ingresses nginx
	// rejected a config with; their last good version serves until they
	// change. Filled in by AddLive (a dry run has none).
	QuarantinedIngresses []string `json:"quarantined_ingresses"`
	// ConfigMapRefused is why the agent's ConfigMap as it is was refused
	// (its last version nginx took serves until it changes); "" when it
	// is not. Filled in by AddLive.
	ConfigMapRefused string `json:"configmap_refused,omitempty"`
	// Nginx is which nginx the config is rendered for, and what follows
	// from it.
	Nginx  *Nginx   `json:"nginx,omitempty"`
	Config *Config  `json:"config,omitempty"`
	Lua    *LuaDiff `json:"lua,omitempty"`
	Sync   *Sync    `json:"sync,omitempty"`
}

// Nginx is which nginx the config is rendered for (render.Nginx) and the
// forms that follow.
type Nginx struct {
	// Detected says nginx reported itself through the Lua status API;
	// until then (and in a dry run) the config takes forms every version
	// takes.
	Detected   bool   `json:"detected"`
	Version    string `json:"version,omitempty"`
	LuaVersion string `json:"lua_nginx_module,omitempty"`
	// BuiltIn are the modules its configure arguments build in.
	BuiltIn []string `json:"built_in_modules"`
	// LoadModules are the load_module lines rendered; LeftOut the
	// --load-module paths left out as built in.
	LoadModules []string `json:"load_modules"`
	LeftOut     []string `json:"load_modules_left_out,omitempty"`
	// HTTP2 is "http2 on" (nginx 1.25.1 and later) or "listen ... http2".
	HTTP2 string `json:"http2"`
	// HeadersMore is "native" (more_set_headers and more_clear_headers
	// written as themselves; Server, Date and Content-Type accepted) or
	// "emulated" (proxy_hide_header and add_header).
	HeadersMore string `json:"headers_more"`
}

// NginxOf reports n with the --load-module paths loadModules.
func NginxOf(n render.Nginx, loadModules []string) *Nginx {
	s := render.Settings{Nginx: n, LoadModules: loadModules}
	return &Nginx{Detected: n.Detected(), Version: n.Version, LuaVersion: n.LuaVersion,
		BuiltIn: append([]string{}, n.BuiltIn...), LoadModules: append([]string{}, render.LoadModuleLines(s)...),
		LeftOut: n.LoadsBuiltIn(loadModules), HTTP2: render.HTTP2Form(n), HeadersMore: render.HeadersMoreForm(s)}
}

// StreamEntry is a host passed through or a TCP or UDP service.
type StreamEntry struct {
	// Listen is "TLS passthrough" or the protocol and port ("TCP 9000").
	Listen string `json:"listen"`
	// Host is the passed-through host (SNI), "" for a service.
	Host string `json:"host,omitempty"`
	// Ingress that passes the host through, "" for a service.
	Ingress string `json:"ingress,omitempty"`
	Backend string `json:"backend"`
	// Endpoints of the backend, "address:port"; empty closes connections.
	Endpoints []string `json:"endpoints"`
}

// Host is one server of nginx.conf.
type Host struct {
	// Host is the server name; "" is the default server.
	Host string `json:"host"`
	// HTTPS says it has TLS of its own (a spec.tls names it; the default
	// server always): its locations redirect plain HTTP unless
	// ssl-redirect is "false". Every host is served on the HTTPS port;
	// one without TLS with the default certificate.
	HTTPS bool `json:"https"`
	// Certificate is the Secret ("namespace/name") served for it by SNI, if any.
	Certificate string `json:"certificate,omitempty"`
	Paths       []Path `json:"paths"`
}

// Path is one location of a Host.
type Path struct {
	Path     string `json:"path"`
	PathType string `json:"path_type"`
	// MatchReason says why PathType is not the pathType the Ingress wrote
	// (model.Location.MatchReason), "" when it is.
	MatchReason string `json:"match_reason,omitempty"`
	// Ingress that owns it, "namespace/name".
	Ingress string `json:"ingress"`
	// Service names the backend for people: "Service default/demo port 80".
	Service string `json:"service,omitempty"`
	// Backend is the backend's name, the Lua balancer's key:
	// "namespace/service:port", with "@namespace/ingress" for a variant
	// an Ingress balances its own way.
	Backend string `json:"backend"`
	// Settings are what the path sets apart from the defaults, "name
	// value" each, its profile (the named location nginx.conf gives its
	// directives) first.
	Settings []string `json:"settings,omitempty"`
	// Endpoints of the backend, "address:port"; empty answers 503.
	Endpoints []string `json:"endpoints"`
	// Answer says what a location of a server-snippet answers, which has
	// no backend ("return 200"); "" for every other.
	Answer string `json:"answer,omitempty"`
}

// Certificate is one TLS Secret the model serves.
type Certificate struct {
	Name     string     `json:"name"`
	Hosts    []string   `json:"hosts"`
	NotAfter *time.Time `json:"not_after,omitempty"`
	// Invalid is why the Secret cannot be served now ("" when it can); Lua
	// then keeps the last good content, if it had any.
	Invalid string `json:"invalid,omitempty"`
}

// NotServed is an Ingress of another class, and why it is not served.
type NotServed struct {
	// Ingress is "namespace/name".
	Ingress string `json:"ingress"`
	Reason  string `json:"reason"`
}

// Problem is one piece of invalid input.
type Problem struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Object is "Kind namespace/name".
	Object string `json:"object"`
	Reason string `json:"reason"`
}

// Config compares the configs the agent rendered, had confirmed, and
// nginx runs now.
type Config struct {
	// Wanted is the hash of the nginx.conf the agent rendered last.
	Wanted string `json:"wanted"`
	// Applied is the hash nginx was last confirmed to run ("" if none).
	Applied string `json:"applied"`
	// Running is the hash nginx reports now ("" when it does not answer).
	Running string `json:"running"`
	// NginxAnswering says the Lua config API answered.
	NginxAnswering bool `json:"nginx_answering"`
	// NginxRunsApplied says nginx runs the applied config; InStep that it
	// runs the wanted one.
	NginxRunsApplied bool   `json:"nginx_runs_applied"`
	InStep           bool   `json:"in_step"`
	BootID           string `json:"boot_id,omitempty"`
	Error            string `json:"error,omitempty"`
}

// LuaDiff is the difference between the backends and certificates the
// agent wants and those Lua holds.
type LuaDiff struct {
	// InStep is true when Lua holds exactly what the agent wants.
	InStep       bool `json:"in_step"`
	Backends     int  `json:"backends"`
	Certificates int  `json:"certificates"`
	// MissingBackends are wanted and not held; ExtraBackends held and not
	// wanted; ChangedBackends held with other endpoints.
	MissingBackends []string         `json:"missing_backends"`
	ExtraBackends   []string         `json:"extra_backends"`
	ChangedBackends []ChangedBackend `json:"changed_backends"`
	// The same for certificates, compared by content hash and hosts. An
	// invalid certificate is not compared: Lua keeps its last good content.
	MissingCertificates []string `json:"missing_certificates"`
	ExtraCertificates   []string `json:"extra_certificates"`
	ChangedCertificates []string `json:"changed_certificates"`
	Error               string   `json:"error,omitempty"`
}

// ChangedBackend is a backend Lua holds with other endpoints than wanted.
type ChangedBackend struct {
	Name string   `json:"name"`
	Want []string `json:"want"`
	Held []string `json:"held"`
}

// Sync is the loop's record.
type Sync struct {
	SourceSynced bool      `json:"source_synced"`
	Applied      bool      `json:"applied"`
	LastSync     time.Time `json:"last_sync"`
	Syncs        int       `json:"syncs"`
	Reloads      int       `json:"reloads"`
	Pushes       int       `json:"pushes"`
}

// FromModel reports what m serves and the problems left out of it;
// routes are the routes of m's hosts (render.Routes), for the profiles of
// its paths.
func FromModel(m model.Model, routes render.RouteList, problems []model.Problem) Report {
	r := Report{
		Hosts:                []Host{},
		Certificates:         []Certificate{},
		Stream:               streamEntries(m.Stream),
		NotServed:            []NotServed{},
		Problems:             []Problem{},
		QuarantinedIngresses: []string{},
	}
	for _, n := range m.NotServed {
		r.NotServed = append(r.NotServed, NotServed{Ingress: n.Ingress, Reason: n.Reason})
	}
	endpoints := make(map[string][]string, m.Backends.Len())
	policies := make(map[string]model.Policy, m.Backends.Len())
	for b := range m.Backends.All() {
		endpoints[b.Name] = endpointStrings(b.Endpoints)
		policies[b.Name] = b.PolicyValue()
	}
	certOf := map[string]string{}
	for c := range m.Certificates.All() {
		rc := Certificate{Name: c.Name, Hosts: slices.Clone(c.Hosts), Invalid: c.Invalid}
		if !c.NotAfter.IsZero() {
			t := c.NotAfter.UTC()
			rc.NotAfter = &t
		}
		r.Certificates = append(r.Certificates, rc)
		for _, h := range c.Hosts {
			certOf[h] = c.Name
		}
	}
	servers := m.Servers.Slice()
	if len(m.Default.Locations) > 0 {
		servers = append([]*model.Server{&m.Default}, servers...)
	}
	profiles := profilesOf(routes)
	for _, s := range servers {
		h := Host{Host: s.Host, HTTPS: s.HTTPS || s.Host == "", Certificate: certOf[s.Host], Paths: []Path{}}
		route := s.Host
		if route == "" {
			route = render.DefaultRoute
		}
		for _, l := range s.Locations {
			eps := endpoints[l.Backend]
			if eps == nil {
				eps = []string{}
			}
			p := Path{Path: l.Path, PathType: string(l.PathType), MatchReason: l.MatchReason, Ingress: l.Ingress,
				Backend: l.Backend, Endpoints: eps,
				Settings: pathSettings(l, profiles[routePathOf(route, l)], policies[l.Backend])}
			if l.Backend != "" {
				p.Service = model.DescribeBackend(l.Backend)
			}
			if l.FixedSettings().Set {
				p.Answer = "server-snippet: 404 once allow/deny let the request in"
				if l.FixedSettings().Code != 0 {
					p.Answer = fmt.Sprintf("server-snippet: return %d", l.FixedSettings().Code)
				}
			}
			h.Paths = append(h.Paths, p)
		}
		r.Hosts = append(r.Hosts, h)
	}
	for _, p := range problems {
		r.Problems = append(r.Problems, Problem{Kind: p.Kind, Namespace: p.Namespace, Name: p.Name, Object: p.Object(), Reason: p.Reason})
	}
	if gw := m.GatewayAPI; len(gw.Classes)+len(gw.Gateways)+gw.Routes.Len() > 0 {
		r.GatewayAPI = &gw
	}
	return r
}

// routePath is one location of a route: its host, path and matching.
type routePath struct {
	host         string
	path         string
	exact, regex bool
}

// routePathOf is the route location render makes of l, a location of
// host: a regex is anchored with "^".
func routePathOf(host string, l model.Location) routePath {
	if l.PathType == model.PathRegex {
		return routePath{host: host, path: "^" + l.Path, regex: true}
	}
	return routePath{host: host, path: l.Path, exact: l.PathType == model.PathExact}
}

// profilesOf returns the profile of each location of routes that has one.
func profilesOf(routes render.RouteList) map[routePath]string {
	out := map[routePath]string{}
	for r := range routes.All() {
		for _, l := range r.Locations {
			if l.Profile != "" {
				out[routePath{r.Host, l.Path, l.Exact, l.Regex}] = l.Profile
			}
		}
	}
	return out
}

func streamEntries(st model.Stream) []StreamEntry {
	endpoints := make(map[string][]string, len(st.Backends))
	for _, b := range st.Backends {
		endpoints[b.Name] = endpointStrings(b.Endpoints)
	}
	out := []StreamEntry{}
	for _, h := range st.Passthrough {
		out = append(out, StreamEntry{Listen: "TLS passthrough", Host: h.Host, Ingress: h.Ingress, Backend: h.Backend, Endpoints: endpoints[h.Backend]})
	}
	for _, svc := range st.Services {
		out = append(out, StreamEntry{Listen: fmt.Sprintf("%s %d", svc.Protocol, svc.Port), Backend: svc.Backend, Endpoints: endpoints[svc.Backend]})
	}
	return out
}

// AddLive adds what a running agent knows: its loop's record, the config
// hashes, and the difference with what Lua holds, read through lua.
func (r *Report) AddLive(ctx context.Context, st syncer.State, lua Lua) {
	if len(st.Quarantined) > 0 {
		r.QuarantinedIngresses = slices.Clone(st.Quarantined)
	}
	r.ConfigMapRefused = st.ConfigMapRefused
	if r.GatewayAPI != nil {
		served := status.ServedGatewayAPI(*r.GatewayAPI, st.GatewayAPIApplied)
		r.GatewayAPI = &served
	}
	r.Nginx = NginxOf(st.Nginx, st.LoadModules)
	r.Sync = &Sync{SourceSynced: st.Synced, Applied: st.Applied, LastSync: st.LastSync,
		Syncs: st.Syncs, Reloads: st.Reloads, Pushes: st.Pushes}
	cfg := &Config{Wanted: st.WantedHash, Applied: st.ConfigHash}
	r.Config = cfg
	running, err := lua.Status(ctx)
	if err != nil {
		cfg.Error = err.Error()
		r.Lua = &LuaDiff{Error: "nginx does not answer"}
		return
	}
	cfg.NginxAnswering, cfg.Running, cfg.BootID = true, running.ConfigHash, running.BootID
	cfg.NginxRunsApplied = cfg.Applied != "" && running.ConfigHash == cfg.Applied
	cfg.InStep = cfg.Wanted != "" && running.ConfigHash == cfg.Wanted

	diff := &LuaDiff{
		MissingBackends: []string{}, ExtraBackends: []string{}, ChangedBackends: []ChangedBackend{},
		MissingCertificates: []string{}, ExtraCertificates: []string{}, ChangedCertificates: []string{},
	}
	r.Lua = diff
	held, err := lua.Backends(ctx)
	if err != nil {
		diff.Error = err.Error()
		return
	}
	heldCerts, err := lua.Certificates(ctx)
	if err != nil {
		diff.Error = err.Error()
		return
	}
	diff.Backends, diff.Certificates = len(held), len(heldCerts)
	diffLua(diff, st.Model, held, heldCerts)
}

func diffLua(diff *LuaDiff, m model.Model, held map[string]model.Backend, heldCerts []luaapi.HeldCertificate) {
	wanted := make(map[string]bool, m.Backends.Len())
	for b := range m.Backends.All() {
		wanted[b.Name] = true
		have, ok := held[b.Name]
		switch {
		case !ok:
			diff.MissingBackends = append(diff.MissingBackends, b.Name)
		case !slices.Equal(have.Endpoints, b.Endpoints) || have.PolicyValue() != b.PolicyValue():
			diff.ChangedBackends = append(diff.ChangedBackends, ChangedBackend{
				Name: b.Name, Want: endpointStrings(b.Endpoints), Held: endpointStrings(have.Endpoints)})
		}
	}
	for name := range held {
		if !wanted[name] {
			diff.ExtraBackends = append(diff.ExtraBackends, name)
		}
	}
	slices.Sort(diff.ExtraBackends)

	byName := make(map[string]luaapi.HeldCertificate, len(heldCerts))
	for _, c := range heldCerts {
		byName[c.Name] = c
	}
	wantedCerts := make(map[string]bool, m.Certificates.Len())
	for c := range m.Certificates.All() {
		wantedCerts[c.Name] = true
		if c.Invalid != "" {
			continue
		}
		h, ok := byName[c.Name]
		switch {
		case !ok:
			diff.MissingCertificates = append(diff.MissingCertificates, c.Name)
		case h.Hash != c.Hash() || !slices.Equal(h.Hosts, c.Hosts):
			diff.ChangedCertificates = append(diff.ChangedCertificates, c.Name)
		}
	}
	for _, c := range heldCerts {
		if !wantedCerts[c.Name] {
			diff.ExtraCertificates = append(diff.ExtraCertificates, c.Name)
		}
	}
	slices.Sort(diff.ExtraCertificates)
	diff.InStep = len(diff.MissingBackends)+len(diff.ExtraBackends)+len(diff.ChangedBackends)+
		len(diff.MissingCertificates)+len(diff.ExtraCertificates)+len(diff.ChangedCertificates) == 0
}

func endpointStrings(eps []model.Endpoint) []string {
	out := make([]string, len(eps))
	for i, e := range eps {
		out[i] = net.JoinHostPort(e.Address, strconv.Itoa(int(e.Port)))
	}
	return out
}
