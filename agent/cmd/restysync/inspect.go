package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"k8s.io/klog/v2"

	"github.com/restysync/restysync/agent/internal/admin"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
	"github.com/restysync/restysync/agent/internal/snapshot"
	"github.com/restysync/restysync/agent/internal/source"
	"github.com/restysync/restysync/agent/internal/source/file"
	"github.com/restysync/restysync/agent/internal/source/fqdn"
	"github.com/restysync/restysync/agent/internal/source/kube"
)

func inspectCommand() *cli.Command {
	return &cli.Command{
		Name:  "inspect",
		Usage: "print what the agent serves: hosts, paths, backends, endpoints, problems, and whether nginx and Lua are in step",
		Description: "Without --source it asks a running agent through its admin server (--admin).\n" +
			"With --source file:PATH (a folder or a file), - (stdin) or kube it computes the same from that source, with no agent and no nginx (a dry run).",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "admin", EnvVars: env("ADMIN"),
				Usage: "`URL` or HOST:PORT of the running agent's admin server (default: its --metrics-address, from $RESTYSYNC_METRICS_ADDRESS, else " + defaultMetricsAddress + ")"},
			&cli.StringFlag{Name: "source",
				Usage: "compute from this source instead of asking an agent: file:PATH (a folder or a file), - (stdin) or kube (a dry run)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: "text or json"},
			&cli.DurationFlag{Name: "timeout", Value: 30 * time.Second,
				Usage: "how long to wait for the agent, or for the source's first listing"},
			&cli.StringFlag{Name: "ingress-class", Value: "restysync", EnvVars: env("INGRESS_CLASS"),
				Usage: "with --source: IngressClass name to serve"},
			&cli.BoolFlag{Name: "watch-ingress-without-class", EnvVars: env("WATCH_INGRESS_WITHOUT_CLASS"),
				Usage: "with --source: also serve Ingresses that name no class"},
			&cli.StringFlag{Name: "kubeconfig", EnvVars: env("KUBECONFIG"),
				Usage: "with --source kube: kubeconfig `FILE` (default: $KUBECONFIG, else ~/.kube/config, else the in-cluster config)"},
			&cli.StringFlag{Name: "context", EnvVars: env("CONTEXT"), Usage: "with --source kube: kubeconfig context"},
			&cli.StringFlag{Name: "namespace", EnvVars: env("NAMESPACE"), Usage: "with --source kube: read one namespace only (default: all)"},
			&cli.StringFlag{Name: "configmap", EnvVars: env("CONFIGMAP"),
				Usage: "with --source: global settings from this ConfigMap, `NAMESPACE/NAME`, as the agent's --configmap"},
			&cli.StringFlag{Name: "default-ssl-certificate", EnvVars: env("DEFAULT_SSL_CERTIFICATE"),
				Usage: "with --source: the TLS Secret `NAMESPACE/NAME` of the default certificate, as the agent's --default-ssl-certificate"},
			&cli.BoolFlag{Name: "enable-ssl-passthrough", EnvVars: env("ENABLE_SSL_PASSTHROUGH"),
				Usage: "with --source: honour ssl-passthrough, as the agent's --enable-ssl-passthrough"},
			&cli.BoolFlag{Name: "allow-snippet-annotations", Value: true, EnvVars: env("ALLOW_SNIPPET_ANNOTATIONS"),
				Usage: "with --source: read the snippet annotations, as the agent's --allow-snippet-annotations (false refuses every one)"},
			&cli.StringFlag{Name: "tcp-services-configmap", EnvVars: env("TCP_SERVICES_CONFIGMAP"),
				Usage: "with --source: TCP services from this ConfigMap, `NAMESPACE/NAME`, as the agent's flag of that name"},
			&cli.StringFlag{Name: "udp-services-configmap", EnvVars: env("UDP_SERVICES_CONFIGMAP"),
				Usage: "with --source: UDP services from this ConfigMap, `NAMESPACE/NAME`, as the agent's flag of that name"},
		},
		Action: inspect,
	}
}

func inspect(c *cli.Context) error {
	output := c.String("output")
	if output != "text" && output != "json" {
		return fmt.Errorf("--output %q: want text or json", output)
	}
	if c.Duration("timeout") <= 0 {
		return fmt.Errorf("--timeout %s: must be positive", c.Duration("timeout"))
	}
	ctx, cancel := context.WithTimeout(c.Context, c.Duration("timeout"))
	defer cancel()

	var report admin.Report
	var from string
	var err error
	if src := c.String("source"); src != "" {
		from = "dry run of --source " + src
		report, err = inspectSource(ctx, c, src)
	} else {
		var url string
		url, err = adminURL(c.String("admin"))
		if err != nil {
			return err
		}
		from = "agent at " + url
		report, err = fetchReport(ctx, url)
	}
	if err != nil {
		return err
	}
	if output == "json" {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		return enc.Encode(report)
	}
	writeReport(c.App.Writer, from, report)
	return nil
}

// adminURL turns --admin (or the metrics address) into a base URL. An
// address that listens on every interface is reached on loopback.
func adminURL(flag string) (string, error) {
	addr := flag
	if addr == "" {
		addr = os.Getenv("RESTYSYNC_METRICS_ADDRESS")
	}
	if addr == "" {
		addr = defaultMetricsAddress
	}
	if strings.HasPrefix(addr, "http://") || strings.HasPrefix(addr, "https://") {
		return strings.TrimRight(addr, "/"), nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("--admin %q: want a URL or HOST:PORT", addr)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port), nil
}

// fetchReport reads GET /debug/state of a running agent.
func fetchReport(ctx context.Context, base string) (admin.Report, error) {
	var report admin.Report
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/debug/state", nil)
	if err != nil {
		return report, fmt.Errorf("--admin: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return report, fmt.Errorf("asking the agent (is it running with --metrics-address? else use --source for a dry run): %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return report, fmt.Errorf("asking the agent: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 256<<20)).Decode(&report); err != nil {
		return report, fmt.Errorf("decoding the agent's /debug/state: %w", err)
	}
	return report, nil
}

// readSource lists a source once (file:DIR, or kube with the kubeconfig
// flags) and returns what it holds, with the problems of reading it. From
// kube it reads the auth Secrets of the Ingresses of --ingress-class, or of
// every Ingress with everyIngress.
func readSource(ctx context.Context, c *cli.Context, src string, everyIngress bool) (model.Snapshot, []model.Problem, error) {
	// client-go logs through klog: keep its chatter off the report.
	klog.SetSlogLogger(slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: slog.LevelWarn})))
	var inner source.Source
	switch {
	case src == "kube":
		kc := kubeConfig{kubeconfig: c.String("kubeconfig"), context: c.String("context"), namespace: c.String("namespace"), qps: 50, burst: 100}
		client, err := kubeClient(kc)
		if err != nil {
			return model.Snapshot{}, nil, err
		}
		inner = kube.New(client, kube.Options{Namespace: kc.namespace, ConfigMap: c.String("configmap"),
			TCPServices: c.String("tcp-services-configmap"), UDPServices: c.String("udp-services-configmap"),
			IngressClass: c.String("ingress-class"), WatchWithoutClass: c.Bool("watch-ingress-without-class"),
			EveryIngress: everyIngress})
	case localSource(src):
		opts := []file.Option{file.WithConfigMap(c.String("configmap")),
			file.WithServicesConfigMaps(c.String("tcp-services-configmap"), c.String("udp-services-configmap"))}
		var err error
		if inner, err = fileSource(c.App.Reader, strings.TrimPrefix(src, "file:"), opts); err != nil {
			return model.Snapshot{}, nil, fmt.Errorf("reading --source %s: %w", src, err)
		}
	default:
		return model.Snapshot{}, nil, fmt.Errorf("--source %q: want kube, file:PATH (a folder or a file) or - (stdin)", src)
	}
	s := fqdn.Wrap(inner, fqdn.Options{})
	if err := s.Start(ctx, func(source.Change) {}); err != nil {
		return model.Snapshot{}, nil, fmt.Errorf("reading --source %s: %w", src, err)
	}
	snap, problems := s.Snapshot()
	return snap, problems, nil
}

// localSource says src is read from this machine: file:PATH, or - (stdin).
func localSource(src string) bool {
	return src == "-" || strings.HasPrefix(src, "file:") && len(src) > len("file:")
}

// fileSource returns the source of path: a folder is read (and watched)
// by the file source; a file, or "-" (stdin, from stdin), is read once, with
// the same decoding, from at most file.DefaultMaxFileSize bytes.
func fileSource(stdin io.Reader, path string, opts []file.Option) (source.Source, error) {
	name, in := "stdin", stdin
	if path != "-" {
		info, err := os.Stat(path)
		if err != nil {
			return nil, err
		}
		if info.IsDir() {
			return file.New(path, opts...), nil
		}
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		name, in = path, f
	}
	data, err := io.ReadAll(io.LimitReader(in, file.DefaultMaxFileSize+1))
	if err != nil {
		return nil, err
	}
	snap, problems := file.ReadBytes(name, data, opts...)
	return readOnce{snap: snap, problems: problems}, nil
}

// readOnce is a source read once, a file or stdin: Start has nothing to do.
type readOnce struct {
	snap     model.Snapshot
	problems []model.Problem
}

func (r readOnce) Start(context.Context, func(source.Change)) error { return nil }

func (r readOnce) Snapshot() (model.Snapshot, []model.Problem) { return r.snap, r.problems }

// inspectSource builds the model from a source, as the agent would, with
// no nginx: a dry run. ModSecurity is judged as check judges it: as nginx
// has its module.
func inspectSource(ctx context.Context, c *cli.Context, src string) (admin.Report, error) {
	opts := snapshot.Options{
		IngressClass:          c.String("ingress-class"),
		WatchWithoutClass:     c.Bool("watch-ingress-without-class"),
		SnippetAnnotationsOff: !c.Bool("allow-snippet-annotations"),
		Render: render.Settings{HTTPPort: 80, HTTPSPort: 443, SSLPassthrough: c.Bool("enable-ssl-passthrough"),
			LoadModules: []string{render.DebianModSecurityModule}, Limits: model.DefaultLimits()},
		ConfigMap: c.String("configmap"),
		// As the agent judges its source: a local folder may name loopback.
		Targets: model.Targets{Local: localSource(src), PodPorts: []int32{80, 443}},
	}
	if opts.IngressClass == "" {
		return admin.Report{}, fmt.Errorf("--ingress-class: must not be empty")
	}
	if ref := opts.ConfigMap; ref != "" && !validNamespacedName(ref) {
		return admin.Report{}, fmt.Errorf("--configmap %q: want NAMESPACE/NAME", ref)
	}
	var err error
	if opts.DefaultCertificate, err = defaultCertificate(c); err != nil {
		return admin.Report{}, err
	}
	held, problems, err := readSource(ctx, c, src, false)
	if err != nil {
		return admin.Report{}, err
	}
	otherKinds, problems := file.OtherKinds(problems)
	built := snapshot.Build(held, opts, nil, nil)
	m, buildProblems := model.Build(built.Snapshot)
	// The routes give each path its profile; a model render refuses
	// shows its paths without one (the agent would quarantine it).
	routes, _ := render.Routes(m, built.Settings)
	report := admin.FromModel(m, render.NewRouteList(routes), append(append(problems, built.Problems...), buildProblems...))
	report.DryRun = true
	if len(otherKinds) > 0 {
		report.NotIngressRelated = otherKinds
	}
	report.Nginx = admin.NginxOf(render.Nginx{}, nil)
	return report, nil
}

// writeReport prints the report as a tree for a terminal.
func writeReport(w io.Writer, from string, r admin.Report) {
	fmt.Fprintf(w, "restysync inspect: %s\n\n", from)
	if len(r.Hosts) == 0 {
		fmt.Fprintln(w, "Hosts: none (every request answers 404)")
	} else {
		fmt.Fprintln(w, "Hosts")
	}
	for _, h := range r.Hosts {
		name := h.Host
		if name == "" {
			name = "(default server: requests for any other host)"
		}
		var notes []string
		if h.HTTPS && h.Host != "" {
			notes = append(notes, "HTTPS")
		}
		if h.Certificate != "" {
			notes = append(notes, "certificate "+h.Certificate)
		}
		if len(notes) > 0 {
			name += "  [" + strings.Join(notes, ", ") + "]"
		}
		fmt.Fprintln(w, name)
		for i, p := range h.Paths {
			branch, indent := "├── ", "│   "
			if i == len(h.Paths)-1 {
				branch, indent = "└── ", "    "
			}
			if p.Answer != "" {
				fmt.Fprintf(w, "%s%s (%s) → %s  [Ingress %s]\n", branch, p.Path, p.PathType, p.Answer, p.Ingress)
				writePathContext(w, indent, p)
				continue
			}
			fmt.Fprintf(w, "%s%s (%s) → %s  [Ingress %s]\n", branch, p.Path, p.PathType, cmp.Or(p.Service, p.Backend), p.Ingress)
			writePathContext(w, indent, p)
			if len(p.Endpoints) == 0 {
				fmt.Fprintf(w, "%s└── no endpoints: answers 503\n", indent)
			}
			for j, e := range p.Endpoints {
				leaf := "├── "
				if j == len(p.Endpoints)-1 {
					leaf = "└── "
				}
				fmt.Fprintf(w, "%s%s%s\n", indent, leaf, e)
			}
		}
	}

	if len(r.Certificates) > 0 {
		fmt.Fprintf(w, "\nCertificates (%d)\n", len(r.Certificates))
		for _, c := range r.Certificates {
			line := fmt.Sprintf("  %s for %s", c.Name, strings.Join(c.Hosts, ", "))
			if c.NotAfter != nil {
				line += ", expires " + c.NotAfter.Format(time.RFC3339)
			}
			if c.Invalid != "" {
				line += ", INVALID: " + c.Invalid
			}
			fmt.Fprintln(w, line)
		}
	}

	if len(r.Stream) > 0 {
		fmt.Fprintf(w, "\nStream (%d)\n", len(r.Stream))
		for _, e := range r.Stream {
			what := e.Listen
			if e.Host != "" {
				what += " " + e.Host + " [Ingress " + e.Ingress + "]"
			}
			eps := strings.Join(e.Endpoints, ", ")
			if eps == "" {
				eps = "no endpoints: connections are closed"
			}
			fmt.Fprintf(w, "  %s → %s: %s\n", what, e.Backend, eps)
		}
	}

	writeNotServed(w, r.NotServed)
	writeGatewayAPI(w, r.GatewayAPI, r.DryRun)

	if len(r.Problems) == 0 {
		fmt.Fprintln(w, "\nProblems: none")
	} else {
		fmt.Fprintf(w, "\nProblems (%d)\n", len(r.Problems))
		for _, p := range r.Problems {
			fmt.Fprintf(w, "  %s: %s\n", p.Object, p.Reason)
		}
	}
	if len(r.NotIngressRelated) > 0 {
		fmt.Fprintf(w, "Not Ingress-related, passed over: %s\n", countsLine(r.NotIngressRelated))
	}
	if len(r.QuarantinedIngresses) == 0 {
		fmt.Fprintln(w, "Quarantined Ingresses: none")
	} else {
		fmt.Fprintf(w, "Quarantined Ingresses: %s\n", strings.Join(r.QuarantinedIngresses, ", "))
	}
	if r.ConfigMapRefused != "" {
		fmt.Fprintf(w, "ConfigMap refused (its last version nginx took serves): %s\n", r.ConfigMapRefused)
	}

	writeNginx(w, r.Nginx)
	if r.DryRun {
		fmt.Fprintln(w, "\nConfig and Lua: not checked (dry run: no agent, no nginx)")
		return
	}
	writeConfig(w, r.Config)
	writeLua(w, r.Lua)
}

// writeGatewayAPI prints the status of our GatewayClasses, Gateways,
// their ListenerSets and the routes, each condition with its reason, and its message when it is
// not as wanted.
func writeGatewayAPI(w io.Writer, st *model.GatewayAPIStatus, dryRun bool) {
	if st == nil {
		return
	}
	fmt.Fprintln(w, "\nGateway API status")
	if dryRun {
		fmt.Fprintln(w, "  (dry run: Programmed says what the agent would program; nginx confirms it when an agent runs)")
	}
	for _, c := range st.Classes {
		fmt.Fprintf(w, "  GatewayClass %s (generation %d): %s\n", c.Name, c.Generation, conditionsLine(c.Conditions))
		writeConditionMessages(w, "    ", c.Conditions)
		if len(c.SupportedFeatures) > 0 {
			fmt.Fprintf(w, "    supported features: %s\n", strings.Join(c.SupportedFeatures, ", "))
		}
	}
	for _, g := range st.Gateways {
		addrs := "none"
		if len(g.Addresses) > 0 {
			addrs = strings.Join(g.Addresses, ", ")
		}
		fmt.Fprintf(w, "  Gateway %s/%s (generation %d) on %s: %s\n", g.Namespace, g.Name, g.Generation, addrs, conditionsLine(g.Conditions))
		writeConditionMessages(w, "    ", g.Conditions)
		if g.AttachedListenerSets != nil {
			fmt.Fprintf(w, "    attached ListenerSets: %d\n", *g.AttachedListenerSets)
		}
		writeListeners(w, g.Listeners)
	}
	for _, s := range st.ListenerSets {
		fmt.Fprintf(w, "  ListenerSet %s/%s (generation %d): %s\n", s.Namespace, s.Name, s.Generation, conditionsLine(s.Conditions))
		writeConditionMessages(w, "    ", s.Conditions)
		writeListeners(w, s.Listeners)
	}
	for r := range st.Routes.All() {
		fmt.Fprintf(w, "  %s %s/%s (generation %d)\n", cmp.Or(r.Kind, "HTTPRoute"), r.Namespace, r.Name, r.Generation)
		if len(r.Parents) == 0 {
			fmt.Fprintln(w, "    no parent of ours")
		}
		for _, p := range r.Parents {
			parent := cmp.Or(p.Kind, "Gateway") + " " + p.Namespace + "/" + p.Name
			if p.SectionName != "" {
				parent += " section " + p.SectionName
			}
			if p.Port != 0 {
				parent += fmt.Sprintf(" port %d", p.Port)
			}
			fmt.Fprintf(w, "    parent %s: %s\n", parent, conditionsLine(p.Conditions))
			writeConditionMessages(w, "      ", p.Conditions)
		}
	}
}

// writeListeners prints the listeners of a Gateway or ListenerSet.
func writeListeners(w io.Writer, listeners []model.ListenerStatus) {
	for _, l := range listeners {
		fmt.Fprintf(w, "    listener %s: %d routes, kinds %s: %s\n", l.Name, l.AttachedRoutes,
			cmp.Or(strings.Join(l.SupportedKinds, ","), "none"), conditionsLine(l.Conditions))
		writeConditionMessages(w, "      ", l.Conditions)
	}
}

// conditionsLine is "Accepted=True (Accepted), Programmed=False (Pending)".
func conditionsLine(conds []model.Condition) string {
	parts := make([]string, 0, len(conds))
	for _, c := range conds {
		status := "False"
		if c.Status {
			status = "True"
		}
		parts = append(parts, fmt.Sprintf("%s=%s (%s)", c.Type, status, c.Reason))
	}
	return strings.Join(parts, ", ")
}

// writeConditionMessages prints the message of each condition that is
// False: why it is not as wanted.
func writeConditionMessages(w io.Writer, indent string, conds []model.Condition) {
	for _, c := range conds {
		if !c.Status && c.Message != "" {
			fmt.Fprintf(w, "%s%s: %s\n", indent, c.Type, c.Message)
		}
	}
}

// writePathContext prints, under a path, why its match type is what it is
// and what it sets apart from the defaults, one line each when there is
// something to say.
func writePathContext(w io.Writer, indent string, p admin.Path) {
	if p.MatchReason != "" {
		fmt.Fprintf(w, "%smatch: %s\n", indent, p.MatchReason)
	}
	if len(p.Settings) > 0 {
		fmt.Fprintf(w, "%ssettings: %s\n", indent, strings.Join(p.Settings, ", "))
	}
}

// writeNotServed lists the Ingresses of another class, each with why
// (model.DecideClass), so that an Ingress answered 404 because of its class
// is explained.
func writeNotServed(w io.Writer, notServed []admin.NotServed) {
	if len(notServed) == 0 {
		fmt.Fprintln(w, "\nIngresses not served: none")
		return
	}
	fmt.Fprintf(w, "\nIngresses not served (%d)\n", len(notServed))
	for _, n := range notServed {
		fmt.Fprintf(w, "  Ingress %s: not served: %s\n", n.Ingress, n.Reason)
	}
}

// writeNginx says which nginx the config is rendered for and what
// follows.
func writeNginx(w io.Writer, n *admin.Nginx) {
	if n == nil {
		return
	}
	fmt.Fprintln(w, "\nNginx")
	if n.Detected {
		lua := ""
		if n.LuaVersion != "" {
			lua = ", lua-nginx-module " + n.LuaVersion
		}
		fmt.Fprintf(w, "  version        %s%s\n", n.Version, lua)
		fmt.Fprintf(w, "  built in       %s\n", orNone(strings.Join(n.BuiltIn, " ")))
	} else {
		fmt.Fprintln(w, "  version        not detected (a dry run, or nginx has not answered yet): rendered for any nginx")
	}
	fmt.Fprintf(w, "  load_module    %s\n", orNone(strings.Join(n.LoadModules, " ")))
	if len(n.LeftOut) > 0 {
		fmt.Fprintf(w, "  left out       %s (built in)\n", strings.Join(n.LeftOut, " "))
	}
	fmt.Fprintf(w, "  HTTP/2         %s\n", n.HTTP2)
	fmt.Fprintf(w, "  headers-more   %s\n", n.HeadersMore)
}

func writeConfig(w io.Writer, c *admin.Config) {
	if c == nil {
		return
	}
	fmt.Fprintln(w, "\nConfig")
	fmt.Fprintf(w, "  wanted   %s\n", orNone(short(c.Wanted)))
	fmt.Fprintf(w, "  applied  %s\n", orNone(short(c.Applied)))
	switch {
	case !c.NginxAnswering:
		fmt.Fprintf(w, "  nginx    does not answer: %s\n", c.Error)
	case c.NginxRunsApplied && c.InStep:
		fmt.Fprintf(w, "  nginx    runs %s: the applied config, up to date\n", short(c.Running))
	case c.NginxRunsApplied:
		fmt.Fprintf(w, "  nginx    runs %s: the applied config; the wanted one is not applied yet (or nginx rejected it)\n", short(c.Running))
	default:
		fmt.Fprintf(w, "  nginx    runs %s: NOT the applied config\n", orNone(short(c.Running)))
	}
}

func writeLua(w io.Writer, d *admin.LuaDiff) {
	if d == nil {
		return
	}
	fmt.Fprintln(w, "\nLua")
	if d.Error != "" {
		fmt.Fprintf(w, "  not read: %s\n", d.Error)
		return
	}
	if d.InStep {
		fmt.Fprintf(w, "  in step: Lua holds what the agent wants (%s, %s)\n", plural(d.Backends, "backend"), plural(d.Certificates, "certificate"))
		return
	}
	fmt.Fprintf(w, "  NOT in step (Lua holds %s, %s):\n", plural(d.Backends, "backend"), plural(d.Certificates, "certificate"))
	for _, n := range d.MissingBackends {
		fmt.Fprintf(w, "  backend %s: wanted, Lua does not hold it\n", n)
	}
	for _, n := range d.ExtraBackends {
		fmt.Fprintf(w, "  backend %s: held by Lua, not wanted\n", n)
	}
	for _, b := range d.ChangedBackends {
		fmt.Fprintf(w, "  backend %s: wanted [%s], Lua holds [%s]\n", b.Name, strings.Join(b.Want, " "), strings.Join(b.Held, " "))
	}
	for _, n := range d.MissingCertificates {
		fmt.Fprintf(w, "  certificate %s: wanted, Lua does not hold it\n", n)
	}
	for _, n := range d.ExtraCertificates {
		fmt.Fprintf(w, "  certificate %s: held by Lua, not wanted\n", n)
	}
	for _, n := range d.ChangedCertificates {
		fmt.Fprintf(w, "  certificate %s: Lua holds other content or hosts\n", n)
	}
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}
