package model

import (
	"fmt"
	"math/rand"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Hostile input: what a careless or malicious manifest can put in front of
// Build, mostly through the file source, which has no API server to bound
// sizes or validate fields. Each test checks that the bad part becomes a
// clear Problem on the object that holds it, that a neighbour Ingress in
// the same snapshot is served exactly as it is alone, and that the cost is
// bounded: no wall clock, only bytes allocated (with wide margins).

const mib = 1 << 20

// pairGood is the neighbour's certificate.
var pairGood = newPair(certExpiry, "good.example.com")

// neighbour is the well-behaved Ingress every hostile snapshot also holds,
// created first: it must win nothing it would not win alone.
func neighbour() *networkingv1.Ingress {
	return newIngress("default", "neighbour", createdAt(-1),
		rule("good.example.com", prefix("/", "web", 80), exact("/exact", "web", "http")),
		withTLS("good-tls", "good.example.com"))
}

// hostileSnapshot is snapshotOf(neighbour, ingresses...) with the
// neighbour's Secret and any extra Secrets.
func hostileSnapshot(ingresses []*networkingv1.Ingress, secrets ...*corev1.Secret) Snapshot {
	s := snapshotOf(append([]*networkingv1.Ingress{neighbour()}, ingresses...)...)
	s.Secrets = ListOf(append([]*corev1.Secret{tlsSecret("default", "good-tls", pairGood)}, secrets...)...)
	return s
}

// checkNeighbourUnchanged fails unless the neighbour's server, backend and
// certificate in m are those it gets alone, and no Problem names it.
func checkNeighbourUnchanged(t *testing.T, m Model, problems []Problem) {
	t.Helper()
	alone, aloneProblems := Build(hostileSnapshot(nil))
	if len(aloneProblems) != 0 {
		t.Fatalf("the neighbour alone has problems: %v", aloneProblems)
	}
	if got, want := serverOf(m, "good.example.com"), *alone.Servers.At(0); !reflect.DeepEqual(got, want) {
		t.Errorf("neighbour's server:\n got %s\nwant %s", dump(got), dump(want))
	}
	if got, want := certificateOf(m, "default/good-tls"), alone.Certificates.At(0); !reflect.DeepEqual(got, want) {
		t.Errorf("neighbour's certificate:\n got %s\nwant %s", dump(got), dump(want))
	}
	for _, b := range alone.Backends.Slice() {
		if !slices.ContainsFunc(m.Backends.Slice(), func(x Backend) bool { return reflect.DeepEqual(x, b) }) {
			t.Errorf("neighbour's backend %s is missing or changed", b.Name)
		}
	}
	for _, p := range problems {
		if p.Name == "neighbour" || p.Name == "good-tls" {
			t.Errorf("problem on the neighbour: %s", p)
		}
	}
}

func serverOf(m Model, host string) Server {
	for s := range m.Servers.All() {
		if s.Host == host {
			return *s
		}
	}
	return Server{}
}

func certificateOf(m Model, name string) Certificate {
	for c := range m.Certificates.All() {
		if c.Name == name {
			return c
		}
	}
	return Certificate{}
}

// checkProblems fails unless every problem is on Ingress default/name (or
// on a Secret named in secrets), is valid UTF-8 of at most maxReasonBytes
// plus a little for the clip marker, and at least one holds each of want.
func checkProblems(t *testing.T, problems []Problem, name string, want ...string) {
	t.Helper()
	if len(problems) == 0 {
		t.Fatalf("no problem for Ingress default/%s, want %q", name, want)
	}
	for _, p := range problems {
		if p.Kind != "Ingress" || p.Namespace != "default" || p.Name != name {
			t.Errorf("problem on another object than Ingress default/%s: %s", name, clipForLog(p.String()))
		}
		if len(p.Reason) > maxReasonBytes+8 {
			t.Errorf("problem reason is %d bytes, want it clipped to about %d: %s", len(p.Reason), maxReasonBytes, clipForLog(p.Reason))
		}
		if !utf8.ValidString(p.String()) {
			t.Errorf("problem is not valid UTF-8: %q", clipForLog(p.String()))
		}
	}
	for _, w := range want {
		if !slices.ContainsFunc(problems, func(p Problem) bool { return strings.Contains(p.Reason, w) }) {
			t.Errorf("no problem holds %q; problems:\n%s", w, problemList(problems))
		}
	}
}

func problemList(problems []Problem) string {
	var b strings.Builder
	for _, p := range problems {
		b.WriteString("  " + clipForLog(p.String()) + "\n")
	}
	return b.String()
}

// clipForLog keeps a failing test's output readable when clipping failed.
func clipForLog(s string) string {
	if len(s) > 300 {
		return s[:200] + fmt.Sprintf("…(%d bytes)…", len(s)-300) + s[len(s)-100:]
	}
	return s
}

// allocatedBy returns the bytes f allocates, measured from the heap
// statistics; f runs once.
func allocatedBy(f func()) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// buildBounded builds s once, fails if that allocates more than limit
// bytes, and returns the result.
func buildBounded(t *testing.T, s Snapshot, limit uint64) (Model, []Problem) {
	t.Helper()
	var m Model
	var problems []Problem
	allocated := allocatedBy(func() { m, problems = Build(s) })
	t.Logf("Build allocated %.1f MiB", float64(allocated)/mib)
	if allocated > limit {
		t.Errorf("Build allocated %d bytes, more than the bound %d", allocated, limit)
	}
	return m, problems
}

// TestHostileHugeAnnotationValues gives each annotation Build reads, and
// an unknown and a snippet one, a value of 1 MiB. Each read one is a
// Problem quoting a clipped value; the value is never copied around.
func TestHostileHugeAnnotationValues(t *testing.T) {
	huge := strings.Repeat("x", mib)
	var keys []string
	for _, key := range supportedAnnotations() {
		keys = append(keys, key)
	}
	keys = append(keys, "influxdb-host", "stream-snippet")
	for _, key := range keys {
		t.Run(key, func(t *testing.T) {
			opts := []ingressOption{annotation("nginx.ingress.kubernetes.io/"+key, huge),
				rule("hostile.example.com", prefix("/", "web", 80))}
			switch key {
			case "canary-by-header-value", "canary-by-header-pattern", "canary-weight", "canary-weight-total", "canary-by-header", "canary-by-cookie",
				"affinity-canary-behavior":
				opts = append(opts, annotation("nginx.ingress.kubernetes.io/canary", "true"))
			case "session-cookie-name", "session-cookie-path", "session-cookie-max-age", "session-cookie-samesite",
				"session-cookie-secure", "session-cookie-change-on-failure", "session-cookie-domain", "session-cookie-expires",
				"affinity-mode", "session-cookie-conditional-samesite-none":
				opts = append(opts, annotation("nginx.ingress.kubernetes.io/affinity", "cookie"))
			}
			// Keys read only when another one turns their feature on.
			if strings.HasPrefix(key, "auth-tls-") && key != "auth-tls-secret" {
				opts = append(opts, annotation("nginx.ingress.kubernetes.io/auth-tls-secret", "client-ca"))
			}
			extAuth := strings.HasPrefix(key, "auth-") && !strings.HasPrefix(key, "auth-tls-") && key != "auth-url" && supportedAnnotation(key) &&
				!slices.Contains([]string{"auth-type", "auth-secret", "auth-secret-type", "auth-realm"}, key)
			if extAuth {
				opts = append(opts, annotation("nginx.ingress.kubernetes.io/auth-url", "http://auth.test/check"))
			}
			if key == "auth-cache-duration" {
				opts = append(opts, annotation("nginx.ingress.kubernetes.io/auth-cache-key", "$remote_addr"))
			}
			for _, enabler := range []struct{ prefix, key, value string }{
				{"cors-", "enable-cors", "true"},
				{"auth-", "auth-type", "basic"},
				{"limit-", "limit-rps", "10"},
			} {
				if strings.HasPrefix(key, enabler.prefix) && key != enabler.key && !extAuth && key != "auth-url" && !strings.HasPrefix(key, "auth-tls-") {
					opts = append(opts, annotation("nginx.ingress.kubernetes.io/"+enabler.key, enabler.value))
				}
			}
			if key == "mirror-host" || key == "mirror-request-body" { // read with a target
				opts = append(opts, annotation("nginx.ingress.kubernetes.io/mirror-target", "http://mirror.test/"))
			}
			if strings.HasPrefix(key, "fastcgi-") { // read for FastCGI backends only
				opts = append(opts, annotation("nginx.ingress.kubernetes.io/backend-protocol", "FCGI"))
			}
			if key == "auth-realm" { // read once the rest of basic auth is good
				opts = append(opts, annotation("nginx.ingress.kubernetes.io/auth-secret", "basic-auth"))
			}
			htpasswd := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "basic-auth"},
				Data: map[string][]byte{"auth": []byte("alice:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\n")}}
			m, problems := buildBounded(t, hostileSnapshot([]*networkingv1.Ingress{newIngress("default", "hostile", opts...)}, htpasswd), 8*mib)
			want := "annotation nginx.ingress.kubernetes.io/" + key
			switch key {
			case "influxdb-host":
				want += ": is not supported; ignored"
			case "stream-snippet":
				want += ": raw nginx directives are refused by design"
			case configurationSnippetKey, ServerSnippetKey, authSnippetKey:
				want += fmt.Sprintf(": refused: the snippet is %d bytes long; at most 65536 are allowed", mib)
			default:
				want += fmt.Sprintf(" %q", clip(huge))
			}
			checkProblems(t, problems, "hostile", want)
			checkNeighbourUnchanged(t, m, problems)
			if key != "canary" && !strings.HasPrefix(key, "canary-") && key != "affinity-canary-behavior" && len(serverOf(m, "hostile.example.com").Locations) != 1 {
				t.Errorf("the hostile Ingress is not served with the annotation at its default: %s", dump(m.Servers))
			}
		})
	}
}

// TestHostileHugeStrings puts 1 MiB strings where the file source lets
// them through: host, path, regex path, Service and port name, TLS host
// and Secret name, annotation key. Every Problem is clipped to about
// maxReasonBytes, keeping the field it names and what was left out.
func TestHostileHugeStrings(t *testing.T) {
	huge := strings.Repeat("x", mib)
	regex := annotation("nginx.ingress.kubernetes.io/use-regex", "true")
	tests := []struct {
		name string
		opts []ingressOption
		// want are substrings of the problems: the field at the start,
		// the consequence at the end.
		want []string
	}{
		{"host", []ingressOption{rule(huge, prefix("/", "web", 80))},
			[]string{`spec.rules[0].host "xxxx`, "must be no more than 253 characters; rule left out"}},
		{"path", []ingressOption{rule("hostile.example.com", prefix("/"+huge, "web", 80))},
			[]string{`spec.rules[0].http.paths[0].path "/xxxx`, "is 1048577 bytes long, longer than 2048; path left out"}},
		{"regex path", []ingressOption{regex, rule("hostile.example.com", httpPath(implType, "/"+huge, backend("web", 80)))},
			[]string{`spec.rules[0].http.paths[0].path "/xxxx`, "longer than 2048; path left out"}},
		{"service name", []ingressOption{rule("hostile.example.com", prefix("/", huge, 80))},
			[]string{`spec.rules[0].http.paths[0].backend.service.name "xxxx`, "is not a Service name (a DNS-1035 label); path left out"}},
		{"port name", []ingressOption{rule("hostile.example.com", prefix("/", "web", huge))},
			[]string{`spec.rules[0].http.paths[0].backend.service.port.name "xxxx`, "is not a port name; path left out"}},
		{"TLS host", []ingressOption{rule("hostile.example.com", prefix("/", "web", 80)), withTLS("good-tls", huge)},
			[]string{`spec.tls[0].hosts[0] "xxxx`, "host left out"}},
		{"TLS Secret name", []ingressOption{rule("hostile.example.com", prefix("/", "web", 80)), withTLS(huge, "hostile.example.com")},
			[]string{`spec.tls[0].secretName "xxxx`, `hosts "hostile.example.com" get the default certificate`}},
		{"annotation key", []ingressOption{rule("hostile.example.com", prefix("/", "web", 80)), annotation("restysync.io/"+huge, "x")},
			[]string{"annotation restysync.io/xxxx", ": is not supported; ignored"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ing := newIngress("default", "hostile", tt.opts...)
			m, problems := buildBounded(t, hostileSnapshot([]*networkingv1.Ingress{ing}), 16*mib)
			checkProblems(t, problems, "hostile", tt.want...)
			// Clipped whole (" … "), or the value in it ("xxxx…").
			if !slices.ContainsFunc(problems, func(p Problem) bool { return strings.Contains(p.Reason, "…") }) {
				t.Errorf("no problem was clipped:\n%s", problemList(problems))
			}
			checkNeighbourUnchanged(t, m, problems)
		})
	}
}

func TestClipReason(t *testing.T) {
	short := strings.Repeat("é", maxReasonBytes/2)
	if got := clipReason(short); got != short {
		t.Errorf("a reason of %d bytes was clipped", len(short))
	}
	long := "field " + strings.Repeat("日本", mib) + "; left out"
	got := clipReason(long)
	if len(got) > maxReasonBytes+8 || !utf8.ValidString(got) ||
		!strings.HasPrefix(got, "field 日本") || !strings.HasSuffix(got, "; left out") || !strings.Contains(got, " … ") {
		t.Errorf("clipReason = %d bytes, valid UTF-8 %t: %q", len(got), utf8.ValidString(got), clipForLog(got))
	}
}

// TestHostileManyPaths gives one Ingress 10,000 paths: every valid one is
// served, every bad one is a Problem naming its index, and the model and
// the work grow linearly (a few hundred bytes per path).
func TestHostileManyPaths(t *testing.T) {
	const n = 10_000
	rng := rand.New(rand.NewSource(1))
	var paths []networkingv1.HTTPIngressPath
	wantServed := 0
	var wantProblems []string
	for i := range n {
		path := fmt.Sprintf("/p%d/%x", i, rng.Int63())
		switch {
		case i%1000 == 999: // a duplicate of the last valid path
			path = paths[i-2].Path
			wantProblems = append(wantProblems, fmt.Sprintf("spec.rules[0].http.paths[%d].path %q: path %q (%s) on host \"many.example.com\" is already served", i, path, path, map[bool]PathType{true: PathExact, false: PathPrefix}[(i-2)%3 == 0]))
		case i%1000 == 998:
			path += ";"
			wantProblems = append(wantProblems, fmt.Sprintf("spec.rules[0].http.paths[%d].path %q: contains ';'; path left out", i, path))
		default:
			wantServed++
		}
		pathType := prefixType
		if i%3 == 0 && i%1000 < 998 {
			pathType = exactType
		}
		if i%1000 == 999 {
			pathType = paths[i-2].PathType
		}
		paths = append(paths, httpPath(pathType, path, backend("web", 80)))
	}
	many := newIngress("default", "many", rule("many.example.com", paths...))
	s := hostileSnapshot([]*networkingv1.Ingress{many})

	// ~2.2 KiB per path measured; the bound is generous but linear.
	m, problems := buildBounded(t, s, n*16<<10)
	allocs := testing.AllocsPerRun(2, func() { Build(s) })
	t.Logf("Build of %d paths: %.0f allocations", n, allocs)
	if allocs > 100*n {
		t.Errorf("Build made %.0f allocations for %d paths, more than 100 per path", allocs, n)
	}
	checkProblems(t, problems, "many", wantProblems...)
	if len(problems) != len(wantProblems) {
		t.Errorf("%d problems, want %d:\n%s", len(problems), len(wantProblems), problemList(problems))
	}
	locations := serverOf(m, "many.example.com").Locations
	if len(locations) != wantServed {
		t.Errorf("%d locations served, want %d", len(locations), wantServed)
	}
	if m.Backends.Len() != 2 {
		t.Errorf("%d backends, want web:80 and the neighbour's web:http", m.Backends.Len())
	}
	// The model holds the paths once each, plus small fixed fields.
	size := 0
	for _, l := range locations {
		size += len(l.Path) + len(l.Backend) + len(l.Ingress)
	}
	if perPath := size / len(locations); perPath > 64 {
		t.Errorf("the model holds %d bytes of strings per location, want under 64", perPath)
	}
	checkNeighbourUnchanged(t, m, problems)
}

// TestHostileTLSSecrets serves a spec.tls from Secrets that are junk: 1 MiB
// of random bytes, PEM armour around garbage, a truncated certificate, a
// key that does not match, a chain over MaxPEMBytes. Each is a Problem
// naming the Ingress, the Secret and the reason, short whatever the size;
// the hosts still get served over HTTPS with no certificate of theirs;
// the neighbour's certificate is untouched.
func TestHostileTLSSecrets(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	junk := make([]byte, mib)
	rng.Read(junk)
	armoured := func(blockType string, body string) string {
		return "-----BEGIN " + blockType + "-----\n" + body + "\n-----END " + blockType + "-----\n"
	}
	der := strings.Split(strings.TrimSpace(pairA.certPEM), "\n")
	truncated := strings.Join(der[:len(der)/2], "\n") + "\n" + der[len(der)-1] + "\n"
	var manyChain strings.Builder
	for manyChain.Len() <= MaxPEMBytes {
		manyChain.WriteString(pairA.certPEM)
	}
	tests := []struct {
		name      string
		cert, key string
		want      string
	}{
		{"1 MiB of random bytes", string(junk), string(junk), "holds an unusable tls.crt or tls.key: failed to find any PEM data in certificate input"},
		{"1 MiB of random bytes as key", pairA.certPEM, string(junk), "holds an unusable tls.crt or tls.key: failed to find any PEM data in key input"},
		{"bad base64 in armour", armoured("CERTIFICATE", "!!!! not base64 !!!!"), pairA.keyPEM, "holds an unusable tls.crt or tls.key: failed to find any PEM data in certificate input"},
		{"1 MiB of base64 junk in armour", armoured("CERTIFICATE", strings.Repeat("QUFB", mib/4)), pairA.keyPEM, "holds an unusable tls.crt or tls.key: x509: malformed certificate"},
		{"truncated certificate", truncated, pairA.keyPEM, "holds an unusable tls.crt or tls.key"},
		{"key armour around a certificate", pairA.certPEM, strings.ReplaceAll(pairA.certPEM, "CERTIFICATE", "PRIVATE KEY"), "holds an unusable tls.crt or tls.key"},
		{"key does not match", pairA.certPEM, pairB.keyPEM, "holds an unusable tls.crt or tls.key: private key does not match public key"},
		{"chain over MaxPEMBytes", manyChain.String(), pairA.keyPEM, fmt.Sprintf("holds a tls.crt or tls.key larger than %d bytes", MaxPEMBytes)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ing := newIngress("default", "hostile", rule("hostile.example.com", prefix("/", "web", 80)), withTLS("junk", "hostile.example.com"))
			s := hostileSnapshot([]*networkingv1.Ingress{ing}, rawTLSSecret("default", "junk", tt.cert, tt.key))
			m, problems := buildBounded(t, s, 64*mib)
			checkProblems(t, problems, "hostile", `spec.tls[0].secretName "junk": Secret default/junk `+tt.want)
			cert := certificateOf(m, "default/junk")
			if cert.Invalid == "" || cert.CertPEM != "" || cert.KeyPEM != "" || !reflect.DeepEqual(cert.Hosts, []string{"hostile.example.com"}) {
				t.Errorf("the junk Secret's certificate: %s", clipForLog(dump(cert)))
			}
			if srv := serverOf(m, "hostile.example.com"); !srv.HTTPS || len(srv.Locations) != 1 {
				t.Errorf("the host of the junk Secret is not served over HTTPS: %s", dump(srv))
			}
			checkNeighbourUnchanged(t, m, problems)
		})
	}
}

// TestHostileInvalidUTF8 puts bytes that are not UTF-8 in a host, a path,
// a regex path, a TLS host and annotation values. They are left out with a
// Problem that is itself valid UTF-8 (the bytes are quoted as \xff), so
// that logs, Events and JSON carry it intact.
func TestHostileInvalidUTF8(t *testing.T) {
	const bad = "\xff\xfe"
	tests := []struct {
		name string
		opts []ingressOption
		want string
	}{
		{"host", []ingressOption{rule("a"+bad+".example.com", prefix("/", "web", 80))},
			`spec.rules[0].host "a\xff\xfe.example.com": a lowercase RFC 1123 subdomain`},
		{"path", []ingressOption{rule("hostile.example.com", exact("/a"+bad, "web", 80))},
			`spec.rules[0].http.paths[0].path "/a\xff\xfe": is not valid UTF-8 at byte 2; path left out`},
		{"regex path", []ingressOption{annotation("restysync.io/use-regex", "true"), rule("hostile.example.com", httpPath(implType, "/a"+bad+".*", backend("web", 80)))},
			`spec.rules[0].http.paths[0].path "/a\xff\xfe.*": is not valid UTF-8 at byte 2; path left out`},
		{"TLS host", []ingressOption{rule("hostile.example.com", prefix("/", "web", 80)), withTLS("good-tls", "a"+bad+".example.com")},
			`spec.tls[0].hosts[0] "a\xff\xfe.example.com": a lowercase RFC 1123 subdomain`},
		{"annotation value", []ingressOption{rule("hostile.example.com", prefix("/", "web", 80)), annotation("restysync.io/load-balance", "ewma"+bad)},
			`annotation restysync.io/load-balance "ewma\xff\xfe": is not valid UTF-8 at byte 4, which no value in nginx.conf may hold; the Ingress's paths answer 503 until it is fixed`},
		{"annotation value clipped inside a rune", []ingressOption{rule("hostile.example.com", prefix("/", "web", 80)), annotation("restysync.io/backend-protocol", strings.Repeat("é", 100))},
			`annotation restysync.io/backend-protocol "` + strings.Repeat("é", 32) + `…": is not "HTTP"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, problems := Build(hostileSnapshot([]*networkingv1.Ingress{newIngress("default", "hostile", tt.opts...)}))
			checkProblems(t, problems, "hostile", tt.want)
			for srv := range m.Servers.All() {
				if !utf8.ValidString(srv.Host) {
					t.Errorf("served host %q", srv.Host)
				}
				for _, l := range srv.Locations {
					if !utf8.ValidString(l.Path) {
						t.Errorf("served path %q", l.Path)
					}
				}
			}
			checkNeighbourUnchanged(t, m, problems)
		})
	}
}

// TestHostileIDNHosts: hosts.go checks hosts as the API server does, so a
// Unicode host is a Problem and its punycode (A-label) form is served.
// Nothing is converted: the user sees the rule left out and why.
// (Upper-case hosts are likewise a Problem, "must be lower case", not
// lower-cased: see TestBuildHosts.)
func TestHostileIDNHosts(t *testing.T) {
	tests := []struct {
		host string
		ok   bool
	}{
		{"bücher.example.com", false},
		{"xn--bcher-kva.example.com", true},
		{"日本.example.com", false},
		{"xn--wgv71a.example.com", true},
		{"*.bücher.example.com", false},
		{"*.xn--bcher-kva.example.com", true},
		{"ex\u200bample.com", false}, // zero-width space
		{"ＥＸＡＭＰＬＥ.com", false},       // full-width letters
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			m, problems := Build(hostileSnapshot([]*networkingv1.Ingress{newIngress("default", "hostile", rule(tt.host, prefix("/", "web", 80)))}))
			served := serverOf(m, tt.host).Host == tt.host
			if tt.ok {
				if !served || len(problems) != 0 {
					t.Errorf("served %t, problems %v; want served", served, problems)
				}
			} else {
				if served || m.Servers.Len() != 1 {
					t.Errorf("an IDN host was served: %s", dump(m.Servers))
				}
				checkProblems(t, problems, "hostile", fmt.Sprintf("spec.rules[0].host %q: ", tt.host), "; rule left out")
			}
			checkNeighbourUnchanged(t, m, problems)
		})
	}
}

// TestHostileNginxSyntaxInPaths: Exact and Prefix paths holding nginx
// syntax are refused (TestBuildPaths has one case per character). Regex
// paths (use-regex) are regexes, so they may hold ';', '{', '}', '$',
// quotes and '\': Build keeps them byte for byte, and render quotes them
// (the render tests, TestRandomSnapshotsNginxAccepts among them, check
// that nginx reads them back). Only control characters and white space,
// which no quoting carries, are refused there too.
func TestHostileNginxSyntaxInPaths(t *testing.T) {
	useRegex := annotation("nginx.ingress.kubernetes.io/use-regex", "true")
	accepted := []string{`/a;b`, `/a{1,2}`, `/}`, `/a$`, `/"q"`, `/'q'`, `/a\.b`, `/a\\`, `/{}`, `/a;}{return;}`}
	refused := map[string]string{
		"/a\nb":   "contains the control character U+000A at byte 2",
		"/a b":    "contains U+0020",
		"/a\tb":   "contains the control character U+0009 at byte 2",
		"/a\x00b": "contains the control character U+0000 at byte 2",
		`/a\`:     "is not a valid regular expression",
		`/a{`:     "", // RE2 reads a lone '{' as a literal
		// RE2 takes these, nginx's PCRE refuses them (pcre.go).
		`/\x{263a}`:                         `holds \x{263a}: nginx matches bytes`,
		`/[a-\x{100}]`:                      `holds \x{100}`,
		`/[\d-z]`:                           "holds a class range from a set",
		`/[[:alpha:]-z]`:                    "holds a class range from a set",
		`/[[=a=]]`:                          "holds a POSIX collating element",
		`/(?P<id>x)`:                        `holds the named group "id"`,
		`/\x{41}[\d-]`:                      "",
		`/[a-z\d][[:alpha:]-]\pL\Q[\d-z]\E`: "",
	}
	for _, path := range accepted {
		t.Run("regex "+path, func(t *testing.T) {
			ing := newIngress("default", "hostile", useRegex, rule("hostile.example.com", httpPath(implType, path, backend("web", 80))))
			m, problems := Build(hostileSnapshot([]*networkingv1.Ingress{ing}))
			want := []Location{{Path: path, PathType: PathRegex, Backend: "default/web:80", Ingress: "default/hostile",
				MatchReason: "ImplementationSpecific with use-regex on this Ingress is a regex"}}
			if got := serverOf(m, "hostile.example.com").Locations; !reflect.DeepEqual(got, want) || len(problems) != 0 {
				t.Errorf("locations %s, problems %v; want the path kept as written", dump(got), problems)
			}
			checkNeighbourUnchanged(t, m, problems)
		})
	}
	for path, reason := range refused {
		t.Run("regex "+path, func(t *testing.T) {
			ing := newIngress("default", "hostile", useRegex, rule("hostile.example.com", httpPath(implType, path, backend("web", 80))))
			m, problems := Build(hostileSnapshot([]*networkingv1.Ingress{ing}))
			if reason == "" {
				if len(problems) != 0 || len(serverOf(m, "hostile.example.com").Locations) != 1 {
					t.Errorf("problems %v; want %q served", problems, path)
				}
				return
			}
			checkProblems(t, problems, "hostile", fmt.Sprintf("spec.rules[0].http.paths[0].path %q: %s", path, reason))
			if len(serverOf(m, "hostile.example.com").Locations) != 0 {
				t.Errorf("path %q served", path)
			}
			checkNeighbourUnchanged(t, m, problems)
		})
	}
	// The same strings as Prefix paths are all refused.
	for _, path := range append(accepted, "/a\nb") {
		ing := newIngress("default", "hostile", rule("hostile.example.com", prefix(path, "web", 80)))
		m, problems := Build(hostileSnapshot([]*networkingv1.Ingress{ing}))
		if len(serverOf(m, "hostile.example.com").Locations) != 0 {
			t.Errorf("prefix path %q served", path)
		}
		checkProblems(t, problems, "hostile", fmt.Sprintf("spec.rules[0].http.paths[0].path %q: ", path), "; path left out")
	}
}
