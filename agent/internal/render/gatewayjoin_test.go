package render_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/apis/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/restysync/restysync/agent/internal/apply"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
	"github.com/restysync/restysync/agent/internal/testenv/agentnginx"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
	"github.com/restysync/restysync/agent/internal/testenv/testcert"
)

// The join tests run the Gateway API end to end at unit-test speed: the
// conformance suite's own manifests (its base and each test's YAML, read
// from the sigs.k8s.io/gateway-api/conformance module) as a Snapshot, with
// EndpointSlices for Go backends on loopback that echo what they got →
// model.Build → render.Build → the agent's apply stage (apply.Stage: the
// reload, then backends, certificates and routes pushed through its Lua
// client) → a real nginx, and the suite's requests and expected answers
// sent to the Gateways' addresses. After each case the same Snapshot is
// applied again and must push nothing.

// joinPool are the Gateway addresses of the join tests.
var joinPool = []string{"127.29.7.1", "127.29.7.2", "127.29.7.3", "127.29.7.4", "127.29.7.5", "127.29.7.6", "127.29.7.7", "127.29.7.8"}

const (
	infraNS = "gateway-conformance-infra"
	appNS   = "gateway-conformance-app-backend"
	webNS   = "gateway-conformance-web-backend"
)

// conformanceDir is the conformance module's folder (downloaded when it
// is not in the module cache yet).
func conformanceDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api/conformance@v1.6.3").Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the conformance module's manifests are needed: %v", err)
		}
		t.Skipf("the conformance module's manifests are not available: %v", err)
	}
	return dir
}

// manifests decodes the suite's YAML files (relative to its module) into
// the objects a Snapshot holds; Deployments and the rest are left out.
func manifests(t *testing.T, dir string, files ...string) []any {
	t.Helper()
	var out []any
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		data = bytes.ReplaceAll(data, []byte("{GATEWAY_CLASS_NAME}"), []byte("restysync"))
		data = bytes.ReplaceAll(data, []byte("{GATEWAY_CONTROLLER_NAME}"), []byte(model.GatewayControllerName))
		for _, doc := range strings.Split(string(data), "\n---") {
			var meta metav1.TypeMeta
			if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			var o any
			switch meta.Kind {
			case "Gateway":
				o = &gatewayv1.Gateway{}
			case "HTTPRoute":
				o = &gatewayv1.HTTPRoute{}
			case "ReferenceGrant":
				o = &gatewayv1.ReferenceGrant{}
			case "ListenerSet":
				o = &gatewayv1.ListenerSet{}
			case "GatewayClass":
				o = &gatewayv1.GatewayClass{}
			case "Service":
				o = &corev1.Service{}
			case "Namespace":
				o = &corev1.Namespace{}
			case "Secret":
				o = &corev1.Secret{}
			case "ConfigMap":
				o = &corev1.ConfigMap{}
			case "BackendTLSPolicy":
				o = &gatewayv1.BackendTLSPolicy{}
			default:
				continue
			}
			if meta.APIVersion == "gateway.networking.k8s.io/v1beta1" && meta.Kind == "ReferenceGrant" {
				var g v1beta1.ReferenceGrant
				if err := yaml.Unmarshal([]byte(doc), &g); err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				o = &gatewayv1.ReferenceGrant{ObjectMeta: g.ObjectMeta, Spec: gatewayv1.ReferenceGrantSpec{From: g.Spec.From, To: g.Spec.To}}
			} else if err := yaml.UnmarshalStrict([]byte(doc), o); err != nil {
				if err := yaml.Unmarshal([]byte(doc), o); err != nil {
					t.Fatalf("%s: %v", f, err)
				}
			}
			out = append(out, o)
		}
	}
	return out
}

// joinEcho is what a backend answers: the Service it stands for and the
// request as it got it.
type joinEcho struct {
	Service   string      `json:"service"`
	Namespace string      `json:"namespace"`
	Method    string      `json:"method"`
	Path      string      `json:"path"`
	Host      string      `json:"host"`
	Headers   http.Header `json:"headers"`
	// SNI is the TLS server name a TLS backend was asked for.
	SNI string `json:"sni,omitempty"`
}

// joinBackends are one echo server per Service, started on demand.
type joinBackends struct {
	t     *testing.T
	ports map[string]int32 // "namespace/name" → port on 127.0.0.1
	// tls are the Services whose backend serves TLS with cert (those a
	// BackendTLSPolicy targets), as the suite's tls-backend does.
	tls  map[string]bool
	cert tls.Certificate
	// got are the requests each Service got, as it echoed them (what
	// the suite reads from a mirror pod's log).
	mu  sync.Mutex
	got map[string][]joinEcho
}

// received returns the requests Service namespace/name got whose path
// (with the query) is path.
func (b *joinBackends) received(namespace, name, path string) []joinEcho {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []joinEcho
	for _, e := range b.got[namespace+"/"+name] {
		if e.Path == path {
			out = append(out, e)
		}
	}
	return out
}

func (b *joinBackends) port(namespace, name string) int32 {
	key := namespace + "/" + name
	if p, ok := b.ports[key]; ok {
		return p
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.t.Fatal(err)
	}
	special := newJoinSpecial()
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if special.serve(w, r) {
			return
		}
		// As the suite's echo server: X-Echo-Set-Header "Name:value,…"
		// sets response headers, and a query's delay (up to 5 s) waits.
		if d, err := time.ParseDuration(r.URL.Query().Get("delay")); err == nil && d > 0 && d <= 5*time.Second {
			time.Sleep(d)
		}
		for _, kv := range strings.Split(r.Header.Get("X-Echo-Set-Header"), ",") {
			if k, v, ok := strings.Cut(kv, ":"); ok {
				w.Header().Set(strings.TrimSpace(k), strings.TrimSpace(v))
			}
		}
		w.Header().Set("Content-Type", "application/json")
		echo := joinEcho{Service: name, Namespace: namespace, Method: r.Method, Path: r.URL.RequestURI(), Host: r.Host, Headers: r.Header}
		if r.TLS != nil {
			echo.SNI = r.TLS.ServerName
		}
		b.mu.Lock()
		b.got[key] = append(b.got[key], echo)
		b.mu.Unlock()
		json.NewEncoder(w).Encode(echo)
	})}
	if b.tls[key] {
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{b.cert}}
		go srv.ServeTLS(l, "", "")
	} else {
		go srv.Serve(l)
	}
	b.t.Cleanup(func() { srv.Close() })
	p := int32(l.Addr().(*net.TCPAddr).Port)
	b.ports[key] = p
	return p
}

// joinPlane is nginx driven by the agent's apply stage.
type joinPlane struct {
	nginx    *apply.Nginx
	proc     *nginxproc.Nginx
	stage    *apply.Stage
	settings render.Settings
	backends *joinBackends
	dir      string
	cert     *corev1.Secret
	// cas are the CA ConfigMaps the suite's setup makes for
	// BackendTLSPolicies.
	cas []*corev1.ConfigMap
}

type nopMetrics struct{}

func (nopMetrics) Pushed(string, int, time.Duration, error) {}
func (nopMetrics) Reloaded(time.Duration, error)            {}
func (nopMetrics) ReloadUnconfirmed()                       {}
func (nopMetrics) ValidationFailed(string)                  {}

func startJoin(t *testing.T) *joinPlane {
	t.Helper()
	dir := conformanceDir(t)
	nginxproc.Binary(t)
	n, proc, settings, _ := agentnginx.StartEdited(t, nginxproc.TempPrefix(t), nil)
	certPEM, keyPEM := testcert.New(t, 29, time.Now().Add(24*time.Hour), "*.example.com", "example.com", "example.org", "second-example.org", "*.wildcard.org")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: infraNS, Name: "tls-validity-checks-certificate"},
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{corev1.TLSCertKey: []byte(certPEM), corev1.TLSPrivateKeyKey: []byte(keyPEM)}}
	// The TLS backends' certificate, self-signed: it is its own CA, as
	// the suite's tls-checks-ca-certificate is the backends' CA; another
	// one is the CA nothing is signed by (mismatch-ca-certificate).
	backendPEM, backendKey := testcert.New(t, 30, time.Now().Add(24*time.Hour), "abc.example.com", "other.example.com")
	backendCert, err := tls.X509KeyPair([]byte(backendPEM), []byte(backendKey))
	if err != nil {
		t.Fatal(err)
	}
	otherPEM, _ := testcert.New(t, 31, time.Now().Add(24*time.Hour), "abc.example.com")
	return &joinPlane{
		nginx:    n,
		proc:     proc,
		stage:    apply.NewStage(n, settings, time.Minute, false, nopMetrics{}, slog.New(slog.NewTextHandler(io.Discard, nil))),
		settings: settings,
		backends: &joinBackends{t: t, ports: map[string]int32{}, got: map[string][]joinEcho{}, tls: map[string]bool{}, cert: backendCert},
		dir:      dir,
		cert:     secret,
		cas: []*corev1.ConfigMap{
			{ObjectMeta: metav1.ObjectMeta{Namespace: infraNS, Name: "tls-checks-ca-certificate"}, Data: map[string]string{"ca.crt": backendPEM}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: infraNS, Name: "mismatch-ca-certificate"}, Data: map[string]string{"ca.crt": otherPEM}},
		},
	}
}

// snapshot is the suite's base manifests and files as a Snapshot, with
// an EndpointSlice per Service pointing at its echo backend.
func (j *joinPlane) snapshot(t *testing.T, files ...string) model.Snapshot {
	t.Helper()
	s := model.Snapshot{
		GatewayController: model.GatewayControllerName,
		GatewayAddresses:  joinPool,
		GatewayClasses: model.ListOf(&gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "restysync", Generation: 1},
			Spec: gatewayv1.GatewayClassSpec{ControllerName: model.GatewayControllerName}}),
		Secrets:    model.ListOf(j.cert),
		ConfigMaps: model.ListOf(slices.Clone(j.cas)...),
		Targets:    model.Targets{Local: true},
	}
	objects := manifests(t, j.dir, append([]string{"base/manifests.yaml"}, files...)...)
	for _, o := range objects {
		if p, ok := o.(*gatewayv1.BackendTLSPolicy); ok {
			for _, ref := range p.Spec.TargetRefs {
				j.backends.tls[p.Namespace+"/"+string(ref.Name)] = true
			}
		}
	}
	for _, o := range objects {
		switch o := o.(type) {
		case *gatewayv1.BackendTLSPolicy:
			s.BackendTLSPolicies = model.ListOf(append(s.BackendTLSPolicies.Slice(), o)...)
		case *corev1.ConfigMap:
			s.ConfigMaps = model.ListOf(append(s.ConfigMaps.Slice(), o)...)
		case *gatewayv1.Gateway:
			s.Gateways = model.ListOf(append(s.Gateways.Slice(), o)...)
		case *gatewayv1.HTTPRoute:
			s.HTTPRoutes = model.ListOf(append(s.HTTPRoutes.Slice(), o)...)
		case *gatewayv1.ReferenceGrant:
			s.ReferenceGrants = model.ListOf(append(s.ReferenceGrants.Slice(), o)...)
		case *gatewayv1.ListenerSet:
			s.ListenerSets = model.ListOf(append(s.ListenerSets.Slice(), o)...)
		case *gatewayv1.GatewayClass:
			s.GatewayClasses = model.ListOf(append(s.GatewayClasses.Slice(), o)...)
		case *corev1.Namespace:
			s.Namespaces = model.ListOf(append(s.Namespaces.Slice(), o)...)
		case *corev1.Secret:
			s.Secrets = model.ListOf(append(s.Secrets.Slice(), o)...)
		case *corev1.Service:
			s.Services = model.ListOf(append(s.Services.Slice(), model.ServiceOf(o))...)
			s.EndpointSlices = model.ListOf(append(s.EndpointSlices.Slice(), j.endpointsOf(o))...)
		}
	}
	return s
}

// endpointsOf points svc's ports at its echo backend: each service port
// targets the backend's port.
func (j *joinPlane) endpointsOf(svc *corev1.Service) *discoveryv1.EndpointSlice {
	port := j.backends.port(svc.Namespace, svc.Name)
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name + "-join",
			Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"127.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}},
	}
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		p.TargetPort = intstr.FromInt32(port)
		slice.Ports = append(slice.Ports, discoveryv1.EndpointPort{Name: ptr(p.Name), Port: ptr(port), Protocol: ptr(corev1.ProtocolTCP)})
	}
	return slice
}

func ptr[T any](v T) *T { return &v }

// sync builds, renders and applies s as the syncer does; it returns the
// model and what the stage did.
func (j *joinPlane) sync(t *testing.T, s model.Snapshot) (model.Model, apply.Result) {
	t.Helper()
	m, problems := model.Build(s)
	for _, p := range problems {
		t.Logf("problem: %s %s/%s: %s", p.Kind, p.Namespace, p.Name, p.Reason)
	}
	cfg, routes, err := render.Build(m, j.settings)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	old := j.proc.WorkerPIDs()
	res, err := j.stage.Apply(ctx, apply.Step{Model: m, Config: cfg, Routes: render.NewRouteList(routes)})
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if !res.Current {
		t.Fatalf("apply: nginx does not run the config yet (%+v)", res)
	}
	if res.Reloaded {
		j.stoppedAccepting(t, old)
	}
	return m, res
}

// stoppedAccepting waits until each of the workers old (those before a
// reload) has exited or says it is shutting down: until then it may
// still accept a connection on a listener the configs share and answer
// it with the old config (a route that jumps to a location only the new
// config has would get a 500 there).
func (j *joinPlane) stoppedAccepting(t *testing.T, old []int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		waiting := slices.DeleteFunc(slices.Clone(old), func(pid int) bool {
			title, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
			return err != nil || bytes.Contains(title, []byte("shutting down"))
		})
		if len(waiting) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx's workers %v of the earlier config still accept after 10 s", waiting)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// gatewayAddress is the first address of Gateway infra/name.
func gatewayAddress(t *testing.T, m model.Model, name string) string {
	t.Helper()
	for _, g := range m.GatewayAPI.Gateways {
		if g.Namespace == infraNS && g.Name == name && len(g.Addresses) > 0 {
			return g.Addresses[0]
		}
	}
	t.Fatalf("Gateway %s/%s has no address: %+v", infraNS, name, m.GatewayAPI.Gateways)
	return ""
}

// joinCase is one of the suite's requests and what it expects.
type joinCase struct {
	gateway string // infra Gateway name; "" for same-namespace
	port    int    // 0 for 80
	https   bool
	method  string
	host    string // "" for the Gateway's address
	sni     string // the TLS server name; "" for host
	path    string
	headers map[string]string
	// echoSet asks the backend for response headers (X-Echo-Set-Header).
	echoSet string

	status  int    // 0 for 200
	backend string // Service (infra namespace) or namespace/Service
	// What the backend got.
	reqPath    string
	reqHost    string
	reqHeaders map[string]string
	reqAbsent  []string
	reqSNI     string // the TLS server name a TLS backend was asked for
	// The answer's headers.
	respHeaders map[string]string
	respAbsent  []string
	// redirect: the Location's scheme://host[:port]/path, "" parts
	// defaulting as the suite does.
	redirect *joinRedirect
	// mirrors are the Services (infra namespace) that get a copy of the
	// request, with reqHeaders and without reqAbsent as the backend: the
	// path gets a query parameter of its own, as the suite's does.
	mirrors []string
}

type joinRedirect struct{ scheme, host, port, path string }

func (c joinCase) String() string {
	return fmt.Sprintf("%s %s%s %v (SNI %s)", cmpOr(c.method, "GET"), c.host, c.path, c.headers, c.sni)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (j *joinPlane) check(t *testing.T, m model.Model, c joinCase) {
	t.Helper()
	addr := gatewayAddress(t, m, cmpOr(c.gateway, "same-namespace"))
	port := c.port
	if port == 0 {
		port = 80
	}
	scheme := "http"
	if c.https {
		scheme = "https"
	}
	host := c.host
	if host == "" {
		host = addr
	}
	client := &http.Client{
		Timeout:       5 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "tcp", net.JoinHostPort(addr, strconv.Itoa(port)))
			},
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true, ServerName: cmpOr(c.sni, c.host)},
			DisableKeepAlives: true,
		},
	}
	target := scheme + "://" + host
	if port != 80 && !c.https || port != 443 && c.https {
		target += ":" + strconv.Itoa(port)
	}
	if c.mirrors != nil {
		c.path += fmt.Sprintf("?X-Request-Id=join-%d", time.Now().UnixNano())
		c.reqPath = c.path
	}
	req, err := http.NewRequest(cmpOr(c.method, http.MethodGet), target+c.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	if c.echoSet != "" {
		req.Header.Set("X-Echo-Set-Header", c.echoSet)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Errorf("%s: %v", c, err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	want := c.status
	if want == 0 {
		want = http.StatusOK
	}
	if resp.StatusCode != want {
		errorLog, _ := os.ReadFile(filepath.Join(j.nginx.SharedDir, "logs", "error.log"))
		t.Errorf("%s: status %d (%.200s), want %d; nginx's error log ends:\n%s", c, resp.StatusCode, body, want, errorLog[max(0, len(errorLog)-1500):])
		return
	}
	for k, v := range c.respHeaders {
		if got := strings.Join(resp.Header.Values(k), ","); got != v {
			t.Errorf("%s: response header %s %q, want %q", c, k, got, v)
		}
	}
	for _, k := range c.respAbsent {
		if _, ok := resp.Header[http.CanonicalHeaderKey(k)]; ok {
			t.Errorf("%s: response header %s present, want absent", c, k)
		}
	}
	if c.redirect != nil {
		j.checkRedirect(t, c, req, resp.Header.Get("Location"))
	}
	if c.backend == "" {
		return
	}
	var echo joinEcho
	if err := json.Unmarshal(body, &echo); err != nil {
		t.Errorf("%s: %.200s is no echo: %v", c, body, err)
		return
	}
	wantNS, wantSvc, ok := strings.Cut(c.backend, "/")
	if !ok {
		wantNS, wantSvc = infraNS, c.backend
	}
	if echo.Namespace != wantNS || echo.Service != wantSvc {
		t.Errorf("%s: answered by %s/%s, want %s/%s", c, echo.Namespace, echo.Service, wantNS, wantSvc)
	}
	if c.reqPath != "" && echo.Path != c.reqPath {
		t.Errorf("%s: backend got path %q, want %q", c, echo.Path, c.reqPath)
	}
	if c.reqSNI != "" && echo.SNI != c.reqSNI {
		t.Errorf("%s: backend was asked for TLS server name %q, want %q", c, echo.SNI, c.reqSNI)
	}
	if c.reqHost != "" && echo.Host != c.reqHost {
		t.Errorf("%s: backend got host %q, want %q", c, echo.Host, c.reqHost)
	}
	for k, v := range c.reqHeaders {
		if got := strings.Join(echo.Headers.Values(k), ","); got != v {
			t.Errorf("%s: backend got header %s %q, want %q", c, k, got, v)
		}
	}
	for _, k := range c.reqAbsent {
		if _, ok := echo.Headers[http.CanonicalHeaderKey(k)]; ok {
			t.Errorf("%s: backend got header %s, want it absent", c, k)
		}
	}
	for _, svc := range c.mirrors {
		j.checkMirrored(t, c, svc)
	}
}

// checkMirrored waits (up to 5 s) for Service svc's copy of c's request
// and compares it with what the backend got: once, the same method, path
// and header edits, and the Host the backend got.
func (j *joinPlane) checkMirrored(t *testing.T, c joinCase, svc string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	var got []joinEcho
	for {
		got = j.backends.received(infraNS, svc, c.path)
		if len(got) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(got) != 1 {
		t.Errorf("%s: mirror %s got %d copies, want 1", c, svc, len(got))
		return
	}
	mirrored := got[0]
	if mirrored.Method != cmpOr(c.method, http.MethodGet) {
		t.Errorf("%s: mirror %s got method %s", c, svc, mirrored.Method)
	}
	for k, v := range c.reqHeaders {
		if got := strings.Join(mirrored.Headers.Values(k), ","); got != v {
			t.Errorf("%s: mirror %s got header %s %q, want %q", c, svc, k, got, v)
		}
	}
	for _, k := range c.reqAbsent {
		if _, ok := mirrored.Headers[http.CanonicalHeaderKey(k)]; ok {
			t.Errorf("%s: mirror %s got header %s, want it absent", c, svc, k)
		}
	}
	if mirrored.Headers.Get("X-Restysync-Proxied") == "" {
		t.Errorf("%s: mirror %s got no X-Restysync-Proxied (the loop guard's)", c, svc)
	}
}

// checkRedirect compares a Location as the suite does: the expected
// scheme and path default to the request's, the host to what came back,
// and a port not expected must be the scheme's default or absent.
func (j *joinPlane) checkRedirect(t *testing.T, c joinCase, req *http.Request, location string) {
	t.Helper()
	u, err := url.Parse(location)
	if err != nil {
		t.Errorf("%s: Location %q: %v", c, location, err)
		return
	}
	want := *c.redirect
	want.scheme = cmpOr(want.scheme, req.URL.Scheme)
	want.host = cmpOr(want.host, u.Hostname())
	want.path = cmpOr(want.path, req.URL.Path)
	switch {
	case u.Scheme != want.scheme:
		t.Errorf("%s: Location %q: scheme, want %q", c, location, want.scheme)
	case u.Hostname() != want.host:
		t.Errorf("%s: Location %q: host, want %q", c, location, want.host)
	case want.port == "" && u.Port() != "" && !(u.Scheme == "http" && u.Port() == "80" || u.Scheme == "https" && u.Port() == "443"):
		t.Errorf("%s: Location %q: port %q, want the scheme's default", c, location, u.Port())
	case want.port != "" && u.Port() != want.port:
		t.Errorf("%s: Location %q: port, want %q", c, location, want.port)
	case u.Path != want.path:
		t.Errorf("%s: Location %q: path, want %q", c, location, want.path)
	}
}

// joinTest is one of the suite's tests: its manifests and cases.
type joinTest struct {
	name  string
	files []string
	cases []joinCase
	// weights: requests to "/" of same-namespace spread over these
	// Services as their weights say (the suite's HTTPRouteWeight).
	weights map[string]int
	// selfHeader: with weights, each backend got this request header
	// naming its own Service (HTTPRouteRequestHeaderModifierBackendWeights).
	selfHeader string
	// mirrorShares: requests to each path are mirrored to Service v2 at
	// this percent (HTTPRouteRequestPercentageMirror).
	mirrorShares map[string]int
}

// TestGatewayJoinConformance applies the suite's manifests through the
// model, render and the apply stage to a real nginx, and checks the
// suite's requests; a second apply of the same Snapshot pushes nothing
// and does not reload.
func TestGatewayJoinConformance(t *testing.T) {
	j := startJoin(t)
	for _, tt := range joinTests {
		t.Run(tt.name, func(t *testing.T) {
			s := j.snapshot(t, tt.files...)
			m, _ := j.sync(t, s)
			for _, c := range tt.cases {
				j.check(t, m, c)
			}
			if tt.weights != nil {
				j.checkWeights(t, m, tt.weights, tt.selfHeader)
			}
			for path, percent := range tt.mirrorShares {
				j.checkMirrorShare(t, m, path, percent)
			}
			if t.Failed() {
				j.logNginx(t)
			}
			j.wantNothingAgain(t, j.snapshot(t, tt.files...))
		})
	}
}

// logNginx logs the tail of nginx's error log.
func (j *joinPlane) logNginx(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(j.nginx.SharedDir, "logs", "error.log"))
	if len(data) > 8000 {
		data = data[len(data)-8000:]
	}
	t.Logf("nginx's error log (tail, %v):\n%s", err, data)
}

// wantNothingAgain applies s, the Snapshot just applied, again: it must
// push nothing and not reload.
func (j *joinPlane) wantNothingAgain(t *testing.T, s model.Snapshot) {
	t.Helper()
	_, again := j.sync(t, s)
	if again.Reloaded || again.Pushed || again.Upserts+again.Removes+again.CertUpserts+again.CertRemoves+again.RouteUpserts+again.RouteRemoves > 0 {
		status, err := j.nginx.Lua.Status(context.Background())
		t.Errorf("the same Snapshot again: %+v (reload reasons %q), want nothing done; nginx now runs %q (%v), the agent applied %q",
			again.Outcome, again.ReloadReasons, status.ConfigHash, err, j.stage.Applied())
	}
}

// checkWeights sends 300 requests and wants each Service's count within
// 3.5 standard deviations of its weight's share (of 100), as
// checkMirrorShare, and none for weight 0; and, when selfHeader is set,
// that request header naming the Service that got it. (A bound of 8
// points was 2.8 deviations at weight 50: about one run in 200 failed on
// a fair balancer.)
func (j *joinPlane) checkWeights(t *testing.T, m model.Model, weights map[string]int, selfHeader string) {
	t.Helper()
	addr := gatewayAddress(t, m, "same-namespace")
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	const n = 300
	got := map[string]int{}
	for range n {
		resp, err := client.Get("http://" + addr + "/")
		if err != nil {
			t.Fatal(err)
		}
		var echo joinEcho
		err = json.NewDecoder(resp.Body).Decode(&echo)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /: %d %v", resp.StatusCode, err)
		}
		got[echo.Service]++
		if selfHeader != "" {
			if names := echo.Headers.Values(selfHeader); len(names) != 1 || names[0] != echo.Service {
				t.Fatalf("%s got header %s %q, want its own name once", echo.Service, selfHeader, names)
			}
		}
	}
	for svc, w := range weights {
		p := float64(w) / 100
		want, deviation := n*p, math.Sqrt(n*p*(1-p))
		if w == 0 && got[svc] > 0 || math.Abs(float64(got[svc])-want) > 3.5*deviation {
			t.Errorf("%s: %d of %d requests (%d%%), weight %d of 100 (want %.0f ± %.0f)", svc, got[svc], n, got[svc]*100/n, w, want, 3.5*deviation)
		}
	}
}

// checkMirrorShare sends 400 requests to path of same-namespace, each
// with a query of its own, and wants the copies v2 got within 3.5
// standard deviations of percent (the suite allows 3 over 500 requests,
// five tries).
func (j *joinPlane) checkMirrorShare(t *testing.T, m model.Model, path string, percent int) {
	t.Helper()
	addr := gatewayAddress(t, m, "same-namespace")
	client := &http.Client{Timeout: 5 * time.Second}
	const n = 400
	run := fmt.Sprintf("share-%d", time.Now().UnixNano())
	for i := range n {
		resp, err := client.Get(fmt.Sprintf("http://%s%s?run=%s&i=%d", addr, path, run, i))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
	}
	count := func() int {
		c := 0
		for i := range n {
			c += len(j.backends.received(infraNS, v2, fmt.Sprintf("%s?run=%s&i=%d", path, run, i)))
		}
		return c
	}
	p := float64(percent) / 100
	want, margin := n*p, 3.5*math.Sqrt(n*p*(1-p))
	got := count()
	for deadline := time.Now().Add(5 * time.Second); float64(got) < want-margin && time.Now().Before(deadline); got = count() {
		time.Sleep(50 * time.Millisecond) // copies still on their way
	}
	if float64(got) < want-margin || float64(got) > want+margin {
		t.Errorf("%s: %d of %d requests mirrored, want %.0f ± %.0f (%d%%)", path, got, n, want, margin, percent)
	}
}

// v1, v2, v3 are the suite's infra backends.
const (
	v1 = "infra-backend-v1"
	v2 = "infra-backend-v2"
	v3 = "infra-backend-v3"
)

func hdr(kv ...string) map[string]string {
	m := make(map[string]string, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

var _ = slices.Contains[[]string]

// TestGatewayJoinMirrorLoop: a mirror whose Service leads back into the
// Gateway itself (its EndpointSlice holds the Gateway's own address) does
// not loop: the copy carries the loop guard's header and the mirroring
// rule answers it 508, so the backend gets the request once, and nginx
// keeps answering. A client cannot name the internal mirror location.
func TestGatewayJoinMirrorLoop(t *testing.T) {
	j := startJoin(t)
	route := &gatewayv1.HTTPRoute{}
	if err := yaml.Unmarshal([]byte(`
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: mirror-loop, namespace: gateway-conformance-infra}
spec:
  parentRefs: [{name: same-namespace}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /loop}}]
    filters:
    - {type: RequestMirror, requestMirror: {backendRef: {name: loop, port: 80}}}
    backendRefs: [{name: infra-backend-v1, port: 8080}]
`), route); err != nil {
		t.Fatal(err)
	}
	s := j.snapshot(t)
	s.HTTPRoutes = model.ListOf(append(s.HTTPRoutes.Slice(), route)...)
	m, _ := j.sync(t, s)
	addr := gatewayAddress(t, m, "same-namespace")
	s.Services = model.ListOf(append(s.Services.Slice(), model.ServiceOf(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: infraNS, Name: "loop"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(80)}}}}))...)
	s.EndpointSlices = model.ListOf(append(s.EndpointSlices.Slice(), &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: infraNS, Name: "loop", Labels: map[string]string{discoveryv1.LabelServiceName: "loop"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(80)), Protocol: ptr(corev1.ProtocolTCP)}},
	})...)
	m, res := j.sync(t, s)
	if res.Reloaded {
		t.Errorf("a mirror's new backend reloaded nginx: %+v", res.ReloadReasons)
	}
	c := joinCase{path: "/loop", backend: v1}
	for range 3 {
		j.check(t, m, c)
	}
	time.Sleep(300 * time.Millisecond) // a loop would still be sending copies
	if got := j.backends.received(infraNS, v1, "/loop"); len(got) != 3 {
		t.Errorf("infra-backend-v1 got /loop %d times, want 3 (the copies must be refused, not served)", len(got))
	}
	log, err := os.ReadFile(filepath.Join(j.nginx.SharedDir, "logs", "error.log"))
	if err != nil || !strings.Contains(string(log), "came from this nginx's own auth or mirror request") {
		t.Errorf("no loop refusal in nginx's error log (%v)", err)
	}
	conn, err := net.DialTimeout("tcp", addr+":80", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(conn, "GET _restysync_mirror/1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	status, _ := io.ReadAll(io.LimitReader(conn, 64))
	if !strings.HasPrefix(string(status), "HTTP/1.1 400") {
		t.Errorf("a request for the internal mirror location: %q, want a 400", status)
	}
	if t.Failed() {
		j.logNginx(t)
	}
}
