package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

	"github.com/restysync/restysync/agent/internal/apply"
	"github.com/restysync/restysync/agent/internal/luaapi"
	"github.com/restysync/restysync/agent/internal/metrics"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
	"github.com/restysync/restysync/agent/internal/source"
	"github.com/restysync/restysync/agent/internal/source/file"
	"github.com/restysync/restysync/agent/internal/source/fqdn"
	"github.com/restysync/restysync/agent/internal/syncer"
	"github.com/restysync/restysync/lua"
)

// env returns the environment variables of a flag: RESTYSYNC_name, then
// the plain names given (such as POD_NAMESPACE from the downward API).
func env(name string, plain ...string) []string {
	return append([]string{"RESTYSYNC_" + name}, plain...)
}

func runFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "source", Value: "kube", EnvVars: env("SOURCE"),
			Usage: "where objects come from: `kube` (the cluster) or file:DIR (a folder of manifests)"},
		&cli.StringFlag{Name: "shared-dir", Value: "/var/run/restysync", EnvVars: env("SHARED_DIR"),
			Usage: "folder shared with nginx (nginx -p DIR): nginx.conf, Lua modules, pid file, config socket"},
		&cli.IntFlag{Name: "http-port", Value: 80, EnvVars: env("HTTP_PORT"), Usage: "port nginx serves HTTP on"},
		&cli.IntFlag{Name: "https-port", Value: 443, EnvVars: env("HTTPS_PORT"), Usage: "port nginx serves HTTPS on"},
		&cli.IntFlag{Name: "status-port", EnvVars: env("STATUS_PORT"),
			Usage: "port of nginx's status server, whose GET /healthz answers 200 while nginx serves (the nginx container's probes); 0: none"},
		&cli.StringFlag{Name: "listen-address", Value: "", EnvVars: env("LISTEN_ADDRESS"),
			Usage: "address nginx binds its ports to (HTTP, HTTPS, status, TCP/UDP services); empty for all"},
		&cli.StringSliceFlag{Name: "load-module", EnvVars: env("LOAD_MODULE"),
			Usage: "nginx module `PATH` to emit as a load_module line (repeatable). Debian's nginx: /usr/share/nginx/modules/ndk_http_module.so and ngx_http_lua_module.so, and for their features ngx_stream_module.so, ngx_http_headers_more_filter_module.so, ngx_http_modsecurity_module.so; OpenResty has Lua, stream and headers-more built in: no --load-module (once nginx answers, a load_module of a module it has built in is left out)"},
		&cli.StringFlag{Name: "worker-processes", Value: "auto", EnvVars: env("WORKER_PROCESSES"),
			Usage: "nginx worker_processes: auto or a number"},
		&cli.IntFlag{Name: "lua-dict-mb", Value: render.DefaultLuaDictMB, EnvVars: env("LUA_DICT_MB"),
			Usage: "size in MB of Lua's shared dict, which holds every backend, route and certificate: 64 holds 50,000 plain Ingresses, about 43,000 certificates alone; nginx keeps the dict over a reload only at the same size: a new size empties it at the next reload, which the agent meets as an nginx cold start"},
		&cli.StringFlag{Name: "ingress-class", Value: "restysync", EnvVars: env("INGRESS_CLASS"),
			Usage: "IngressClass name to serve"},
		&cli.StringFlag{Name: "default-ssl-certificate", EnvVars: env("DEFAULT_SSL_CERTIFICATE"),
			Usage: "TLS Secret `NAMESPACE/NAME` served to clients without SNI and for names no Ingress's certificate covers (default: a self-signed one)"},
		&cli.BoolFlag{Name: "watch-ingress-without-class", EnvVars: env("WATCH_INGRESS_WITHOUT_CLASS"),
			Usage: "also serve Ingresses that name no class"},
		&cli.StringFlag{Name: "gateway-controller-name", Value: model.GatewayControllerName, EnvVars: env("GATEWAY_CONTROLLER_NAME"),
			Usage: "serve the Gateways of the GatewayClasses whose spec.controllerName is this (a domain-prefixed path)"},
		&cli.StringSliceFlag{Name: "gateway-addresses", EnvVars: env("GATEWAY_ADDRESSES"),
			Usage: "the pool of IP `ADDRESS`es (comma-separated or repeated) nginx serves Gateways without spec.addresses on, one each (default none)"},
		&cli.BoolFlag{Name: "gateway-services", Value: true, EnvVars: env("GATEWAY_SERVICES"),
			Usage: "keep, for each accepted Gateway, a Service in its namespace (NAME-restysync, no selector, an EndpointSlice of the Gateway's addresses) with its spec.infrastructure labels and annotations, and declare GatewayInfrastructure (--source kube; the leader writes them)"},
		&cli.DurationFlag{Name: "reload-timeout", Value: 10 * time.Second, EnvVars: env("RELOAD_TIMEOUT"),
			Usage: "how long one sync waits for nginx to run a new config; past it the reload is \"not confirmed yet\": the new file stays, no second signal is sent, and the agent adopts it once nginx reports its hash (only nginx's own rejection counts as failed)"},
		&cli.StringFlag{Name: "dns-server", EnvVars: env("DNS_SERVER"),
			Usage: "`HOST:PORT` of the DNS server that resolves FQDN EndpointSlices (default: the system's resolver)"},
		&cli.DurationFlag{Name: "dns-refresh-interval", Value: 5 * time.Second, EnvVars: env("DNS_REFRESH_INTERVAL"),
			Usage: "how often the names of FQDN EndpointSlices are resolved again"},
		&cli.StringFlag{Name: "push-mode", Value: "changed", EnvVars: env("PUSH_MODE"),
			Usage: "`changed` sends Lua only the backends that changed; full sends all of them on every change (the classic strategy, for benchmarks)"},
		&cli.IntFlag{Name: "https-redirect-port", EnvVars: env("HTTPS_REDIRECT_PORT"),
			Usage: "port in the Location of HTTP → HTTPS redirects: the one clients reach the HTTPS port on (0: --https-port; 443 is left out of the URL)"},
		&cli.BoolFlag{Name: "hsts", Value: true, EnvVars: env("HSTS"),
			Usage: "add Strict-Transport-Security to responses over HTTPS (--hsts=false turns it off)"},
		&cli.IntFlag{Name: "hsts-max-age", Value: 31536000, EnvVars: env("HSTS_MAX_AGE"),
			Usage: "HSTS max-age in seconds"},
		&cli.BoolFlag{Name: "hsts-include-subdomains", Value: true, EnvVars: env("HSTS_INCLUDE_SUBDOMAINS"),
			Usage: "HSTS includeSubDomains directive"},
		&cli.BoolFlag{Name: "hsts-preload", EnvVars: env("HSTS_PRELOAD"),
			Usage: "HSTS preload directive"},
		&cli.StringSliceFlag{Name: "trusted-proxies", EnvVars: env("TRUSTED_PROXIES"),
			Usage: "`CIDR`s or addresses (comma-separated or repeated) whose X-Forwarded-For/-Proto/-Host/-Port are passed on; from others they are replaced (default none)"},
		&cli.BoolFlag{Name: "allow-snippet-annotations", Value: true, EnvVars: env("ALLOW_SNIPPET_ANNOTATIONS"),
			Usage: "read the snippet annotations (configuration-snippet, server-snippet, auth-snippet) as typed directives against an allowlist; false refuses every one (the ConfigMap's allow-snippet-annotations: \"false\" does too)"},
		&cli.StringFlag{Name: "max-proxy-body-size", Value: "0", EnvVars: env("MAX_PROXY_BODY_SIZE"),
			Usage: "the largest proxy-body-size an Ingress may set, an nginx `SIZE` (\"100m\"); over it is a Problem and the default is used; 0: no maximum, and \"0\" (no limit) is allowed (the ConfigMap's max-proxy-body-size overrides it)"},
		&cli.StringFlag{Name: "max-client-body-buffer-size", Value: "1m", EnvVars: env("MAX_CLIENT_BODY_BUFFER_SIZE"),
			Usage: "the largest client-body-buffer-size an Ingress may set, an nginx `SIZE`: what one request may make a worker hold in memory; 0: no maximum (the ConfigMap's max-client-body-buffer-size overrides it)"},
		&cli.IntFlag{Name: "max-regex-paths-per-host", Value: model.DefaultLimits().MaxRegexPathsPerHost, EnvVars: env("MAX_REGEX_PATHS_PER_HOST"),
			Usage: "the most regex paths (use-regex, rewrite-target) one host may have, oldest Ingress first; the rest are Problems (Lua tries a host's regexes in turn on every request); 0: no maximum (the ConfigMap's max-regex-paths-per-host overrides it)"},
		&cli.BoolFlag{Name: "enable-ssl-passthrough", EnvVars: env("ENABLE_SSL_PASSTHROUGH"),
			Usage: "honour the ssl-passthrough annotation: nginx's stream module takes the HTTPS port and passes TLS for those hosts to their backends untouched, by SNI (Debian's nginx: --load-module /usr/share/nginx/modules/ngx_stream_module.so; OpenResty has stream built in, no --load-module)"},
		&cli.BoolFlag{Name: "allow-x-accel-redirect", EnvVars: env("ALLOW_X_ACCEL_REDIRECT"),
			Usage: "honour X-Accel-Redirect in backends' answers (default: nginx ignores it, like every X-Accel-* header); an internal location of one Ingress stays unreachable from another's"},
		&cli.StringFlag{Name: "modsecurity-rules", Value: render.DefaultModSecurityRules, EnvVars: env("MODSECURITY_RULES"),
			Usage: "ModSecurity's recommended configuration `FILE`, the first rules of every location with enable-modsecurity (default: Debian's libnginx-mod-http-modsecurity's)"},
		&cli.StringSliceFlag{Name: "modsecurity-crs", Value: cli.NewStringSlice(render.DefaultModSecurityCoreRules...), EnvVars: env("MODSECURITY_CRS"),
			Usage: "the OWASP Core Rule Set's `FILE`s, in order, a trailing * pattern allowed (enable-owasp-core-rules; default: Debian's modsecurity-crs)"},
		&cli.StringFlag{Name: "modsecurity-rule-engine", EnvVars: env("MODSECURITY_RULE_ENGINE"),
			Usage: "SecRuleEngine of every location with ModSecurity: On blocks what the rules detect, DetectionOnly logs it, Off; empty keeps the rules file's (DetectionOnly in Debian's and ingress-nginx's)"},
		&cli.BoolFlag{Name: "modsecurity-built-in", EnvVars: env("MODSECURITY_BUILT_IN"),
			Usage: "nginx has the ModSecurity module built in (else only a --load-module of ngx_http_modsecurity_module.so loads it; without it, Ingresses that ask for ModSecurity answer 503)"},
		&cli.StringFlag{Name: "pod-ip", EnvVars: env("POD_IP", "POD_IP"),
			Usage: "the pod's own IP address (the chart sets it from the downward API's status.podIP): no URL nginx connects to and no endpoint may name it; the addresses of the pod's interfaces are refused as well"},
		&cli.StringSliceFlag{Name: "allow-internal-networks", EnvVars: env("ALLOW_INTERNAL_NETWORKS"),
			Usage: "`CIDR`s (comma-separated or repeated) that auth-url, global-auth-url, mirror-target and endpoints may name although they are loopback, link-local or unspecified (default none; a unix socket and the pod's own ports stay refused)"},
		&cli.StringFlag{Name: "log-level", Value: "info", EnvVars: env("LOG_LEVEL"), Usage: "debug, info, warn or error"},
		&cli.StringFlag{Name: "log-format", Value: "text", EnvVars: env("LOG_FORMAT"), Usage: "text or json"},
	}
}

func runCommand() *cli.Command {
	return &cli.Command{
		Name:   "run",
		Usage:  "run the agent",
		Flags:  append(append(runFlags(), adminFlags()...), kubeFlags()...),
		Action: run,
	}
}

// runConfig is the validated form of the run flags.
type runConfig struct {
	sourceKind, sourceDir string
	sharedDir             string
	render                render.Settings
	ingressClass          string
	withoutClass          bool
	gatewayController     string
	gatewayAddresses      []string
	gatewayServices       bool
	snippetsOff           bool
	defaultCertificate    string
	reloadTimeout         time.Duration
	fullPush              bool
	metricsAddress        string
	probesAddress         string
	profiling             bool
	targets               model.Targets
	dns                   fqdn.Options
	kube                  kubeConfig
	logger                *slog.Logger

	// ingressNginx are the options of the series under ingress-nginx's
	// names (nil: off; the request metrics are then not recorded).
	ingressNginx *metrics.IngressNginx
}

func parseRunConfig(c *cli.Context) (runConfig, error) {
	var rc runConfig
	logger, err := newLogger(c.String("log-level"), c.String("log-format"), c.App.ErrWriter)
	if err != nil {
		return rc, err
	}
	rc.logger = logger

	src := c.String("source")
	switch {
	case src == "kube":
		rc.sourceKind = "kube"
	case strings.HasPrefix(src, "file:") && len(src) > len("file:"):
		rc.sourceKind, rc.sourceDir = "file", strings.TrimPrefix(src, "file:")
	default:
		return rc, fmt.Errorf("--source %q: want kube or file:DIR", src)
	}

	shared := c.String("shared-dir")
	if shared == "" {
		return rc, fmt.Errorf("--shared-dir: must not be empty")
	}
	if rc.sharedDir, err = filepath.Abs(shared); err != nil {
		return rc, fmt.Errorf("--shared-dir %q: %w", shared, err)
	}
	for _, name := range []string{"http-port", "https-port"} {
		if p := c.Int(name); p < 1 || p > 65535 {
			return rc, fmt.Errorf("--%s %d: must be 1..65535", name, p)
		}
	}
	if c.Int("http-port") == c.Int("https-port") {
		return rc, fmt.Errorf("--http-port and --https-port are both %d", c.Int("http-port"))
	}
	if p := c.Int("status-port"); p != 0 && (p < 1 || p > 65535 || p == c.Int("http-port") || p == c.Int("https-port")) {
		return rc, fmt.Errorf("--status-port %d: must be 1..65535 and neither --http-port nor --https-port, or 0 for none", p)
	}
	workers := c.String("worker-processes")
	if !validWorkerProcesses(workers) {
		return rc, fmt.Errorf("--worker-processes %q: want auto or a number 1..1024", workers)
	}
	if m := c.Int("lua-dict-mb"); m < render.MinLuaDictMB || m > render.MaxLuaDictMB {
		return rc, fmt.Errorf("--lua-dict-mb %d: want %d..%d", m, render.MinLuaDictMB, render.MaxLuaDictMB)
	}
	for _, m := range c.StringSlice("load-module") {
		if !filepath.IsAbs(m) || strings.ContainsAny(m, "\"'\\$;{}\n\r\t ") {
			return rc, fmt.Errorf("--load-module %q: want an absolute path without spaces, quotes or nginx syntax", m)
		}
	}
	class := c.String("ingress-class")
	if class == "" {
		return rc, fmt.Errorf("--ingress-class: must not be empty")
	}
	if d := c.Duration("reload-timeout"); d <= 0 {
		return rc, fmt.Errorf("--reload-timeout %s: must be positive", d)
	}
	rc.render = render.Settings{
		SharedDir:       rc.sharedDir,
		HTTPPort:        c.Int("http-port"),
		HTTPSPort:       c.Int("https-port"),
		StatusPort:      c.Int("status-port"),
		ListenAddress:   c.String("listen-address"),
		LoadModules:     c.StringSlice("load-module"),
		WorkerProcesses: workers,
		LuaDictMB:       c.Int("lua-dict-mb"),
		SSLPassthrough:  c.Bool("enable-ssl-passthrough"),

		AllowXAccelRedirect: c.Bool("allow-x-accel-redirect"),
	}
	if err := parseHTTPSFlags(c, &rc.render); err != nil {
		return rc, err
	}
	if rc.render.ModSecurity, err = parseModSecurityFlags(c); err != nil {
		return rc, err
	}
	if rc.render.Limits, err = parseLimitFlags(c); err != nil {
		return rc, err
	}
	rc.ingressClass = class
	if rc.defaultCertificate, err = defaultCertificate(c); err != nil {
		return rc, err
	}
	rc.withoutClass = c.Bool("watch-ingress-without-class")
	if rc.gatewayController, err = parseGatewayController(c.String("gateway-controller-name")); err != nil {
		return rc, err
	}
	if rc.gatewayAddresses, err = parseGatewayAddresses(c.StringSlice("gateway-addresses")); err != nil {
		return rc, err
	}
	// Only the kube source has a leader to write the Services.
	rc.gatewayServices = c.Bool("gateway-services") && rc.sourceKind == "kube"
	rc.snippetsOff = !c.Bool("allow-snippet-annotations")
	rc.reloadTimeout = c.Duration("reload-timeout")
	if rc.dns, err = parseDNS(c); err != nil {
		return rc, err
	}
	rc.dns.Logger = logger
	rc.render.Resolvers = nginxResolvers(c.String("dns-server"), "/etc/resolv.conf")
	switch mode := c.String("push-mode"); mode {
	case "changed", "full":
		rc.fullPush = mode == "full"
	default:
		return rc, fmt.Errorf("--push-mode %q: want changed or full", mode)
	}
	if rc.metricsAddress, err = parseMetricsAddress(c, "metrics-address"); err != nil {
		return rc, err
	}
	if rc.probesAddress, err = parseMetricsAddress(c, "metrics-probes-address"); err != nil {
		return rc, err
	}
	if rc.metricsAddress != "" || rc.probesAddress != "" {
		// Without an admin server nobody reads them: nginx records nothing.
		if rc.render.RequestMetrics, rc.ingressNginx, err = parseIngressNginxMetrics(c, podName(c), c.String("election-namespace")); err != nil {
			return rc, err
		}
	}
	rc.profiling = c.Bool("profiling")
	if rc.targets, err = parseTargets(c, rc); err != nil {
		return rc, err
	}
	if rc.kube, err = parseKubeConfig(c); err != nil {
		return rc, err
	}
	return rc, nil
}

// parseTargets reads where nginx may connect (model.Targets): the pod's
// own addresses (--pod-ip and those of its interfaces), nginx's ports
// (run adds the admin server's once it listens), the networks a platform
// allows, and whether the source is a local folder, where loopback is
// allowed.
func parseTargets(c *cli.Context, rc runConfig) (model.Targets, error) {
	t := model.Targets{Local: rc.sourceKind == "file"}
	if v := strings.TrimSpace(c.String("pod-ip")); v != "" {
		addr, err := netip.ParseAddr(v)
		if err != nil || addr.Zone() != "" {
			return t, fmt.Errorf("--pod-ip %q: want an IP address", v)
		}
		t.PodAddresses = append(t.PodAddresses, addr.Unmap())
	}
	t.PodAddresses = append(t.PodAddresses, interfaceAddresses()...)
	for _, p := range []int{rc.render.HTTPPort, rc.render.HTTPSPort, rc.render.StatusPort} {
		if p != 0 {
			t.PodPorts = append(t.PodPorts, int32(p))
		}
	}
	for _, v := range c.StringSlice("allow-internal-networks") {
		if v = strings.TrimSpace(v); v == "" {
			continue
		}
		p, err := parseTrustedProxy(v)
		if err != nil {
			return t, fmt.Errorf("--allow-internal-networks %q: %v", v, err)
		}
		t.Allowed = append(t.Allowed, p)
	}
	return t, nil
}

// interfaceAddresses are the addresses of the host's (the pod's) network
// interfaces, loopback left out (the check knows it), or none when they
// cannot be read.
func interfaceAddresses() []netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range addrs {
		p, err := netip.ParsePrefix(a.String())
		if err != nil || p.Addr().IsLoopback() {
			continue
		}
		out = append(out, p.Addr().WithZone("").Unmap())
	}
	return out
}

// defaultCertificate reads --default-ssl-certificate: "" or the
// NAMESPACE/NAME of a Secret. run and inspect take it alike.
func defaultCertificate(c *cli.Context) (string, error) {
	ref := c.String("default-ssl-certificate")
	if ref == "" {
		return "", nil
	}
	namespace, name, ok := strings.Cut(ref, "/")
	if !ok || len(validation.IsDNS1123Label(namespace)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return "", fmt.Errorf("--default-ssl-certificate %q: want NAMESPACE/NAME of a Secret", ref)
	}
	return ref, nil
}

// parseLimitFlags reads the --max-* flags of what one Ingress may set.
func parseLimitFlags(c *cli.Context) (model.Limits, error) {
	var l model.Limits
	for _, f := range []struct {
		name  string
		field *int64
	}{{"max-proxy-body-size", &l.MaxProxyBodySize}, {"max-client-body-buffer-size", &l.MaxClientBodyBufferSize}} {
		n, ok := model.SizeBytes(c.String(f.name))
		if !ok || !render.BodySize.MatchString(c.String(f.name)) {
			return l, fmt.Errorf("--%s %q: want an nginx size, digits and an optional k, m or g (0: no maximum)", f.name, c.String(f.name))
		}
		*f.field = n
	}
	l.MaxRegexPathsPerHost = c.Int("max-regex-paths-per-host")
	if l.MaxRegexPathsPerHost < 0 {
		return l, fmt.Errorf("--max-regex-paths-per-host %d: must be 0 (no maximum) or more", l.MaxRegexPathsPerHost)
	}
	return l, nil
}

// parseModSecurityFlags reads the --modsecurity-* flags.
func parseModSecurityFlags(c *cli.Context) (render.ModSecurity, error) {
	m := render.ModSecurity{BuiltIn: c.Bool("modsecurity-built-in"), Rules: c.String("modsecurity-rules"),
		RuleEngine: c.String("modsecurity-rule-engine")}
	if err := render.CheckModSecurityPath(m.Rules); err != nil {
		return m, fmt.Errorf("--modsecurity-rules %w", err)
	}
	for _, f := range c.StringSlice("modsecurity-crs") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if err := render.CheckModSecurityPath(f); err != nil {
			return m, fmt.Errorf("--modsecurity-crs %w", err)
		}
		m.CoreRules = append(m.CoreRules, f)
	}
	if len(m.CoreRules) == 0 {
		return m, fmt.Errorf("--modsecurity-crs: names no file")
	}
	if m.RuleEngine != "" && !slices.Contains(render.ModSecurityRuleEngines, m.RuleEngine) {
		return m, fmt.Errorf("--modsecurity-rule-engine %q: want On, DetectionOnly or Off, or empty for the rules file's", m.RuleEngine)
	}
	return m, nil
}

// maxHSTSMaxAge bounds --hsts-max-age: ten years.
const maxHSTSMaxAge = 10 * 365 * 24 * 3600

// parseHTTPSFlags reads the redirect, HSTS and trusted-proxy flags into s.
// Everything nginx.conf gets from them is a number, a flag or a CIDR
// netip parsed.
func parseHTTPSFlags(c *cli.Context, s *render.Settings) error {
	if p := c.Int("https-redirect-port"); p < 0 || p > 65535 {
		return fmt.Errorf("--https-redirect-port %d: must be 1..65535, or 0 for --https-port", p)
	}
	s.HTTPSRedirectPort = c.Int("https-redirect-port")
	s.HSTS = c.Bool("hsts")
	s.HSTSMaxAge = c.Int("hsts-max-age")
	if s.HSTSMaxAge < 0 || s.HSTSMaxAge > maxHSTSMaxAge {
		return fmt.Errorf("--hsts-max-age %d: must be 0..%d seconds", s.HSTSMaxAge, maxHSTSMaxAge)
	}
	s.HSTSIncludeSubdomains = c.Bool("hsts-include-subdomains")
	s.HSTSPreload = c.Bool("hsts-preload")
	for _, v := range c.StringSlice("trusted-proxies") {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		p, err := parseTrustedProxy(v)
		if err != nil {
			return fmt.Errorf("--trusted-proxies %q: %v", v, err)
		}
		s.TrustedProxies = append(s.TrustedProxies, p)
	}
	return nil
}

// parseTrustedProxy reads a CIDR ("10.0.0.0/8") or one address ("10.0.0.1",
// a /32 or /128).
func parseTrustedProxy(v string) (netip.Prefix, error) {
	var p netip.Prefix
	if strings.Contains(v, "/") {
		var err error
		if p, err = netip.ParsePrefix(v); err != nil {
			return p, errors.New("want a CIDR such as 10.0.0.0/8 or fd00::/8, or one IP address")
		}
	} else {
		a, err := netip.ParseAddr(v)
		if err != nil {
			return p, errors.New("want a CIDR such as 10.0.0.0/8 or fd00::/8, or one IP address")
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if p.Addr().Zone() != "" {
		return p, errors.New("an address with a zone cannot be matched")
	}
	return p.Masked(), nil
}

func validWorkerProcesses(s string) bool {
	if s == "auto" {
		return true
	}
	var n int
	_, err := fmt.Sscanf(s, "%d", &n)
	return err == nil && fmt.Sprint(n) == s && n >= 1 && n <= 1024
}

func run(c *cli.Context) error {
	rc, err := parseRunConfig(c)
	if err != nil {
		return err
	}
	logger := rc.logger
	// client-go logs through klog; send it to the same place, in the same format.
	klog.SetSlogLogger(logger.With("component", "client-go"))
	logger.Info("starting", "version", versionString(), "source", c.String("source"), "shared_dir", rc.sharedDir)
	setMemoryLimit(logger)
	gc := newGCPercents(logger)
	restoreGC := gc.during(startGCPercent, "after the listing")

	// Start-up contract: Lua modules and a bootstrap nginx.conf come first, so
	// nginx can start as soon as the file exists.
	if err := prepareSharedDir(rc); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	obs, err := listenAdmin(rc.metricsAddress, rc.probesAddress)
	if err != nil {
		return err
	}
	obs.profiling = rc.profiling
	rc.targets.PodPorts = append(rc.targets.PodPorts, obs.ports()...)
	obs.ingressNginx = rc.ingressNginx

	var src source.Source
	var onSync func(syncer.Report)
	switch rc.sourceKind {
	case "file":
		// FQDN EndpointSlices (the compose demo names its backends) are resolved here.
		files := file.New(rc.sourceDir, file.WithLogger(logger), file.WithConfigMap(rc.kube.configMap),
			file.WithServicesConfigMaps(rc.kube.tcpServices, rc.kube.udpServices))
		obs.objects, src = files, fqdn.WrapIndexed(files, rc.dns)
	case "kube":
		parts, err := startKube(ctx, rc.kube, logger)
		if err != nil {
			return err
		}
		src, onSync = fqdn.WrapIndexed(parts.source, rc.dns), parts.onSync
		obs.objects, obs.leader = parts.source, parts.leader
		defer waitStopped(parts.stopped, logger)
	}

	var waitStateWritten func() // the syncer's, set before it runs
	onSync = gc.betweenSyncs(releaseMemory(onSync, logger, func() { waitStateWritten() }, gc.startSteady))

	nginx := &apply.Nginx{
		SharedDir:      rc.sharedDir,
		Lua:            apply.NewLuaClient(filepath.Join(rc.sharedDir, render.SocketName)),
		ConfirmTimeout: rc.reloadTimeout,
	}
	s := syncer.New(src, nginx, syncer.Options{
		IngressClass:          rc.ingressClass,
		WatchWithoutClass:     rc.withoutClass,
		SnippetAnnotationsOff: rc.snippetsOff,
		DefaultCertificate:    rc.defaultCertificate,
		GatewayController:     rc.gatewayController,
		GatewayAddresses:      rc.gatewayAddresses,
		GatewayServices:       rc.gatewayServices,
		Render:                rc.render,
		ConfigMap:             rc.kube.configMap,
		OnSync:                onSync,
		OnListed:              restoreGC,
		LeanFullSync:          func() func() { return gc.during(fullSyncGCPercent, "after a full sync") },
		FullPush:              rc.fullPush,
		Metrics:               obs.syncerMetrics(nginx.Lua),
		Targets:               rc.targets,
	}, logger)
	waitStateWritten = s.WaitStateWritten
	obs.serve(ctx, s, nginx.Lua, rc.reloadTimeout, logger)
	err = s.Run(ctx)
	logger.Info("stopped")
	return err
}

// prepareSharedDir writes the config API's secret when there is no valid
// one (a running master holds the one it read), the Lua modules, and a
// bootstrap nginx.conf when there is none. An existing nginx.conf is kept: nginx may be running it, and
// the first sync replaces it only if it differs.
func prepareSharedDir(rc runConfig) error {
	if err := os.MkdirAll(rc.sharedDir, 0o755); err != nil {
		return fmt.Errorf("creating shared dir: %w", err)
	}
	for _, sub := range []string{"logs", "tmp"} {
		if err := os.MkdirAll(filepath.Join(rc.sharedDir, sub), 0o755); err != nil {
			return fmt.Errorf("creating shared dir: %w", err)
		}
	}
	// The secret comes before nginx.conf: a master that starts reads it.
	if _, created, err := luaapi.EnsureSecret(rc.sharedDir); err != nil {
		return err
	} else if created {
		rc.logger.Info("config API secret generated", "path", filepath.Join(rc.sharedDir, luaapi.SecretName))
	}
	if err := lua.WriteTo(rc.sharedDir, apply.WriteFileAtomic); err != nil {
		return fmt.Errorf("writing Lua modules: %w", err)
	}
	if made, err := render.WriteFallbackCertificate(rc.sharedDir); err != nil {
		return err
	} else if made {
		rc.logger.Info("default certificate generated", "path", filepath.Join(rc.sharedDir, render.FallbackCertName))
	}
	confPath := filepath.Join(rc.sharedDir, render.ConfigName)
	if _, err := os.Stat(confPath); err == nil {
		return nil
	}
	cfg, err := render.Render(model.Model{}, rc.render)
	if err != nil {
		return fmt.Errorf("rendering bootstrap nginx.conf: %w", err)
	}
	if err := apply.WriteFileAtomic(confPath, cfg.Bytes, 0o644); err != nil {
		return fmt.Errorf("writing bootstrap nginx.conf: %w", err)
	}
	rc.logger.Info("bootstrap nginx.conf written", "path", confPath, "config_hash", cfg.Hash[:12])
	return nil
}

// shutdownTimeout bounds the wait for background work at exit.
const shutdownTimeout = 5 * time.Second

// waitStopped waits, within shutdownTimeout, for stopped to close.
func waitStopped(stopped <-chan struct{}, logger *slog.Logger) {
	select {
	case <-stopped:
	case <-time.After(shutdownTimeout):
		logger.Warn("background work did not stop in time", "timeout", shutdownTimeout)
	}
}

// parseDNS reads the resolver flags of FQDN EndpointSlices.
func parseDNS(c *cli.Context) (fqdn.Options, error) {
	opts := fqdn.Options{Interval: c.Duration("dns-refresh-interval")}
	if opts.Interval <= 0 {
		return opts, fmt.Errorf("--dns-refresh-interval %s: must be positive", opts.Interval)
	}
	server := c.String("dns-server")
	if server == "" {
		return opts, nil
	}
	if _, _, err := net.SplitHostPort(server); err != nil {
		return opts, fmt.Errorf("--dns-server %q: want HOST:PORT", server)
	}
	opts.Resolver = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, server)
	}}
	return opts, nil
}

// nginxResolvers are the DNS servers nginx asks for the host of an
// auth-url: --dns-server when set, else the nameservers of resolv.conf (a
// pod's are the cluster DNS). nginx reads no resolv.conf of its own.
func nginxResolvers(dnsServer, resolvConf string) []string {
	if dnsServer != "" {
		if ap, err := netip.ParseAddrPort(dnsServer); err == nil && ap.Addr().Zone() == "" {
			return []string{ap.String()}
		}
		return nil // a name: nginx could not use it
	}
	data, err := os.ReadFile(resolvConf)
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 || fields[0] != "nameserver" {
			continue
		}
		if ip, err := netip.ParseAddr(fields[1]); err == nil && ip.Zone() == "" {
			out = append(out, ip.String())
		}
	}
	return out
}

// releaseMemory calls next for each sync, and hands the memory freed since
// back to the OS (and the pages of its binary it touched: releaseBinaryPages)
// after the first sync that applied, and after a later
// sync that built the model whole (Report.Whole; not an incremental one,
// whose garbage is small, and whose forced collection of a 500 MB heap
// would hold up the next change) of a large agent (heap in use over
// releaseHeapFloor). A full sync
// lists the source's objects and builds and renders everything: at 10,000
// Ingresses its garbage is about the live heap again, and the Go runtime
// keeps memory mapped up to its next GC goal (twice the live heap), so
// without this the agent's RSS would sit at that peak. Releases are at
// least releaseInterval apart (one asked for sooner waits, and the asks in
// between are one), which bounds the extra collections a burst of full
// syncs costs; small agents never pay for it. A release first waits for
// settle (the saved state's running write, whose first one after a start
// encodes every item: garbage made after the release would stay in RSS
// until the next collection, 20 MB at 50,000 hosts). After the first
// release, afterFirst runs once (the steady GC percent starts from the heap
// live then).
func releaseMemory(next func(syncer.Report), logger *slog.Logger, settle, afterFirst func()) func(syncer.Report) {
	r := &memoryReleaser{logger: logger, settle: settle, afterFirst: afterFirst}
	first := true
	return func(rep syncer.Report) {
		if next != nil {
			next(rep)
		}
		if !releaseDue(rep, first, heapInUse) {
			return
		}
		first = false
		r.ask()
	}
}

// releaseDue says whether releaseMemory releases after rep: the first
// applied sync, or an applied one that built the model whole while the
// heap in use (read only then) is over releaseHeapFloor.
func releaseDue(rep syncer.Report, first bool, heapInUse func() uint64) bool {
	switch {
	case !rep.Applied:
		return false
	case first:
		return true
	}
	return rep.Whole && heapInUse() >= releaseHeapFloor
}

func heapInUse() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// releaseHeapFloor and releaseInterval bound releaseMemory after the first
// sync: only an agent whose heap in use is that large, at most that often.
const (
	releaseHeapFloor = 64 << 20
	releaseInterval  = time.Second
)

// memoryReleaser runs debug.FreeOSMemory at most once per releaseInterval.
type memoryReleaser struct {
	logger     *slog.Logger
	settle     func() // nil: none
	afterFirst func() // nil: none
	mu         sync.Mutex
	last       time.Time
	pending    bool
}

func (m *memoryReleaser) ask() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pending {
		return
	}
	m.pending = true
	time.AfterFunc(max(0, time.Until(m.last.Add(releaseInterval))), func() {
		if m.settle != nil {
			m.settle()
		}
		start := time.Now()
		debug.FreeOSMemory()
		paged, err := releaseBinaryPages()
		m.mu.Lock()
		first := m.last.IsZero()
		m.last, m.pending = time.Now(), false
		m.mu.Unlock()
		if first && m.afterFirst != nil {
			m.afterFirst()
		}
		m.logger.Debug("released memory to the OS", "duration", time.Since(start).Round(time.Millisecond),
			"binary_bytes_paged_out", paged, "page_out_error", err)
	})
}
