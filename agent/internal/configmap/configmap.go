// Package configmap is part of the model (build) stage of the pipeline
// (source → model → render → plan → apply): it reads the agent's ConfigMap
// (--configmap) into the global settings of nginx.conf and the default
// balancing algorithm, with ingress-nginx's key names.
//
// Apply is pure: a map of strings in, typed settings and Problems out. The
// flags give the defaults and a key present in the ConfigMap overrides
// them; take the key out and the flag's value is back. A bad value is a
// Problem naming the ConfigMap and the key, and leaves that setting at its
// default: every other key still applies. Unknown keys are Problems too.
// http-snippet, server-snippet and location-snippet are read as typed
// directives against an allowlist, as snippet annotations are
// (snippets.go); the other snippet keys are refused.
package configmap

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/restysync/restysync/agent/internal/chars"
	"github.com/restysync/restysync/agent/internal/ciphers"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
)

// Status of a key, as restysync check reports it: the annotations'
// statuses (model.AnnotationStatus).
const (
	StatusSupported = model.AnnotationSupported
	StatusInvalid   = model.AnnotationInvalid // supported, but its value is not
	StatusRefused   = model.AnnotationRefused
	// StatusUnknown is an ingress-nginx key restysync does not support
	// yet (notSupportedYet); StatusTypo a key within two edits of a
	// known one; StatusIgnoredByIngressNginx any other key, which
	// ingress-nginx does not read either.
	StatusUnknown               = model.AnnotationUnknown
	StatusTypo                  = model.AnnotationTypo
	StatusIgnoredByIngressNginx = model.AnnotationIgnoredByIngressNginx
)

// Key is one key of the ConfigMap and what restysync did with it.
type Key struct {
	Key    string `json:"key"`
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	// Suggestion is, for StatusTypo, the key meant.
	Suggestion string `json:"suggestion,omitempty"`
}

// Result is what Apply read from a ConfigMap.
type Result struct {
	// Render is the base settings with the ConfigMap's keys applied;
	// Render.HTTP is never nil.
	Render render.Settings
	// LoadBalance is the algorithm of backends whose Ingress names none
	// (key load-balance): "" for round robin, or model.AlgorithmEWMA.
	LoadBalance string
	// ServiceUpstream is the default of the service-upstream annotation
	// (key service-upstream; model.Snapshot's).
	ServiceUpstream bool
	// GlobalAuth and GlobalAuthDenied are model.Snapshot's, from the
	// global-auth-* keys (GlobalAuthKeys).
	GlobalAuth       model.ExternalAuth
	GlobalAuthDenied string
	// SnippetAnnotationsOff and GlobalSnippets are model.Snapshot's, from
	// allow-snippet-annotations and the http-, server- and
	// location-snippet keys (snippets.go).
	SnippetAnnotationsOff bool
	GlobalSnippets        model.GlobalSnippets
	// Keys are the ConfigMap's keys, sorted.
	Keys []Key
	// Problems name the ConfigMap and a key each, sorted by key.
	Problems []model.Problem
}

// keyFunc applies value to a; it returns "" or why the value is refused
// (the setting then keeps its default).
type keyFunc func(a *applier, value string) string

// keys are the supported keys. They are applied in this order, so that a
// key that reads another (use-forwarded-headers reads proxy-real-ip-cidr)
// comes after it.
var keys = []struct {
	name  string
	apply keyFunc
}{
	{"worker-processes", func(a *applier, v string) string {
		if v == "auto" {
			a.s.WorkerProcesses = v
			return ""
		}
		n, reason := integer(v, 1, 1024)
		if reason != "" {
			return `is not "auto" or an integer from 1 to 1024`
		}
		a.s.WorkerProcesses = strconv.Itoa(n)
		return ""
	}},
	{"max-worker-connections", intKey(func(a *applier) *int { return &a.h.MaxWorkerConnections }, render.MinWorkerConnections, render.MaxWorkerConnections)},
	{"keep-alive", intKey(func(a *applier) *int { return &a.h.KeepAlive }, 0, render.MaxKeepAlive)},
	{"keep-alive-requests", intKey(func(a *applier) *int { return &a.h.KeepAliveRequests }, 1, render.MaxKeepAliveRequests)},
	{"upstream-keepalive-connections", intKey(func(a *applier) *int { return &a.h.UpstreamKeepaliveConnections }, 0, render.MaxUpstreamKeepalive)},
	{"upstream-keepalive-timeout", intKey(func(a *applier) *int { return &a.h.UpstreamKeepaliveTimeout }, 1, render.MaxKeepAlive)},
	{model.KeyProxyBodySize, func(a *applier, v string) string {
		if !render.BodySize.MatchString(v) {
			return "is not a size: up to 9 digits and an optional k, m or g (0: no limit)"
		}
		a.h.ClientMaxBodySize = v
		return ""
	}},
	{"max-proxy-body-size", limitSizeKey(func(a *applier) *int64 { return &a.s.Limits.MaxProxyBodySize })},
	{"max-client-body-buffer-size", limitSizeKey(func(a *applier) *int64 { return &a.s.Limits.MaxClientBodyBufferSize })},
	{"max-regex-paths-per-host", func(a *applier, v string) string {
		n, reason := integer(v, 0, 100000)
		if reason != "" {
			return "is not an integer from 0 (no maximum) to 100000"
		}
		a.s.Limits.MaxRegexPathsPerHost = n
		return ""
	}},
	{model.KeyProxyConnectTimeout, intKey(func(a *applier) *int { return &a.h.ProxyConnectTimeout }, 1, render.MaxConnectTimeout)},
	{model.KeyProxyReadTimeout, intKey(func(a *applier) *int { return &a.h.ProxyReadTimeout }, 1, render.MaxProxyTimeout)},
	{model.KeyProxySendTimeout, intKey(func(a *applier) *int { return &a.h.ProxySendTimeout }, 1, render.MaxProxyTimeout)},
	{"proxy-real-ip-cidr", func(a *applier, v string) string {
		var proxies []netip.Prefix
		for _, part := range strings.Split(v, ",") {
			p, ok := prefix(strings.TrimSpace(part))
			if !ok {
				return "is not a comma-separated list of CIDRs (10.0.0.0/8, fd00::/8) or IP addresses"
			}
			proxies = append(proxies, p)
		}
		a.realIPCIDR = proxies
		return ""
	}},
	{"use-forwarded-headers", func(a *applier, v string) string {
		on, reason := boolean(v)
		if reason != "" {
			return reason
		}
		switch {
		case !on:
			a.s.TrustedProxies = nil
		case a.realIPCIDR != nil:
			a.s.TrustedProxies = a.realIPCIDR
		case len(a.s.TrustedProxies) == 0:
			// ingress-nginx's proxy-real-ip-cidr default: everyone.
			a.s.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}
		}
		return ""
	}},
	{"forwarded-for-header", func(a *applier, v string) string {
		if !render.HeaderName.MatchString(v) {
			return "is not a header name (letters, digits and '-', at most 64)"
		}
		a.h.ForwardedForHeader = v
		return ""
	}},
	{"compute-full-forwarded-for", boolKey(func(a *applier) *bool { return &a.h.ComputeFullForwardedFor })},
	{model.KeyEnableAccessLog, func(a *applier, v string) string {
		on, reason := boolean(v)
		if reason == "" {
			a.enableAccessLog = &on
		}
		return reason
	}},
	{"disable-access-log", func(a *applier, v string) string {
		off, reason := boolean(v)
		if reason != "" {
			return reason
		}
		if a.enableAccessLog != nil && *a.enableAccessLog == off {
			return fmt.Sprintf("contradicts enable-access-log %t; enable-access-log is used", *a.enableAccessLog)
		}
		a.h.AccessLog = !off
		return ""
	}},
	{"access-log-path", func(a *applier, v string) string {
		if v != "/dev/stdout" && v != "/dev/stderr" && !render.AccessLogFile.MatchString(v) {
			return `is not "/dev/stdout", "/dev/stderr" or a file under logs/ in the shared dir ("logs/access.log")`
		}
		a.h.AccessLogPath = v
		return ""
	}},
	{"error-log-level", func(a *applier, v string) string {
		if !slices.Contains(render.ErrorLogLevels, v) {
			return "is not one of " + strings.Join(render.ErrorLogLevels, ", ")
		}
		a.h.ErrorLogLevel = v
		return ""
	}},
	{"log-format-upstream", func(a *applier, v string) string {
		format := logFormatAliases.Replace(v)
		if err := render.CheckLogFormat(format); err != nil {
			return err.Error()
		}
		a.h.LogFormat = format
		return ""
	}},
	{"log-format-escape-json", func(a *applier, v string) string {
		on, reason := boolean(v)
		if reason == "" && on {
			a.h.LogEscape = "json"
		}
		return reason
	}},
	{"log-format-escape-none", func(a *applier, v string) string {
		// escape-json wins when both are on, as in ingress-nginx.
		on, reason := boolean(v)
		if reason == "" && on && a.h.LogEscape != "json" {
			a.h.LogEscape = "none"
		}
		return reason
	}},
	{"skip-access-log-urls", func(a *applier, v string) string {
		var urls []string
		for _, u := range strings.Split(v, ",") {
			if u = strings.TrimSpace(u); u == "" {
				continue
			}
			if !render.SkipLogURL.MatchString(u) {
				return fmt.Sprintf("names %q, but want request URIs starting with \"/\" of URI characters (no '$', quote, space or backslash), comma-separated", u)
			}
			urls = append(urls, u)
		}
		if len(urls) > render.MaxSkipLogURLs {
			return fmt.Sprintf("names %d URIs, more than %d", len(urls), render.MaxSkipLogURLs)
		}
		a.h.SkipAccessLogURLs = urls
		return ""
	}},
	{"ssl-protocols", func(a *applier, v string) string {
		var protocols []string
		for _, p := range strings.Fields(v) {
			if !slices.Contains(render.SSLProtocolNames, p) {
				return fmt.Sprintf("names %q, but want protocols among %s, separated by spaces", p, strings.Join(render.SSLProtocolNames, " "))
			}
			if !slices.Contains(protocols, p) {
				protocols = append(protocols, p)
			}
		}
		if len(protocols) == 0 {
			return "names no protocol"
		}
		slices.SortFunc(protocols, func(x, y string) int {
			return slices.Index(render.SSLProtocolNames, x) - slices.Index(render.SSLProtocolNames, y)
		})
		a.h.SSLProtocols = protocols
		return ""
	}},
	{"ssl-ciphers", func(a *applier, v string) string {
		if err := ciphers.Check(v); err != nil {
			return "is not an OpenSSL cipher list nginx takes: " + err.Error()
		}
		a.h.SSLCiphers = v
		return ""
	}},
	{"hsts", boolKey(func(a *applier) *bool { return &a.s.HSTS })},
	{"hsts-max-age", intKey(func(a *applier) *int { return &a.s.HSTSMaxAge }, 0, maxHSTSMaxAge)},
	{"hsts-include-subdomains", boolKey(func(a *applier) *bool { return &a.s.HSTSIncludeSubdomains })},
	{"hsts-preload", boolKey(func(a *applier) *bool { return &a.s.HSTSPreload })},
	{model.KeyProxyBuffering, func(a *applier, v string) string {
		switch v {
		case "on", "off":
			a.h.ProxyBuffering = v == "on"
			return ""
		}
		return `is not "on" or "off"`
	}},
	{"use-gzip", boolKey(func(a *applier) *bool { return &a.h.Gzip })},
	{"gzip-level", intKey(func(a *applier) *int { return &a.h.GzipLevel }, 1, 9)},
	{"gzip-min-length", intKey(func(a *applier) *int { return &a.h.GzipMinLength }, 0, render.MaxGzipMinLength)},
	{"gzip-types", func(a *applier, v string) string {
		var types []string
		for _, t := range strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ',' || r == '\t' }) {
			t = strings.ToLower(t)
			if t != "*" && !render.MIMEType.MatchString(t) {
				return fmt.Sprintf("names %q, which is not a MIME type (type/subtype) or *", t)
			}
			// nginx always compresses text/html, and warns when it is listed.
			if t != "text/html" && !slices.Contains(types, t) {
				types = append(types, t)
			}
		}
		if len(types) > render.MaxGzipTypes {
			return fmt.Sprintf("names %d types, more than %d", len(types), render.MaxGzipTypes)
		}
		a.h.GzipTypes = types
		return ""
	}},
	{"server-tokens", boolKey(func(a *applier) *bool { return &a.h.ServerTokens })},
	{model.KeyCustomHTTPErrors, func(a *applier, v string) string {
		var codes []int
		for _, part := range strings.Split(v, ",") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			n, err := strconv.Atoi(part)
			if err != nil || !model.ErrorPageCode(n) || strconv.Itoa(n) != part {
				return fmt.Sprintf("names %q, but want status codes from 300 to 599 that nginx's error_page takes (not 499), separated by commas", part)
			}
			if !slices.Contains(codes, n) {
				codes = append(codes, n)
			}
		}
		slices.Sort(codes)
		a.h.CustomHTTPErrors = codes
		return ""
	}},
	{model.KeyServiceUpstream, func(a *applier, v string) (reason string) {
		a.serviceUpstream, reason = boolean(v)
		return reason
	}},
	{model.KeyLoadBalance, func(a *applier, v string) string {
		switch v {
		case model.AlgorithmRoundRobin:
			a.loadBalance = ""
		case model.AlgorithmEWMA:
			a.loadBalance = model.AlgorithmEWMA
		default:
			return `is not "round_robin" or "ewma"`
		}
		return ""
	}},
	// ModSecurity for every Ingress that does not turn it off; the model
	// applies them (model.ModSecurityGlobal).
	{model.KeyEnableModSecurity, boolKey(func(a *applier) *bool { return &a.s.ModSecurity.Enable })},
	{"enable-owasp-modsecurity-crs", boolKey(func(a *applier) *bool { return &a.s.ModSecurity.EnableCoreRules })},
	// The keys of the proxy annotations of the same names (proxykeys.go).
	{model.KeyProxyBufferSize, sizeKey(func(h *render.HTTP) *string { return &h.ProxyBufferSize }, false)},
	{model.KeyProxyBuffersNumber, buffersNumberKey},
	{model.KeyProxyBusyBuffersSize, sizeKey(func(h *render.HTTP) *string { return &h.ProxyBusyBuffersSize }, false)},
	{model.KeyProxyMaxTempFileSize, sizeKey(func(h *render.HTTP) *string { return &h.ProxyMaxTempFileSize }, true)},
	{model.KeyClientBodyBufferSize, sizeKey(func(h *render.HTTP) *string { return &h.ClientBodyBufferSize }, false)},
	{model.KeyProxyCookieDomain, cookieKey(func(h *render.HTTP) *string { return &h.ProxyCookieDomain }, false)},
	{model.KeyProxyCookiePath, cookieKey(func(h *render.HTTP) *string { return &h.ProxyCookiePath }, true)},
	{model.KeyProxyRedirectFrom, redirectKey(true)},
	{model.KeyProxyRedirectTo, redirectKey(false)},
	{model.KeyLimitRate, rateKey(func(h *render.HTTP) *string { return &h.LimitRate })},
	{model.KeyLimitRateAfter, rateKey(func(h *render.HTTP) *string { return &h.LimitRateAfter })},
}

// limitSizeKey reads a platform maximum of a size (model.Limits) into
// the field field returns: an nginx size, 0 for no maximum.
func limitSizeKey(field func(a *applier) *int64) keyFunc {
	return func(a *applier, v string) string {
		n, ok := model.SizeBytes(v)
		if !ok || !render.BodySize.MatchString(v) {
			return "is not a size: up to 9 digits and an optional k, m or g (0: no maximum)"
		}
		*field(a) = n
		return ""
	}
}

// refusedKeys are ingress-nginx keys that would let the ConfigMap write
// nginx.conf itself.
var refusedKeys = map[string]bool{
	"main-snippet": true, "stream-snippet": true, "modsecurity-snippet": true, "global-auth-snippet": true,
}

// refusedReasons say why some refused keys are, where the snippets'
// reason does not fit.
var refusedReasons = map[string]string{
	"modsecurity-snippet": "ModSecurity rules are refused: restysync cannot check what a rule does (SecRuleEngine Off " +
		"turns the WAF off, @pmFromFile and @inspectFile read and run files); enable-modsecurity and " +
		"enable-owasp-modsecurity-crs load the recommended rules and the OWASP Core Rule Set, and the agent's " +
		"--modsecurity-rule-engine On blocks what they detect; it is ignored",
}

// logFormatAliases turn ingress-nginx's own log variables into restysync's,
// so that ingress-nginx's formats work as written. restysync has no
// alternative (canary) upstream of its own: that one logs as "-".
var logFormatAliases = strings.NewReplacer(
	"$proxy_alternative_upstream_name", "-",
	"${proxy_alternative_upstream_name}", "-",
	"$proxy_upstream_name", "$restysync_backend",
	"${proxy_upstream_name}", "${restysync_backend}",
	"$req_id", "$restysync_request_id",
	"${req_id}", "${restysync_request_id}",
)

// maxHSTSMaxAge bounds hsts-max-age: ten years, as --hsts-max-age.
const maxHSTSMaxAge = 10 * 365 * 24 * 3600

// applier holds the settings while the keys are applied.
type applier struct {
	s               render.Settings
	h               *render.HTTP
	loadBalance     string
	serviceUpstream bool
	realIPCIDR      []netip.Prefix
	enableAccessLog *bool
}

// GlobalAuthKeys are the keys of the external auth of every Ingress
// (model.GlobalAuth reads them together: each means something only with
// global-auth-url): the ConfigMap twins of the extauth annotations, from
// model.Annotations.
var GlobalAuthKeys = model.AnnotationConfigMapKeys("extauth")

// SupportedKeys returns the keys Apply reads, in the order it applies them.
func SupportedKeys() []string {
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.name
	}
	return names
}

// Apply applies the ConfigMap namespace/name, holding data, to base (the
// settings from the flags). base is not changed; its HTTP, when nil, is
// render.DefaultHTTP(). A nil data (no ConfigMap) gives base with HTTP
// set and no Problems.
func Apply(base render.Settings, namespace, name string, data map[string]string) Result {
	h := render.DefaultHTTP()
	if base.HTTP != nil {
		h = *base.HTTP
		h.SSLProtocols = slices.Clone(h.SSLProtocols)
		h.GzipTypes = slices.Clone(h.GzipTypes)
		h.CustomHTTPErrors = slices.Clone(h.CustomHTTPErrors)
	}
	a := &applier{s: base, h: &h}
	a.s.TrustedProxies = slices.Clone(base.TrustedProxies)
	if a.s.WorkerProcesses == "" {
		a.s.WorkerProcesses = "auto"
	}

	status := make(map[string]Key, len(data))
	var problems []model.Problem
	problem := func(key, reason string) {
		problems = append(problems, model.Problem{Kind: "ConfigMap", Namespace: namespace, Name: name,
			Reason: "key " + key + ": " + reason})
	}
	// A value with a character no value may hold (package chars) is
	// invalid whatever its key; the global-auth-* keys fail closed in
	// model.GlobalAuth instead.
	data = maps.Clone(data)
	for _, key := range slices.Sorted(maps.Keys(data)) {
		if err := chars.CheckText(data[key]); err != nil && !strings.HasPrefix(key, "global-auth-") {
			reason := fmt.Sprintf("%q %v, which no value in nginx.conf may hold; the default is kept", clip(data[key]), err)
			status[key] = Key{Key: key, Status: StatusInvalid, Reason: reason}
			problem(key, reason)
			delete(data, key)
		}
	}
	for _, k := range keys {
		value, ok := data[k.name]
		if !ok {
			continue
		}
		reason := k.apply(a, strings.TrimSpace(value))
		if reason == "" {
			status[k.name] = Key{Key: k.name, Status: StatusSupported}
			continue
		}
		if !strings.HasSuffix(reason, " is used") {
			reason += "; the default is kept"
		}
		reason = fmt.Sprintf("%q %s", clip(value), reason)
		status[k.name] = Key{Key: k.name, Status: StatusInvalid, Reason: reason}
		problem(k.name, reason)
	}
	checkProxyKeys(a.h, data, status, problem)
	snippetsOff, globalSnippets := applySnippetKeys(a, data, status, problem)
	globalAuth, denied, invalidAuth := model.GlobalAuth(data)
	for _, key := range GlobalAuthKeys {
		if _, ok := data[key]; !ok {
			continue
		}
		if reason, bad := invalidAuth[key]; bad {
			status[key] = Key{Key: key, Status: StatusInvalid, Reason: reason}
			problem(key, reason)
		} else {
			status[key] = Key{Key: key, Status: StatusSupported}
		}
	}
	if a.enableAccessLog != nil && status["disable-access-log"].Status != StatusSupported {
		a.h.AccessLog = *a.enableAccessLog
	}
	for _, key := range slices.Sorted(maps.Keys(data)) {
		if _, known := status[key]; known {
			continue
		}
		k := unreadKey(key)
		if refusedKeys[key] {
			k = Key{Key: key, Status: StatusRefused, Reason: "snippets are refused: they would let the ConfigMap write any nginx directive; it is ignored"}
			if why, ok := refusedReasons[key]; ok {
				k.Reason = why
			}
		}
		status[key] = k
		problem(key, k.Reason)
	}

	res := Result{Render: a.s, LoadBalance: a.loadBalance, ServiceUpstream: a.serviceUpstream, GlobalAuth: globalAuth, GlobalAuthDenied: denied,
		SnippetAnnotationsOff: snippetsOff, GlobalSnippets: globalSnippets, Keys: make([]Key, 0, len(status))}
	res.Render.HTTP = a.h
	for _, key := range slices.Sorted(maps.Keys(status)) {
		res.Keys = append(res.Keys, status[key])
	}
	slices.SortFunc(problems, func(x, y model.Problem) int { return strings.Compare(x.Reason, y.Reason) })
	res.Problems = problems
	return res
}

// NotFound is the Problem of a ConfigMap --configmap names that does not
// exist: the flags' settings apply.
func NotFound(namespace, name string) model.Problem {
	return model.Problem{Kind: "ConfigMap", Namespace: namespace, Name: name,
		Reason: "not found; the defaults and flags apply until it exists"}
}

func intKey(field func(*applier) *int, lo, hi int) keyFunc {
	return func(a *applier, v string) string {
		n, reason := integer(v, lo, hi)
		if reason == "" {
			*field(a) = n
		}
		return reason
	}
}

func boolKey(field func(*applier) *bool) keyFunc {
	return func(a *applier, v string) string {
		b, reason := boolean(v)
		if reason == "" {
			*field(a) = b
		}
		return reason
	}
}

// integer reads a decimal integer in [lo, hi], written plainly.
func integer(v string, lo, hi int) (int, string) {
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi || strconv.Itoa(n) != v {
		return 0, fmt.Sprintf("is not an integer from %d to %d", lo, hi)
	}
	return n, ""
}

// boolean reads "true" or "false" (and strconv.ParseBool's other
// spellings, as ingress-nginx does).
func boolean(v string) (bool, string) {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, `is not "true" or "false"`
	}
	return b, ""
}

// prefix reads a CIDR or one IP address, without zone.
func prefix(v string) (netip.Prefix, bool) {
	if strings.Contains(v, "/") {
		p, err := netip.ParsePrefix(v)
		return p.Masked(), err == nil && p.Addr().Zone() == ""
	}
	addr, err := netip.ParseAddr(v)
	if err != nil || addr.Zone() != "" {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(addr, addr.BitLen()), true
}

// clip shortens a value quoted in a Problem.
func clip(v string) string {
	const max = 128
	if len(v) > max {
		return v[:max] + "…"
	}
	return v
}
