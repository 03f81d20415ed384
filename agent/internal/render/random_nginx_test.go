package render

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"fmt"
	"math/big"
	mathrand "math/rand"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restysync/restysync/agent/internal/chars"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// TestRandomSnapshotsNginxAccepts generates random Ingress snapshots from a
// seed (odd but valid hosts and wildcards, paths of the three types and
// regexes, every supported annotation with valid and hostile values, TLS,
// default backends, canaries), builds and renders each, and runs the real
// `nginx -t` on the result. Whatever the model accepts, nginx must accept:
// an invalid Ingress must become a Problem, never a config nginx refuses,
// since that would block every other Ingress. Each location's path must
// also read back, through nginx's quoting rules, as the model's path.
//
// A failure names the seed; rerun it alone with
//
//	go test ./agent/internal/render -run TestRandomSnapshotsNginxAccepts -random.seed=N -random.snapshots=1
var (
	randomSeed      = flag.Int64("random.seed", 1, "first seed of TestRandomSnapshotsNginxAccepts; snapshot i uses seed+i")
	randomSnapshots = flag.Int("random.snapshots", 300, "how many random snapshots TestRandomSnapshotsNginxAccepts checks with nginx -t (30 with -short)")
)

func TestRandomSnapshotsNginxAccepts(t *testing.T) {
	binary := nginxproc.Binary(t)
	randomStreamModules = nginxproc.StreamLoadModules(t)
	randomModSecurity = nil
	if m, missing := nginxproc.FindModSecurity(t); missing == "" {
		randomModSecurity = &m
	} else {
		t.Logf("ModSecurity is checked without its module (its locations fail closed): %s", missing)
	}
	n := *randomSnapshots
	if testing.Short() && n > 30 {
		n = 30
	}
	workers := min(runtime.GOMAXPROCS(0), 4)
	prefixes := make([]string, workers)
	for w := range prefixes {
		prefixes[w] = nginxproc.TempPrefix(t)
		// The Lua modules and the default certificate, once per prefix.
		writePrefix(t, prefixes[w], model.Model{}, randomSettings(mathrand.New(mathrand.NewSource(0)), prefixes[w]))
	}
	world := newRandomWorld()
	world.modSecurity = randomModSecurity != nil

	start := time.Now()
	var next, checked, ingresses, locations, servers, gatewayRoutes atomic.Int64
	var failures atomic.Int32
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || failures.Load() >= 3 {
					return
				}
				seed := *randomSeed + i
				st, err := checkRandomSnapshot(world, binary, seed, prefixes[w])
				checked.Add(1)
				ingresses.Add(int64(st.ingresses))
				locations.Add(int64(st.locations))
				servers.Add(int64(st.servers))
				gatewayRoutes.Add(int64(st.gatewayRoutes))
				if err != nil {
					failures.Add(1)
					t.Errorf("seed %d (rerun: -random.seed=%d -random.snapshots=1): %v", seed, seed, err)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d snapshots (seeds from %d): %d Ingresses, %d servers, %d locations, %d Gateway routes checked by nginx -t in %s with %d workers",
		checked.Load(), *randomSeed, ingresses.Load(), servers.Load(), locations.Load(), gatewayRoutes.Load(), time.Since(start).Round(time.Millisecond), workers)
}

type snapshotStats struct{ ingresses, servers, locations, gatewayRoutes int }

// checkRandomSnapshot builds, renders and tests the snapshot of seed in
// prefix; the error holds what is needed to see why.
func checkRandomSnapshot(world *randomWorld, binary string, seed int64, prefix string) (snapshotStats, error) {
	rng := mathrand.New(mathrand.NewSource(seed))
	snap := world.snapshot(rng)
	// The Gateway API objects draw from a stream of their own, so the
	// Ingress part of a seed stays what it was.
	randomGatewayObjects(mathrand.New(mathrand.NewSource(seed^0x29)), &snap)
	m, problems := model.Build(snap)
	st := snapshotStats{ingresses: snap.Ingresses.Len(), servers: m.Servers.Len() + 1, gatewayRoutes: m.GatewayRoutes.Len()}
	if err := checkUnrenderableRefused(snap, problems); err != nil {
		return st, err
	}
	for _, srv := range append([]*model.Server{&m.Default}, m.Servers.Slice()...) {
		st.locations += len(srv.Locations)
	}
	s := randomSettings(rng, prefix)
	if !s.SSLPassthrough {
		// Build honoured ssl-passthrough; this render has no front for it.
		m.Stream.Passthrough = nil
	}
	// The model's Gateway listeners, or random ones when it made none.
	if listeners := randomListeners(rng, s); len(m.Listeners) == 0 {
		m.Listeners = listeners
	}
	cfg, err := Render(m, s)
	if err != nil {
		return st, fmt.Errorf("Render refused a model Build made: %v", err)
	}
	again, err := Render(m, s)
	if err != nil || string(again.Bytes) != string(cfg.Bytes) {
		return st, fmt.Errorf("rendering the same model twice gave different bytes (%v)", err)
	}
	if err := checkLocationTokens(m, cfg.Bytes); err != nil {
		return st, err
	}
	// The regex paths are matched by Lua (ngx.re, the PCRE nginx is
	// built with): a server of regex locations, added for nginx -t only,
	// has that PCRE compile each one as the agent sends it.
	conf, err := withRouteRegexes(m, s, cfg.Bytes)
	if err != nil {
		return st, err
	}
	if err := os.WriteFile(filepath.Join(prefix, ConfigName), conf, 0o644); err != nil {
		return st, err
	}
	out, err := nginxTest(binary, prefix)
	if err != nil {
		return st, fmt.Errorf("nginx -t refused the config:\n%s\n%s", out, offendingLines(out, conf))
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "[warn]") && !strings.Contains(line, "open file resource limit") {
			return st, fmt.Errorf("nginx -t warned:\n%s\n%s", out, offendingLines(out, conf))
		}
	}
	return st, nil
}

// checkUnrenderableRefused: every annotation Build reads whose value holds
// a character package chars refuses is named by a Problem of its Ingress,
// when the Ingress is ours.
func checkUnrenderableRefused(snap model.Snapshot, problems []model.Problem) error {
	ours := model.Serves(snap)
	for ing := range snap.Ingresses.All() {
		if !ours(ing) {
			continue
		}
		for key, value := range ing.Annotations {
			if chars.CheckText(value) == nil || model.AnnotationStatus(key) != model.AnnotationSupported {
				continue
			}
			if !slices.ContainsFunc(problems, func(p model.Problem) bool {
				return p.Namespace == ing.Namespace && p.Name == ing.Name && strings.HasPrefix(p.Reason, "annotation "+key+" ")
			}) {
				return fmt.Errorf("Ingress %s/%s: annotation %s %q holds a character no value may hold, and no Problem names it", ing.Namespace, ing.Name, key, value)
			}
		}
	}
	return nil
}

// withRouteRegexes returns conf with one more server, on a unix socket,
// holding a case-insensitive regex location per regex path of m's routes.
func withRouteRegexes(m model.Model, s Settings, conf []byte) ([]byte, error) {
	routes, err := Routes(m, s)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	for _, r := range routes {
		for _, l := range r.Locations {
			if !l.Regex {
				continue
			}
			q, err := QuoteRegex(l.Path)
			if err != nil {
				return nil, fmt.Errorf("host %q: regex %q: %v", r.Host, l.Path, err)
			}
			fmt.Fprintf(&b, "        location ~* %s { return 404; }\n", q)
		}
	}
	if b.Len() == 0 {
		return conf, nil
	}
	// Before the end of the http block: the first "}" at the start of a
	// line after "http {" (a stream block may follow it).
	h := bytes.Index(conf, []byte("\nhttp {\n"))
	i := h + bytes.Index(conf[h:], []byte("\n}\n")) + 1
	extra := "    server {\n        listen unix:" + filepath.Join(s.SharedDir, "regex-check.sock") + ";\n" + b.String() + "    }\n"
	return append(append(append([]byte{}, conf[:i]...), extra...), conf[i:]...), nil
}

// nginxTest is nginxproc.Test without the testing.TB, for the workers.
func nginxTest(binary, prefix string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, "-t", "-e", "stderr", "-p", prefix+"/", "-c", ConfigName).CombinedOutput()
	return string(out), err
}

// offendingLines quotes the lines of conf that nginx's messages name
// ("... in /prefix/nginx.conf:42"), with two lines around each.
func offendingLines(out string, conf []byte) string {
	lines := strings.Split(string(conf), "\n")
	var b strings.Builder
	for _, m := range regexp.MustCompile(`nginx\.conf:(\d+)`).FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[1])
		fmt.Fprintf(&b, "--- nginx.conf around line %d ---\n", n)
		for i := max(1, n-2); i <= min(len(lines), n+2); i++ {
			marker := "  "
			if i == n {
				marker = "> "
			}
			fmt.Fprintf(&b, "%s%5d %s\n", marker, i, lines[i-1])
		}
	}
	if b.Len() == 0 {
		return "(nginx named no line)"
	}
	return b.String()
}

// locationLine is a location block's first line: its modifier and token.
var locationLine = regexp.MustCompile(`^\s*location (= |~\* )?(.*) \{$`)

// templateLocation is a named location the template makes ("@restysync_...").
var templateLocation = regexp.MustCompile(`^@restysync_[a-z0-9_]+$`)

// checkLocationTokens reads every location line back the way nginx's
// parser does and checks that each path of m is there, as one quoted token,
// or in the routes Lua gets for the hosts nginx.conf leaves out.
func checkLocationTokens(m model.Model, conf []byte) error {
	rendered := map[string]bool{}
	for _, line := range strings.Split(string(conf), "\n") {
		match := locationLine.FindStringSubmatch(line)
		if match == nil {
			continue
		}
		if match[2] == "/" || templateLocation.MatchString(match[2]) { // the template's own
			rendered[match[1]+match[2]] = true
			continue
		}
		value, err := nginxToken(match[2])
		if err != nil {
			return fmt.Errorf("location line %q: the path is not one quoted token: %v", line, err)
		}
		rendered[match[1]+value] = true
	}
	// The hosts nginx.conf leaves to Lua are served by their routes.
	routes, err := Routes(m, Settings{})
	if err != nil {
		return err
	}
	for _, r := range routes {
		for _, l := range r.Locations {
			switch {
			case l.Exact:
				rendered["= "+l.Path] = true
			case l.Regex:
				rendered["~* "+l.Path] = true
			default:
				rendered[l.Path] = true
			}
		}
	}
	for _, srv := range append([]*model.Server{&m.Default}, m.Servers.Slice()...) {
		for _, l := range srv.Locations {
			var want []string
			switch {
			case l.PathType == model.PathExact:
				want = []string{"= " + l.Path}
			case l.PathType == model.PathRegex:
				want = []string{"~* ^" + l.Path}
			case l.PathType == model.PathLiteralPrefix || l.PathType == model.PathPriorityPrefix:
				want = []string{l.Path} // a server-snippet's location
			case l.Path == "/":
				want = []string{"/"}
			default:
				want = []string{l.Path + "/"}
			}
			for _, w := range want {
				if !rendered[w] {
					return fmt.Errorf("host %q: path %q (%s) of %s reads back from no location line (want %q)", srv.Host, l.Path, l.PathType, l.Ingress, w)
				}
			}
		}
	}
	return nil
}

// randomSettings varies the agent's flags that reach nginx.conf.
// randomStreamModules is nginxproc.StreamLoadModules, set by the test;
// randomModSecurity is Debian's ModSecurity, nil when it is not installed.
var (
	randomStreamModules []string
	randomModSecurity   *nginxproc.ModSecurity
)

func randomSettings(rng *mathrand.Rand, prefix string) Settings {
	s := Settings{
		SharedDir:       prefix,
		HTTPPort:        18080,
		HTTPSPort:       18443,
		ListenAddress:   "127.0.0.1",
		LoadModules:     append(nginxproc.DebianLoadModules(), randomStreamModules...),
		WorkerProcesses: "1",
	}
	if rng.Intn(2) == 0 {
		s.SSLPassthrough = true
	}
	if rng.Intn(2) == 0 {
		s.HSTS, s.HSTSMaxAge, s.HSTSIncludeSubdomains, s.HSTSPreload = true, rng.Intn(maxHSTSMaxAge), rng.Intn(2) == 0, rng.Intn(2) == 0
	}
	if rng.Intn(2) == 0 {
		s.HTTPSRedirectPort = []int{443, 8443, 1}[rng.Intn(3)]
	}
	if rng.Intn(2) == 0 {
		s.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	}
	if rng.Intn(3) == 0 {
		// The ConfigMap's proxy keys, in every server (proxykeys.go).
		h := DefaultHTTP()
		h.ProxyBufferSize = pick(rng, []string{"", "4k", "16k"})
		h.ProxyBuffersNumber = pick(rng, []int{0, 2, 4, 8})
		h.ProxyBusyBuffersSize = pick(rng, []string{"", "4k", "16k"})
		h.ProxyMaxTempFileSize = pick(rng, []string{"", "0", "8k"})
		if _, err := newProxyKeysView(h.proxyKeys()); err != nil {
			h.ProxyBuffersNumber, h.ProxyBusyBuffersSize, h.ProxyMaxTempFileSize = 0, "", ""
		}
		h.ClientBodyBufferSize = pick(rng, []string{"", "8k", "1m"})
		h.ProxyCookieDomain = pick(rng, []string{"", "off", "a.internal example.com"})
		h.ProxyCookiePath = pick(rng, []string{"", "off", "/a /b"})
		h.ProxyRedirectFrom, h.ProxyRedirectTo = pick(rng, [][2]string{{"", ""}, {"off", ""}, {"http://a/", "${scheme}://b/"}})[0], ""
		if h.ProxyRedirectFrom == "http://a/" {
			h.ProxyRedirectTo = "${scheme}://b/"
		}
		h.LimitRate, h.LimitRateAfter = pick(rng, []string{"", "0", "100k"}), pick(rng, []string{"", "0", "10k"})
		s.HTTP = &h
	}
	if m := randomModSecurity; m != nil {
		// A part of the Core Rule Set, through a pattern as the default
		// has it: the whole set costs 40 ms of nginx -t per profile.
		s.LoadModules = append(s.LoadModules, m.LoadModules...)
		s.ModSecurity = ModSecurity{Rules: m.Rules, RuleEngine: pick(rng, append([]string{""}, ModSecurityRuleEngines...)),
			CoreRules: []string{"/etc/modsecurity/crs/crs-setup.conf", "/usr/share/modsecurity-crs/rules/REQUEST-90*.conf"}}
	}
	return s
}

// randomListeners returns up to four Gateway listeners: HTTP or HTTPS,
// on loopback or IPv6 addresses, on the ports of the Ingress servers (of
// another address) or others, sorted as the model sorts them.
func randomListeners(rng *mathrand.Rand, s Settings) []model.Listener {
	var out []model.Listener
	seen := map[string]bool{}
	for range rng.Intn(5) {
		addr := pick(rng, []string{"127.29.50.1", "127.29.50.2", "127.29.1.1", "::1"})
		port := int32(pick(rng, []int{80, 443, 8080, s.HTTPPort, s.HTTPSPort}))
		front := model.FrontName(addr, port)
		if seen[front] || (s.SSLPassthrough && int(port) == s.HTTPSPort) {
			continue
		}
		seen[front] = true
		out = append(out, model.Listener{Address: addr, Port: port, HTTPS: rng.Intn(2) == 0, Front: front})
	}
	slices.SortFunc(out, func(a, b model.Listener) int {
		if a.Address != b.Address {
			return strings.Compare(a.Address, b.Address)
		}
		return int(a.Port - b.Port)
	})
	return out
}

// randomWorld holds what every snapshot shares: Services, EndpointSlices
// and Secrets (generating keys is slow), and the class.
type randomWorld struct {
	// configMaps are auth-proxy-set-headers' ConfigMaps, good and bad.
	configMaps []*corev1.ConfigMap
	classes    []*networkingv1.IngressClass
	services   []*corev1.Service
	slices     []*discoveryv1.EndpointSlice
	secrets    []*corev1.Secret
	// modSecurity: nginx has the ModSecurity module (randomModSecurity).
	modSecurity bool
}

// Namespaces and Services of the random world; "gone" has no Service.
var (
	randomNamespaces = []string{"default", "team-a", "x"}
	randomServices   = []string{"web", "api", "grpc", "gone"}
)

func newRandomWorld() *randomWorld {
	w := &randomWorld{classes: []*networkingv1.IngressClass{{
		ObjectMeta: metav1.ObjectMeta{Name: "restysync"},
		Spec:       networkingv1.IngressClassSpec{Controller: model.ControllerName},
	}}}
	exact := randomCertificate("app.example.com", "a.example.com")
	wildcard := randomCertificate("*.example.com")
	for _, ns := range randomNamespaces {
		for i, name := range randomServices[:3] {
			w.services = append(w.services, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}, {Name: "alt", Port: 8080}},
					// service-upstream: one with a cluster IP, one headless
					ClusterIP: []string{"10.96.0.1", corev1.ClusterIPNone, ""}[i]},
			})
			port, portName := int32(9000+i), "http"
			w.slices = append(w.slices, &discoveryv1.EndpointSlice{
				ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
				AddressType: discoveryv1.AddressTypeIPv4,
				Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port}},
				Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"127.0.0.1"}}, {Addresses: []string{"127.0.0.2"}}},
			})
		}
		w.configMaps = append(w.configMaps,
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "auth-headers"},
				Data: map[string]string{"X-Tenant": "a-team", "X-Host": "$host", "X_Id": "${request_id}"}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad-headers"},
				Data: map[string]string{"X-A": "a\" b", "X;B": "c", "X-C": "$hostname", "X-D": "}"}},
			// fastcgi-params-configmap's and custom-headers', good and bad.
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fcgi-params"},
				Data: map[string]string{"SCRIPT_FILENAME": "$document_root$fastcgi_script_name", "HTTP_PROXY": "", "QUERY_STRING": "${args}"}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad-fcgi-params"},
				Data: map[string]string{"A": `x"; }`, "B;": "y", "C": "$ssl_client_raw_cert"}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "resp-headers"},
				Data: map[string]string{"X-Frame-Options": "DENY", "Content-Security-Policy": `default-src 'self'; x "$y" {z}`,
					"Strict-Transport-Security": "max-age=60", "X-Request-ID": "fixed"}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad-resp-headers"},
				Data: map[string]string{"X-A": "a\r\nb", "Content-Length": "0", "X B": "c"}},
			// Values no value may hold, each alone (package chars).
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1-headers"}, Data: map[string]string{"X-A": "a\u0085b"}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bidi-headers"}, Data: map[string]string{"X-A": "\u202eb"}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "surrogate-headers"}, Data: map[string]string{"X-A": "\xed\xa0\x80"}})
		tlsSecret := func(name string, cert, key []byte) *corev1.Secret {
			return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: corev1.SecretTypeTLS,
				Data: map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key}}
		}
		w.secrets = append(w.secrets,
			tlsSecret("tls-exact", exact.cert, exact.key),
			tlsSecret("tls-wildcard", wildcard.cert, wildcard.key),
			tlsSecret("tls-mismatch", exact.cert, wildcard.key),
			tlsSecret("tls-junk", []byte("-----BEGIN CERTIFICATE-----\n;{}$\"\n-----END CERTIFICATE-----\n"), []byte("junk")),
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "basic-auth"}, Type: corev1.SecretTypeOpaque,
				Data: map[string][]byte{"auth": []byte("alice:$apr1$Kq1uYIqB$Sg0VhbUFOFMqV7/5LXKsL1\nbob:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\n")}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad-auth"}, Type: corev1.SecretTypeOpaque,
				Data: map[string][]byte{"auth": []byte("no colon; } here\n")}},
		)
	}
	return w
}

type pemPair struct{ cert, key []byte }

func randomCertificate(names ...string) pemPair {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: names[0]},
		DNSNames:     names,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		panic(err)
	}
	return pemPair{
		cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		key:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}),
	}
}

// snapshot makes 8 to 30 Ingresses over a small pool of hosts, so that
// they merge and conflict, with a few canaries among them.
func (w *randomWorld) snapshot(rng *mathrand.Rand) model.Snapshot {
	s := model.Snapshot{
		IngressClasses: model.ListOf(w.classes...),
		Services:       model.ListOf(model.ServicesOf(w.services...)...),
		EndpointSlices: model.ListOf(w.slices...),
		Secrets:        model.ListOf(w.secrets...),
		IngressClass:   "restysync",
		SSLPassthrough: true,
		ReservedPorts:  []int32{18080, 18443},
		ConfigMaps:     model.ListOf(w.configMaps...),
		TCPServices:    randomServicesConfigMap(rng, "tcp-services"),
		UDPServices:    randomServicesConfigMap(rng, "udp-services"),
	}
	hosts := make([]string, 3+rng.Intn(15))
	for i := range hosts {
		hosts[i] = randomHost(rng)
	}
	n := 8 + rng.Intn(23)
	for i := range n {
		ing := randomIngress(rng, i, hosts)
		s.Ingresses = model.ListOf(append(s.Ingresses.Slice(), ing)...)
		if rng.Intn(8) == 0 && len(ing.Spec.Rules) > 0 {
			s.Ingresses = model.ListOf(append(s.Ingresses.Slice(), randomCanary(rng, i, ing))...)
		}
	}
	// The ConfigMap's enable-modsecurity and enable-owasp-modsecurity-crs;
	// without the module, the locations that ask for it fail closed.
	s.ModSecurity = model.ModSecurityGlobal{Loaded: w.modSecurity, Enabled: rng.Intn(10) == 0, CoreRules: rng.Intn(5) == 0}
	return s
}

// randomServicesConfigMap is a TCP or UDP services ConfigMap of good,
// bad and hostile entries.
func randomServicesConfigMap(rng *mathrand.Rand, name string) *corev1.ConfigMap {
	if rng.Intn(3) == 0 {
		return nil
	}
	ports := []string{"9000", "9001", "9002", "53", "18080", "0", "65536", "x", "9000;", " 9003"}
	values := []string{"default/web:80", "team-a/api:http", "x/grpc:alt:PROXY", "default/web:80:PROXY:PROXY",
		"default/gone:80", "default/web:81", "default/web", "web:80", "default/web:80:TLS", "a/b:c:d:e:f"}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Data: map[string]string{}}
	for range rng.Intn(5) {
		value := pick(rng, values)
		if rng.Intn(4) == 0 {
			value = pick(rng, hostileValues)
		}
		cm.Data[pick(rng, ports)] = value
	}
	return cm
}

func randomIngress(rng *mathrand.Rand, i int, hosts []string) *networkingv1.Ingress {
	class := "restysync"
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:         pick(rng, randomNamespaces),
			Name:              fmt.Sprintf("ing-%d", i),
			CreationTimestamp: metav1.NewTime(time.Date(2025, 1, 1, 0, rng.Intn(30), 0, 0, time.UTC)),
			Annotations:       map[string]string{},
		},
		Spec: networkingv1.IngressSpec{IngressClassName: &class},
	}
	if rng.Intn(10) == 0 {
		ing.Spec.IngressClassName = nil
		ing.Annotations["kubernetes.io/ingress.class"] = class
	}
	useRegex := rng.Intn(4) == 0
	if useRegex {
		ing.Annotations[pick(rng, annotationPrefixes)+"use-regex"] = "true"
	}
	for range rng.Intn(6) {
		key, value := randomAnnotation(rng)
		ing.Annotations[pick(rng, annotationPrefixes)+key] = value
	}
	if rng.Intn(20) == 0 {
		// vouch-proxy's: auth_request_set variables in the sign-in URL and
		// in a header (model/snippet.go).
		ing.Annotations["nginx.ingress.kubernetes.io/auth-url"] = "http://127.0.0.1:9090/validate"
		ing.Annotations["nginx.ingress.kubernetes.io/auth-signin"] = annotationValues["auth-signin"][3]
		ing.Annotations["nginx.ingress.kubernetes.io/auth-snippet"] = annotationValues["auth-snippet"][0]
		ing.Annotations["nginx.ingress.kubernetes.io/configuration-snippet"] = annotationValues["configuration-snippet"][6]
	}
	if rng.Intn(5) == 0 {
		b := randomBackend(rng)
		ing.Spec.DefaultBackend = &b
	}
	for range rng.Intn(4) {
		r := networkingv1.IngressRule{Host: pick(rng, hosts)}
		if rng.Intn(8) == 0 {
			r.Host = ""
		}
		if rng.Intn(10) != 0 {
			r.HTTP = &networkingv1.HTTPIngressRuleValue{}
			for range 1 + rng.Intn(6) {
				r.HTTP.Paths = append(r.HTTP.Paths, randomPath(rng, useRegex))
			}
		}
		ing.Spec.Rules = append(ing.Spec.Rules, r)
	}
	if rng.Intn(3) == 0 && len(ing.Spec.Rules) > 0 {
		entry := networkingv1.IngressTLS{SecretName: pick(rng, []string{"tls-exact", "tls-wildcard", "tls-mismatch", "tls-junk", "missing", ""})}
		if rng.Intn(3) != 0 {
			for range 1 + rng.Intn(3) {
				entry.Hosts = append(entry.Hosts, pick(rng, hosts))
			}
		}
		ing.Spec.TLS = append(ing.Spec.TLS, entry)
	}
	return ing
}

// randomCanary splits some paths of primary.
func randomCanary(rng *mathrand.Rand, i int, primary *networkingv1.Ingress) *networkingv1.Ingress {
	canary := primary.DeepCopy()
	canary.Name = fmt.Sprintf("canary-%d", i)
	canary.CreationTimestamp = metav1.NewTime(primary.CreationTimestamp.Add(time.Minute))
	canary.Spec.DefaultBackend = nil
	canary.Spec.TLS = nil
	for key := range canary.Annotations {
		if !strings.HasSuffix(key, "use-regex") {
			delete(canary.Annotations, key)
		}
	}
	canary.Annotations[pick(rng, annotationPrefixes)+"canary"] = "true"
	for _, key := range []string{"canary-weight", "canary-weight-total", "canary-by-header", "canary-by-header-value", "canary-by-cookie"} {
		if rng.Intn(2) == 0 {
			canary.Annotations[pick(rng, annotationPrefixes)+key] = randomAnnotationValue(rng, key)
		}
	}
	for ri := range canary.Spec.Rules {
		if http := canary.Spec.Rules[ri].HTTP; http != nil {
			for pi := range http.Paths {
				http.Paths[pi].Backend = randomBackend(rng)
			}
		}
	}
	return canary
}

var annotationPrefixes = []string{"restysync.io/", "nginx.ingress.kubernetes.io/"}

func pick[T any](rng *mathrand.Rand, from []T) T { return from[rng.Intn(len(from))] }

// randomHost returns mostly valid hosts, many of them odd: one-letter and
// 63-letter labels, digits only, "--", punycode, wildcards, 253 bytes.
// One in ten is invalid (upper case, IP, '_', Unicode, trailing dot,
// nginx syntax), which Build must turn into a Problem.
func randomHost(rng *mathrand.Rand) string {
	switch rng.Intn(20) {
	case 0:
		return "localhost"
	case 1:
		return "xn--bcher-kva.example.com"
	case 2:
		return "*." + randomLabel(rng) + ".example.com"
	case 3:
		return "*." + randomLabel(rng) + "." + randomLabel(rng)
	case 4: // 253 bytes
		return strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 61)
	case 5:
		return "0.1-2.a--b.example.com"
	case 6:
		return pick(rng, []string{"App.example.com", "10.0.0.1", "a_b.example.com", "bücher.example.com", "example.com.",
			"*.*.example.com", "a;b.example.com", "a{b}.example.com", "$host.example.com", "a\"b.example.com", "a b.example.com", "*"})
	}
	labels := 1 + rng.Intn(4)
	parts := make([]string, labels)
	for i := range parts {
		parts[i] = randomLabel(rng)
	}
	return strings.Join(parts, ".") + pick(rng, []string{".example.com", ".test", ".io", ""})
}

func randomLabel(rng *mathrand.Rand) string {
	const alnum = "abcdefghijklmnopqrstuvwxyz0123456789"
	n := 1 + rng.Intn(12)
	if rng.Intn(20) == 0 {
		n = 63
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = alnum[rng.Intn(len(alnum))]
		if i > 0 && i < n-1 && rng.Intn(6) == 0 {
			b[i] = '-'
		}
	}
	return string(b)
}

func randomBackend(rng *mathrand.Rand) networkingv1.IngressBackend {
	b := networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: pick(rng, randomServices)}}
	switch rng.Intn(4) {
	case 0:
		b.Service.Port.Name = pick(rng, []string{"http", "alt", "missing"})
	default:
		b.Service.Port.Number = pick(rng, []int32{80, 8080, 81})
	}
	return b
}

// pathChars are what the generated path segments are made of: URL path
// characters, percent escapes and non-ASCII, and (rarely) characters the
// model must refuse in Exact and Prefix paths.
var (
	pathChars    = []string{"a", "b", "z", "0", "9", "-", ".", "_", "~", "!", "&", "(", ")", "*", "+", ",", "=", ":", "@", "%20", "%41", "é", "日本"}
	hostileChars = append([]string{";", "{", "}", "$", "\"", "'", "\\", "#", "?", " ", "\n", "\t", "//", "/./", "/../", "%2f", "\x00", "\xff"},
		unrenderableChars...)
	// unrenderableChars are characters no value may hold (package chars):
	// C1 controls, the line and paragraph separators, bidi and other
	// format characters, invalid UTF-8 (encoded surrogates, overlong and
	// stray bytes). randomAnnotationValue puts them inside valid values.
	unrenderableChars = []string{"\u0080", "\u0085", "\u009b", "\u009f", "\u2028", "\u2029", "\u202a", "\u202e", "\u2066",
		"\u2069", "\u200b", "\u200f", "\ufeff", "\U000E0041", "\xed\xa0\x80", "\xed\xbf\xbf", "\xc0\xaf", "\xff", "\x1b", "\x7f"}
)

func randomPath(rng *mathrand.Rand, useRegex bool) networkingv1.HTTPIngressPath {
	types := []networkingv1.PathType{networkingv1.PathTypeExact, networkingv1.PathTypePrefix, networkingv1.PathTypeImplementationSpecific}
	pathType := pick(rng, types)
	p := networkingv1.HTTPIngressPath{PathType: &pathType, Backend: randomBackend(rng)}
	if rng.Intn(20) == 0 {
		p.PathType = nil
	}
	if useRegex && pathType == networkingv1.PathTypeImplementationSpecific {
		p.Path = randomRegex(rng)
		return p
	}
	var b strings.Builder
	for range rng.Intn(4) {
		b.WriteByte('/')
		for range rng.Intn(8) {
			b.WriteString(pick(rng, pathChars))
		}
		if rng.Intn(25) == 0 {
			b.WriteString(pick(rng, hostileChars))
		}
	}
	if rng.Intn(3) == 0 || b.Len() == 0 {
		b.WriteByte('/')
	}
	p.Path = b.String()
	return p
}

// regexParts are pieces of the regex paths: common ones, ones that mean
// something to nginx's parser ('{', ';', quotes, '$', '\'), and the edges
// where RE2 (the model's check) and PCRE (nginx's) might differ.
var regexParts = []string{
	"api", "v[0-9]+", "(foo|bar)", ".*", "[^/]+", `\d{2,4}`, `\.`, "(?i)", "x?", "a+", "(?:b|c)*",
	"{", "}", "a{2}", "a{1,}", ";", `"`, "'", `\\`, "$", "%20", "é", "日本", "/",
	`\z`, `\A`, "(?U)a+", "(?s).", `[[:alpha:]]`, `\pL`, `\p{Greek}`, `\PN`, `\Q.*\E`, `(?P<id>[0-9]+)`, `(?<name>x)`,
	`\C`, `[\d-z]`, `\x41`, `\x{263a}`, `\0`, `\v`, `\h`, `\b`, `\B`, `a{1000}`, `(a)\1`, `(?=a)`, `x**`, `[a`, "(", ")",
}

func randomRegex(rng *mathrand.Rand) string {
	var b strings.Builder
	b.WriteByte('/')
	for range 1 + rng.Intn(4) {
		b.WriteString(pick(rng, regexParts))
		if rng.Intn(3) == 0 {
			b.WriteByte('/')
		}
	}
	return b.String()
}

// annotationValues are valid values of each supported annotation, as the
// ingress-nginx documentation has them. randomAnnotation picks one of
// them or, two times in five, a hostile value.
var annotationValues = map[string][]string{
	"proxy-ssl-verify":                      {"on", "off", "maybe"},
	"proxy-ssl-verify-depth":                {"1", "3", "-1"},
	"proxy-ssl-name":                        {"backend.internal", "Bad Name"},
	"proxy-ssl-server-name":                 {"on", "off"},
	"proxy-ssl-protocols":                   {"TLSv1.2 TLSv1.3", "TLSv1.2", "SSLv3"},
	"proxy-ssl-ciphers":                     {"HIGH:!aNULL:!MD5", "DEFAULT", "a b"},
	"proxy-ssl-secret":                      {"backend-ca", "other/ns-ca"},
	"auth-tls-secret":                       {"client-ca", "other/ns-ca"},
	"auth-tls-verify-client":                {"on", "optional", "optional_no_ca", "off", "maybe"},
	"auth-tls-verify-depth":                 {"1", "2", "0"},
	"auth-tls-error-page":                   {"https://errors.example.com/cert", "/local"},
	"auth-tls-pass-certificate-to-upstream": {"true", "false"},
	"auth-tls-match-cn":                     {"CN=client1|CN=client2", "CN=(", "client"},
	"auth-url": {"http://127.0.0.1:4180/oauth2/auth", "https://$host/oauth2/auth", "http://auth.test/check?u=$escaped_request_uri",
		"http://10.0.0.1/$http_authorization", `http://a/";} location /x {`},
	"auth-signin": {"https://$host/oauth2/start?rd=$escaped_request_uri", "https://login.example.com/", "javascript:x",
		"https://vouch.example.com/login?url=$scheme://$http_host$request_uri&error=$auth_resp_err&t=$auth_resp_jwt"},
	"auth-method":                      {"GET", "post", "BREW"},
	"auth-response-headers":            {"X-Auth-Request-User, X-Auth-Request-Email", "Authorization", "Bad Header"},
	"auth-request-redirect":            {"$request_uri", "https://$best_http_host$request_uri"},
	"auth-cache-key":                   {"$cookie__oauth2_proxy", "$remote_addr$http_authorization", "$foo"},
	"auth-cache-duration":              {"200 202 401 5m", "30s", "5 minutes"},
	"auth-always-set-cookie":           {"true", "false"},
	"auth-signin-redirect-param":       {"rd", "next", "a b"},
	"use-regex":                        {"true", "false"},
	"load-balance":                     {"round_robin", "ewma"},
	"upstream-hash-by":                 {"$request_uri", "$http_x_user", "$cookie_id", "$host$request_uri"},
	"affinity":                         {"cookie"},
	"session-cookie-name":              {"SESSION", "route"},
	"session-cookie-path":              {"/", "/app"},
	"session-cookie-max-age":           {"3600", "0"},
	"session-cookie-samesite":          {"Lax", "Strict", "None"},
	"session-cookie-secure":            {"true", "false"},
	"session-cookie-change-on-failure": {"true", "false"},
	"proxy-next-upstream-tries":        {"1", "3", "20"},
	"max-fails":                        {"1", "5"},
	"fail-timeout":                     {"10", "3600"},
	"canary":                           {"false"},
	"canary-weight":                    {"0", "20", "100"},
	"canary-weight-total":              {"100", "1000"},
	"canary-by-header":                 {"X-Canary", "x_canary"},
	"canary-by-header-value":           {"yes", "always please"},
	"canary-by-cookie":                 {"canary"},
	"ssl-redirect":                     {"true", "false"},
	"ssl-passthrough":                  {"true", "false"},
	"auth-proxy-set-headers":           {"auth-headers", "bad-headers", "missing", "other/auth-headers", "c1-headers", "bidi-headers"},
	"force-ssl-redirect":               {"true", "false"},
	"backend-protocol":                 {"HTTP", "HTTPS", "GRPC", "GRPCS", "grpc", "FCGI", "fcgi"},
	"rewrite-target":                   {"/", "/$1", "/new/$2/x", "/v2"},
	"app-root":                         {"/app", "/index.html"},
	"permanent-redirect":               {"https://example.com/new", "https://www.example.com"},
	"permanent-redirect-code":          {"301", "308"},
	"temporal-redirect":                {"https://example.com/tmp", "http://other.example.com/x?y=1"},
	"proxy-body-size":                  {"0", "8m", "1g", "100k", "512"},
	"proxy-connect-timeout":            {"5", "60"},
	"proxy-send-timeout":               {"60", "600"},
	"proxy-read-timeout":               {"60", "3600"},
	"proxy-buffering":                  {"on", "off"},
	"proxy-buffer-size":                {"4k", "8k", "16k"},
	"proxy-request-buffering":          {"on", "off"},
	"proxy-next-upstream":              {"error timeout", "error timeout http_502 http_503", "off"},
	"proxy-next-upstream-timeout":      {"0", "10"},
	"proxy-http-version":               {"1.0", "1.1"},
	"upstream-vhost": {"internal.example.com", "svc.ns.svc.cluster.local", "$service_name.$namespace.svc.cluster.local:8084",
		"$host", "$best_http_host:8080", "$service_name:$service_port"},
	"x-forwarded-prefix":         {"/api", "/"},
	"server-alias":               {"alias.example.com", "a1.example.com, *.a2.example.com"},
	"enable-access-log":          {"true", "false"},
	"whitelist-source-range":     {"10.0.0.0/8", "10.0.0.0/8, 192.168.1.1, fd00::/8"},
	"allowlist-source-range":     {"127.0.0.1/32"},
	"denylist-source-range":      {"203.0.113.0/24"},
	"enable-cors":                {"true", "false"},
	"cors-allow-origin":          {"*", "https://a.example.com", "https://a.example.com, https://*.b.example.com"},
	"cors-allow-methods":         {"GET, PUT, POST", "GET"},
	"cors-allow-headers":         {"X-Custom, Authorization", "DNT,Keep-Alive"},
	"cors-allow-credentials":     {"true", "false"},
	"cors-max-age":               {"600", "0"},
	"cors-expose-headers":        {"X-Id", "X-A, X-B"},
	"auth-type":                  {"basic"},
	"auth-secret":                {"basic-auth", "bad-auth", "missing-auth", "default/basic-auth"},
	"auth-secret-type":           {"auth-file"},
	"auth-realm":                 {"Protected", "Authentication Required - foo"},
	"limit-rps":                  {"1", "10"},
	"limit-rpm":                  {"60", "100"},
	"limit-connections":          {"5"},
	"limit-burst-multiplier":     {"3", "1"},
	"limit-whitelist":            {"10.0.0.0/8, 127.0.0.1"},
	"custom-http-errors":         {"404,503", "500"},
	"default-backend":            {"web", "api", "gone"},
	"enable-modsecurity":         {"true", "false"},
	"enable-owasp-core-rules":    {"true", "false"},
	"modsecurity-transaction-id": {"$request_id", "${host}-$req_id", "$server_name-$request_id", "$http_x_id"},
	"fastcgi-index":              {"index.php", "a b"},
	"fastcgi-params-configmap":   {"fcgi-params", "bad-fcgi-params", "missing", "other/fcgi-params", "bidi-headers"},
	"mirror-target": {"https://test.env.com$request_uri", "http://127.0.0.1:9000/copy$is_args$args", "http://$host/m",
		"http://a/$http_authorization", `http://a/";} location /x {`},
	"mirror-host":         {"shadow.example.com", "1.2.3.4:8080", "a b"},
	"mirror-request-body": {"on", "off", "false"},
	"custom-headers":      {"resp-headers", "bad-resp-headers", "missing", "other/resp-headers", "c1-headers", "surrogate-headers"},

	// the balancing keys beyond the basic ones
	"upstream-hash-by-subset":                  {"true", "false", "yes"},
	"upstream-hash-by-subset-size":             {"3", "0", "1000", "-1"},
	"affinity-mode":                            {"balanced", "persistent", "sticky"},
	"affinity-canary-behavior":                 {"sticky", "legacy", "Legacy"},
	"session-cookie-conditional-samesite-none": {"true", "false"},

	// the remaining proxy and routing keys (model/proxykeys.go)
	"proxy-buffers-number":     {"2", "4", "8", "64", "1"},
	"proxy-busy-buffers-size":  {"4k", "8k", "16k", "64k", "256k", "1g"},
	"proxy-max-temp-file-size": {"0", "1k", "4k", "1024m", "3g"},
	"client-body-buffer-size":  {"8k", "160k", "1m", "1g"},
	"proxy-cookie-domain":      {"backend.internal example.com", "off", "a", "~a b"},
	"proxy-cookie-path":        {"/app/ /", "/one /two?x=1&y=2", "off", "/x"},
	"proxy-redirect-from":      {"http://download.kiwix.org/", "default", "off", "~^http://", "$scheme://internal/"},
	"proxy-redirect-to":        {"$scheme://download.kiwix.org/", "/", "https://$best_http_host:$server_port/", "off", "$request_body"},
	"limit-rate":               {"100", "0", "1000000000", "-5"},
	"limit-rate-after":         {"1024", "0", "10"},
	"temporal-redirect-code":   {"302", "307", "303", "308"},
	"from-to-www-redirect":     {"true", "false"},
	"preserve-trailing-slash":  {"true", "false"},
	"satisfy":                  {"any", "all", "some"},
	"service-upstream":         {"true", "false"},

	// snippets, read as typed directives against an allowlist (package
	// snippet, model/snippet.go): good ones, and hostile ones the model
	// must refuse, never write
	"configuration-snippet": {
		`more_set_headers "Request-Id: $req_id";`,
		"proxy_set_header Origin \"\";\nproxy_hide_header l5d-remote-ip;\nproxy_hide_header l5d-server-id;",
		"proxy_set_header l5d-dst-override $service_name.$namespace.svc.cluster.local:$service_port;\nproxy_set_header Host $host;",
		"add_header X-Up $upstream_http_x_a always;\nmore_clear_headers X-Request-ID X-Powered-By;\nserver_tokens off;",
		"proxy_read_timeout 90;\nproxy_buffering on;\nproxy_http_version 1.0;\nproxy_buffers 8 16k;\nclient_body_buffer_size 64k;",
		"proxy_busy_buffers_size 64k;\nproxy_buffer_size 4k;\nclient_max_body_size 1g;\nproxy_request_buffering off;",
		"proxy_set_header X-Vouch $auth_resp_jwt;\nadd_header X-Err \"${auth_resp_err}!\";",
		`more_set_input_headers "X-A: a b \"c\" {d};" "X-B:";` + "\nproxy_pass_header Server;\nmore_clear_input_headers X-C;",
		"add_header Link '</a.css>; rel=preload' always;\nadd_header X-Best $best_http_host$pass_access_scheme$server_name;",
		"add_header X \"a\\r\\nSet-Cookie: x\";", "alias /etc;", `add_header X "a"} root /;`, `add_header X "a\";" always; root /;`,
		"proxy_set_header X $ssl_client_raw_cert;", "proxy_set_header X $upstream_http_x;", "access_by_lua_block { ngx.exit(200) }",
		"add_header X \"" + strings.Repeat("a", 70000) + "\";", "add_header X-Big \"" + strings.Repeat(`a"\`, 1000) + "\";",
		strings.Repeat("add_header X-Many v;\n", 300), "proxy_set_header Host $host; }", "add_header \"X\\\"Y\" v;",
		"add_header X-A \"a\u0085b\";", // issue 25: render refused it and froze every tenant
		"proxy_set_header X-A \"a\u2028b\";", "more_set_headers \"X-B: \u202ex\";",
	},
	"server-snippet": {
		"server_tokens off;\nlocation ~ ^/(ping|ready|prometheus) {\n  deny all;\n  return 404;\n}",
		"location /robots.txt {\n  add_header Content-Type \"text/plain\";\n  return 200 \"User-agent: *\\nDisallow: /\";\n}",
		`location /.well-known/assetlinks.json { add_header Content-Type "application/json"; return 200 '[{"relation": ["x"], "t": {"a": "b\\"}}]'; }`,
		"location = / { return 301 https://$host/app$request_uri; }\nlocation = /x { return https://$host/y; }",
		"location ^~ /static/ { allow 10.0.0.0/8; allow ::1; deny all; }\nlocation ~* \\.(php|asp)$ { return 403; }",
		"proxy_http_version 1.1;\nproxy_set_header Upgrade \"websocket\";\nproxy_set_header Connection \"Upgrade\";\nproxy_read_timeout 90;",
		"proxy_ssl_verify on;\nadd_header X-Top top;\nlocation /t { add_header X-A $upstream_http_x always; return 204; }",
		"location ~ ^/(?<name>x) { return 403; }", "location ~ [ { return 403; }", "location /x { return 200 \"$is_args\"; }",
		"add_header X-Safe-Header \"Safe Content\";\nadd_header X-Vuln-Header \"Benign\\r\nHTTP/1.1 200 OK\n--------\";\nreturn 200 \"Original Content\";",
		"location ^~ \"/test\" {\n  default_type 'text/plain';\n  alias /var/run;\n}", `location /a";} x { return 200; }`,
		"location /x { return 200 \"a\tb\r\nc\"; default_type \"text/html; charset=utf-8\"; }", "location /y { deny 10.0.0.1; }",
		"location /x { return 200 \"a\u0085b\"; }", "location /x { return 200 \"\u2029\"; }", "location /\u2066x { return 404; }",
	},
	"auth-snippet": {
		"auth_request_set $auth_resp_jwt $upstream_http_x_vouch_jwt;\nauth_request_set $auth_resp_err $upstream_http_x_vouch_err;",
		"\n", "# only a comment", "auth_request_set $auth_status ${upstream_status};", "auth_request_set $x $host;",
		"auth_request_set $restysync_backend $upstream_http_x;",
	},
}

// hostileValues are tried for every annotation: nginx syntax, variables,
// control characters, numbers out of range, invalid UTF-8, long.
var hostileValues = []string{
	"", " ", "x", "-1", "0", "99999999999999999999", "1e3", "0x10", "on", "TRUE", "a\u0085b", "\u2028", "\u202eb", "\xed\xa0\x80",
	`"`, "'", ";", "{", "}", "$host", "${x}", `\`, "a;b", "a\nb", "a\rb", "a\tb", "a\x00b", "\xff", "é",
	"return 200;", "true; }", "1k;", "/$1;", "/a b", "http://a b", "https://x.example.com/\"; return 200; #",
	"10.0.0.0/33", "::/0;", "*", "https://*", "GET; PUT", "X-A\r\nX-B: c", "/app\"", "#", "../..",
	strings.Repeat("a", 300), strings.Repeat("9", 30),
}

func randomAnnotation(rng *mathrand.Rand) (string, string) {
	keys := make([]string, 0, len(annotationValues))
	for key := range annotationValues {
		keys = append(keys, key)
	}
	slices.Sort(keys) // map order is random; the seed must decide
	key := pick(rng, keys)
	return key, randomAnnotationValue(rng, key)
}

func randomAnnotationValue(rng *mathrand.Rand, key string) string {
	switch n := rng.Intn(10); {
	case n < 4:
		return pick(rng, hostileValues)
	case n == 4:
		// A valid value with a character no value may hold inside it,
		// as issue 25's add_header X-A "a<U+0085>b".
		v := pick(rng, annotationValues[key])
		i := rng.Intn(len(v) + 1)
		return v[:i] + pick(rng, unrenderableChars) + v[i:]
	}
	return pick(rng, annotationValues[key])
}
