package model

import (
	"bufio"
	"cmp"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/snippet"
)

// TestAnnotationTable checks each row: one per name, a known status, a
// family file for each key Build reads, a reason for each key ignored.
func TestAnnotationTable(t *testing.T) {
	seen := map[string]bool{}
	for _, row := range Annotations {
		if seen[row.Name] {
			t.Errorf("%s: two rows", row.Name)
		}
		seen[row.Name] = true
		if row.Doc == "" {
			t.Errorf("%s: no Doc", row.Name)
		}
		switch row.Status {
		case AnnotationSupported:
			if _, err := os.Stat(row.Family + ".go"); err != nil {
				t.Errorf("%s: family %q has no file model/%s.go", row.Name, row.Family, row.Family)
			}
		case AnnotationUnknown:
		case AnnotationRefused:
			if !isSnippet(row.Name) {
				t.Errorf("%s: refused, but not a snippet", row.Name)
			}
		case AnnotationIgnoredByIngressNginx:
			if row.Why == "" {
				t.Errorf("%s: ignored without Why", row.Name)
			}
		default:
			t.Errorf("%s: status %q", row.Name, row.Status)
		}
		if row.Status != AnnotationSupported && (row.Family != "" || row.ConfigMap != "" || row.Directive != "" || row.Ours) {
			t.Errorf("%s: not supported, but has a family, a ConfigMap key, a directive or Ours", row.Name)
		}
		// http-snippet is a ConfigMap key ingress-nginx ignores as an
		// annotation, and a snippet restysync refuses.
		got := AnnotationStatus(ingressNginxPrefix + row.Name)
		if got != row.Status && !(got == AnnotationRefused && isSnippet(row.Name)) {
			t.Errorf("AnnotationStatus(%s) = %q, the row says %q", ingressNginxPrefix+row.Name, got, row.Status)
		}
	}
}

// TestAnnotationDirectives checks the Directive column against the
// directives package snippet accepts as settings, and that each has a
// field in ProxySettings (proxy_ssl_verify sets two; applySnippetProxy
// reads it on its own).
func TestAnnotationDirectives(t *testing.T) {
	var directives []string
	for _, row := range Annotations {
		if row.Directive == "" {
			continue
		}
		directives = append(directives, row.Directive)
		if text, number := proxyField(&ProxySettings{}, row.Directive); text == nil && number == nil && row.Directive != "proxy_ssl_verify" {
			t.Errorf("%s: directive %s sets no field of ProxySettings (proxyField)", row.Name, row.Directive)
		}
	}
	slices.Sort(directives)
	want := slices.Sorted(slices.Values(snippet.SettingDirectives))
	if !slices.Equal(directives, want) {
		t.Errorf("the table's directives %v, snippet.SettingDirectives %v", directives, want)
	}
}

// TestAnnotationKeysNamedOnce checks that a key Build reads is written as
// a quoted string only in its row (model/annotationtable.go) and its
// family file (model/FAMILY.go): every other file names it by the
// constant the family file declares. Tests are not counted.
func TestAnnotationKeysNamedOnce(t *testing.T) {
	quoted := map[string][]string{} // `"name"` → files
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, row := range Annotations {
			if row.Status == AnnotationSupported && strings.Contains(string(data), `"`+row.Name+`"`) {
				quoted[row.Name] = append(quoted[row.Name], filepath.ToSlash(path))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range Annotations {
		for _, file := range quoted[row.Name] {
			if file != "../../internal/model/annotationtable.go" && file != "../../internal/model/"+row.Family+".go" {
				t.Errorf("%q is written in %s: name it by its family's constant (model/%s.go)", row.Name, file, row.Family)
			}
		}
	}
}

// readmeAnnotationName is a name in the first column of README.md's
// annotation tables ("`allowlist-`", an abbreviation, is not one).
var readmeAnnotationName = regexp.MustCompile("`([a-z0-9]+(?:-[a-z0-9]+)*)`")

// readmeAnnotations returns the annotation names of the tables of
// README.md's section "### Annotations" and its subsections: the tables
// whose header's first column is "Annotation".
func readmeAnnotations(t *testing.T) []string {
	f, err := os.Open("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names []string
	inSection, inTable := false, false
	scan := bufio.NewScanner(f)
	for scan.Scan() {
		line := scan.Text()
		switch {
		case line == "### Annotations":
			inSection = true
		case inSection && (strings.HasPrefix(line, "### ") || strings.HasPrefix(line, "## ")):
			inSection = false
		case !inSection:
		case strings.HasPrefix(line, "| Annotation |"):
			inTable = true
		case !strings.HasPrefix(line, "|"):
			inTable = false
		case inTable:
			first, _, _ := strings.Cut(strings.TrimPrefix(line, "|"), "|")
			for _, m := range readmeAnnotationName.FindAllStringSubmatch(first, -1) {
				names = append(names, m[1])
			}
		}
	}
	if err := scan.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}

// TestREADMEAnnotations checks README.md's annotation tables against the
// table: every key Build reads is documented there, and every key
// documented there is one Build reads.
func TestREADMEAnnotations(t *testing.T) {
	documented := readmeAnnotations(t)
	if len(documented) < 100 {
		t.Fatalf("found %d annotations in README.md's tables, want the section \"### Annotations\" and its tables", len(documented))
	}
	for _, name := range documented {
		if !supportedAnnotation(name) {
			t.Errorf("README.md documents annotation %s, which the table does not support", name)
		}
	}
	for _, row := range Annotations {
		if row.Status == AnnotationSupported && !slices.Contains(documented, row.Name) {
			t.Errorf("annotation %s is supported, but README.md's annotation tables do not document it", row.Name)
		}
	}
}

// TestAnnotationChecks: every supported row has its Check.
func TestAnnotationChecks(t *testing.T) {
	for _, row := range Annotations {
		if row.Status == AnnotationSupported && row.Check == nil {
			t.Errorf("%s: supported, no Check", row.Name)
		}
	}
}

// checkSamples are, per supported key, a value its Check accepts (good),
// one it refuses (bad, "" for checkBad), and the annotations the key is
// read with (with: a key read only beside another).
var checkSamples = map[string]struct {
	good, bad string
	with      map[string]string
}{
	keyUseRegex:                                {good: "true"},
	KeyLoadBalance:                             {good: "ewma"},
	"upstream-hash-by":                         {good: "$request_uri"},
	"upstream-hash-by-subset":                  {good: "true"},
	"upstream-hash-by-subset-size":             {good: "3"},
	"affinity":                                 {good: "cookie"},
	"affinity-mode":                            {good: "persistent", with: affinityCookie},
	"session-cookie-name":                      {good: "route", with: affinityCookie},
	"session-cookie-path":                      {good: "/app", with: affinityCookie},
	"session-cookie-max-age":                   {good: "3600", with: affinityCookie},
	"session-cookie-samesite":                  {good: "Lax", with: affinityCookie},
	"session-cookie-conditional-samesite-none": {good: "true", with: affinityCookie},
	"session-cookie-secure":                    {good: "true", with: affinityCookie},
	"session-cookie-change-on-failure":         {good: "true", with: affinityCookie},
	"session-cookie-domain":                    {good: "example.com", with: affinityCookie},
	"session-cookie-expires":                   {good: "3600", with: affinityCookie},
	"proxy-next-upstream-tries":                {good: "3"},
	"max-fails":                                {good: "3"},
	"fail-timeout":                             {good: "10"},
	"canary":                                   {good: "false"},
	"canary-by-header":                         {good: "X-Canary", with: canaryOn},
	"canary-by-header-value":                   {good: "yes", bad: "café", with: map[string]string{"canary": "true", "canary-by-header": "X-Canary"}},
	"canary-by-header-pattern":                 {good: "^y.*", bad: "(", with: map[string]string{"canary": "true", "canary-by-header": "X-Canary"}},
	"canary-by-cookie":                         {good: "canary", with: canaryOn},
	"canary-weight":                            {good: "10", with: canaryOn},
	"canary-weight-total":                      {good: "100", with: canaryOn},
	"affinity-canary-behavior":                 {good: "legacy", with: canaryOn},
	"ssl-redirect":                             {good: "false"},
	"force-ssl-redirect":                       {good: "true"},
	keyBackendProtocol:                         {good: "HTTPS"},
	keyRewriteTarget:                           {good: "/new"},
	"app-root":                                 {good: "/app"},
	"permanent-redirect":                       {good: "https://example.com/"},
	"permanent-redirect-code":                  {good: "308"},
	"temporal-redirect":                        {good: "https://example.com/"},
	KeyProxyBodySize:                           {good: "8m"},
	KeyProxyConnectTimeout:                     {good: "10"},
	KeyProxySendTimeout:                        {good: "10"},
	KeyProxyReadTimeout:                        {good: "10"},
	KeyProxyBuffering:                          {good: "on"},
	"proxy-request-buffering":                  {good: "off"},
	KeyProxyBufferSize:                         {good: "8k"},
	"proxy-next-upstream":                      {good: "error timeout http_502"},
	"proxy-next-upstream-timeout":              {good: "5"},
	"proxy-http-version":                       {good: "1.0"},
	keyUpstreamVhost:                           {good: "internal.example.com"},
	keyXForwardedPrefix:                        {good: "/app"},
	"server-alias":                             {good: "alias.example.com"},
	KeyEnableAccessLog:                         {good: "false"},
	"temporal-redirect-code":                   {good: "307"},
	"preserve-trailing-slash":                  {good: "true"},
	"from-to-www-redirect":                     {good: "true"},
	KeyClientBodyBufferSize:                    {good: "16k"},
	KeyProxyBuffersNumber:                      {good: "8"},
	KeyProxyBusyBuffersSize:                    {good: "8k"},
	KeyProxyMaxTempFileSize:                    {good: "1024m"},
	KeyProxyCookieDomain:                       {good: "localhost example.org"},
	KeyProxyCookiePath:                         {good: "/one/ /"},
	KeyProxyRedirectFrom:                       {good: "http://internal/", with: map[string]string{KeyProxyRedirectTo: "https://example.com/"}},
	KeyProxyRedirectTo:                         {good: "https://example.com/", with: map[string]string{KeyProxyRedirectFrom: "http://internal/"}},
	KeyLimitRate:                               {good: "1024"},
	KeyLimitRateAfter:                          {good: "1024"},
	"satisfy":                                  {good: "any"},
	KeyServiceUpstream:                         {good: "false"},
	keyCustomHeaders:                           {good: "headers"},
	"fastcgi-index":                            {good: "index.php", with: fcgi},
	"fastcgi-params-configmap":                 {good: "params", with: fcgi},
	"mirror-target":                            {good: "http://web.default.svc/mirror"},
	"mirror-host":                              {good: "mirror.example.com", with: mirrorOn},
	"mirror-request-body":                      {good: "off", with: mirrorOn},
	"allowlist-source-range":                   {good: "10.0.0.0/8"},
	KeyWhitelistSourceRange:                    {good: "10.0.0.0/8"},
	"denylist-source-range":                    {good: "10.0.0.0/8"},
	"enable-cors":                              {good: "true"},
	"cors-allow-origin":                        {good: "https://example.com", with: corsOn},
	"cors-allow-methods":                       {good: "GET, PUT", with: corsOn},
	"cors-allow-headers":                       {good: "X-Custom", with: corsOn},
	"cors-expose-headers":                      {good: "X-Custom", with: corsOn},
	"cors-allow-credentials":                   {good: "false", with: corsOn},
	"cors-max-age":                             {good: "600", with: corsOn},
	"auth-type":                                {good: "basic", with: map[string]string{"auth-secret": "users"}},
	"auth-secret":                              {good: "users", with: map[string]string{"auth-type": "basic"}},
	"auth-secret-type":                         {good: "auth-file", with: basicAuth},
	"auth-realm":                               {good: "Staff only", bad: `"off"`, with: basicAuth},
	"limit-rps":                                {good: "10"},
	"limit-rpm":                                {good: "600"},
	"limit-connections":                        {good: "10"},
	"limit-burst-multiplier":                   {good: "3", with: map[string]string{"limit-rps": "10"}},
	"limit-whitelist":                          {good: "10.0.0.0/8", with: map[string]string{"limit-rps": "10"}},
	KeyCustomHTTPErrors:                        {good: "404,503", with: map[string]string{"default-backend": "web"}},
	"default-backend":                          {good: "web"},
	"auth-url":                                 {good: "http://web.default.svc/auth"},
	"auth-method":                              {good: "GET", with: authOn},
	"auth-signin":                              {good: "https://example.com/signin", with: authOn},
	"auth-signin-redirect-param":               {good: "back", with: authOn},
	keyAuthResponseHeaders:                     {good: "X-User", with: authOn},
	"auth-request-redirect":                    {good: "/done", with: authOn},
	"auth-cache-key":                           {good: "$remote_user", with: authOn},
	"auth-cache-duration":                      {good: "200 5m", with: map[string]string{"auth-url": "http://web.default.svc/auth", "auth-cache-key": "$remote_user"}},
	"auth-always-set-cookie":                   {good: "true", with: authOn},
	keyAuthProxySetHeaders:                     {good: "headers", with: authOn},
	"enable-global-auth":                       {good: "false"},
	"proxy-ssl-secret":                         {good: "default/ca"},
	keyProxySSLVerify:                          {good: "on"},
	"proxy-ssl-verify-depth":                   {good: "2"},
	"proxy-ssl-name":                           {good: "backend.example.com"},
	"proxy-ssl-server-name":                    {good: "on"},
	"proxy-ssl-protocols":                      {good: "TLSv1.2 TLSv1.3"},
	"proxy-ssl-ciphers":                        {good: "HIGH:!aNULL"},
	keyAuthTLSSecret:                           {good: "default/ca"},
	"auth-tls-verify-client":                   {good: "optional", with: clientTLS},
	"auth-tls-verify-depth":                    {good: "2", with: clientTLS},
	"auth-tls-error-page":                      {good: "https://example.com/error", with: clientTLS},
	"auth-tls-pass-certificate-to-upstream":    {good: "true", with: clientTLS},
	"auth-tls-match-cn":                        {good: "CN=client", with: clientTLS},
	"ssl-passthrough":                          {good: "false"},
	KeyEnableModSecurity:                       {good: "false"},
	"enable-owasp-core-rules":                  {good: "false"},
	"modsecurity-transaction-id":               {good: "$request_id", with: map[string]string{KeyEnableModSecurity: "true"}},
	configurationSnippetKey:                    {good: `add_header X-A "a";`, bad: "no_such_directive on;"},
	ServerSnippetKey:                           {good: `add_header X-A "a";`, bad: "no_such_directive on;"},
	authSnippetKey:                             {good: "auth_request_set $user $upstream_http_x_user;", bad: "no_such_directive on;", with: authOn},
}

// The companions of checkSamples.
var (
	affinityCookie = map[string]string{"affinity": "cookie"}
	canaryOn       = map[string]string{"canary": "true"}
	fcgi           = map[string]string{keyBackendProtocol: "FCGI"}
	mirrorOn       = map[string]string{"mirror-target": "http://web.default.svc/mirror"}
	corsOn         = map[string]string{"enable-cors": "true"}
	basicAuth      = map[string]string{"auth-type": "basic", "auth-secret": "users"}
	authOn         = map[string]string{"auth-url": "http://web.default.svc/auth"}
	clientTLS      = map[string]string{keyAuthTLSSecret: "default/ca"}
)

// checkBad is the value most Checks refuse.
const checkBad = "not a value!"

// checkNeedsObjects are the keys whose good value names an object Build
// must find (a Secret, a Service, a ConfigMap, a target the agent may
// send to): Build on the good value alone reports the missing object, so
// only the refused value is tried.
var checkNeedsObjects = map[string]string{
	keyCustomHeaders:           "names a ConfigMap",
	"fastcgi-params-configmap": "names a ConfigMap",
	keyAuthProxySetHeaders:     "names a ConfigMap",
	"proxy-ssl-secret":         "names a Secret with a CA",
	keyAuthTLSSecret:           "names a Secret with a CA",
}

// A supported key's Check is what Build judges the value by: a value the
// Check refuses is a Problem naming the key, a value it accepts is none.
func TestAnnotationCheckMatchesBuild(t *testing.T) {
	for _, name := range supportedAnnotations() {
		row := annotationRows[name]
		sample := checkSamples[name]
		bad := cmp.Or(sample.bad, checkBad)
		t.Run(name, func(t *testing.T) {
			if reason := row.Check(bad); reason == "" {
				t.Fatalf("Check accepts the bad value %q", bad)
			}
			if reason := row.Check(sample.good); reason != "" && sample.good != "" {
				t.Fatalf("Check refuses the good value %q: %s", sample.good, reason)
			}
			full := annotationPrefixes[1] + name
			if !problemNames(buildWith(name, bad, sample.with), full) {
				t.Errorf("Build on %q reports no Problem naming %s", bad, full)
			}
			if why, ok := checkNeedsObjects[name]; ok {
				t.Logf("good value not built: %s", why)
				return
			}
			if sample.good == "" {
				t.Fatal("no good value")
			}
			if problems := buildWith(name, sample.good, sample.with); problemNames(problems, full) {
				t.Errorf("Build on the good value %q: %v", sample.good, problems)
			}
		})
	}
}

// buildWith builds an Ingress carrying key=value and with.
func buildWith(key, value string, with map[string]string) []Problem {
	opts := []ingressOption{annotation(annotationPrefixes[1]+key, value), rule("checked.example.com", prefix("/", "web", 80))}
	for k, v := range with {
		opts = append(opts, annotation(annotationPrefixes[1]+k, v))
	}
	s := snapshotOf(newIngress("default", "checked", opts...))
	s.Secrets = ListOf(authSecret("users", map[string]string{"auth": "alice:{PLAIN}secret\n"}))
	_, problems := Build(s)
	return problems
}

// problemNames reports whether a Problem names the annotation key.
func problemNames(problems []Problem, key string) bool {
	return slices.ContainsFunc(problems, func(p Problem) bool {
		return strings.Contains(p.Reason, key+" ") || strings.Contains(p.Reason, key+":") || strings.Contains(p.Reason, key+",")
	})
}
