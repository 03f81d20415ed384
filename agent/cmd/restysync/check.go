package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
	"github.com/restysync/restysync/agent/internal/snapshot"
	"github.com/restysync/restysync/agent/internal/source/file"
	"github.com/restysync/restysync/agent/internal/syncer"
)

// checkClass is the class check gives every Ingress, so that each is built
// as if it were ours, whatever class it names today.
const checkClass = "restysync-check"

func checkCommand() *cli.Command {
	return &cli.Command{
		Name:  "check",
		Usage: "say, for every Ingress, which annotations restysync supports, refuses or does not know, before you switch",
		Description: "Reads every Ingress from --source (kube; file:PATH, a folder or a file, lists such as\n" +
			"`kubectl get ingress -A -o yaml` writes read item by item; or - for stdin), whatever class it names, and\n" +
			"builds it as restysync would. Each annotation under restysync.io/ or nginx.ingress.kubernetes.io/ is\n" +
			"supported, invalid (supported, but its value is not), missing-object, refused (a snippet with a directive\n" +
			"off the allowlist), unknown (an ingress-nginx key restysync does not support yet), typo (within two edits\n" +
			"of a key ingress-nginx reads, which is suggested) or ignored-by-ingress-nginx. The exit code is 1 when\n" +
			"anything is invalid, refused or unknown, so check can gate a migration in CI; with --strict, typo and\n" +
			"ignored-by-ingress-nginx fail it too. With --configmap, the keys of that ConfigMap are checked the same way.\n" +
			"It fails too when it found no Ingress, on a manifest it cannot read (it may be an Ingress: a v1beta1 one,\n" +
			"a Helm template, port: 80), on an Ingress the agent cannot render nginx.conf with (it would quarantine it)\n" +
			"and on an endpoint address nginx must not reach (loopback, link-local, the pod's own ports). Documents of\n" +
			"other kinds (Deployments, RBAC) are counted on one line, as not Ingress-related.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "source", Required: true, Usage: "kube, file:PATH (a folder or a file) or - (stdin)"},
			&cli.BoolFlag{Name: "strict", Usage: "also fail on keys that do nothing under either controller: typo and ignored-by-ingress-nginx"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: "text or json"},
			&cli.DurationFlag{Name: "timeout", Value: 30 * time.Second, Usage: "how long to wait for the source's first listing"},
			&cli.StringFlag{Name: "kubeconfig", EnvVars: env("KUBECONFIG"),
				Usage: "with --source kube: kubeconfig `FILE` (default: $KUBECONFIG, else ~/.kube/config, else the in-cluster config)"},
			&cli.StringFlag{Name: "context", EnvVars: env("CONTEXT"), Usage: "with --source kube: kubeconfig context"},
			&cli.StringFlag{Name: "namespace", EnvVars: env("NAMESPACE"), Usage: "with --source kube: read one namespace only (default: all)"},
			&cli.StringFlag{Name: "configmap", EnvVars: env("CONFIGMAP"),
				Usage: "also check the keys of this ConfigMap, `NAMESPACE/NAME` (ingress-nginx's controller ConfigMap, or the agent's)"},
			&cli.StringFlag{Name: "tcp-services-configmap", EnvVars: env("TCP_SERVICES_CONFIGMAP"),
				Usage: "also check the entries of this TCP services ConfigMap, `NAMESPACE/NAME`, as ingress-nginx's flag of that name reads it"},
			&cli.StringFlag{Name: "udp-services-configmap", EnvVars: env("UDP_SERVICES_CONFIGMAP"),
				Usage: "also check the entries of this UDP services ConfigMap, `NAMESPACE/NAME`"},
		},
		Action: check,
	}
}

// CheckReport is what check prints with -o json.
type CheckReport struct {
	Ingresses []CheckedIngress `json:"ingresses"`
	// ConfigMap is the check of --configmap, nil without it (check_configmap.go).
	ConfigMap *CheckedConfigMap `json:"configMap,omitempty"`
	// TCPServices and UDPServices are the checks of
	// --tcp-services-configmap and --udp-services-configmap, nil without
	// them (check_services.go).
	TCPServices *CheckedServices `json:"tcpServices,omitempty"`
	UDPServices *CheckedServices `json:"udpServices,omitempty"`
	// Objects are the objects besides the Ingresses and ConfigMaps that
	// fail the check (checkObjects).
	Objects []CheckedObject `json:"objects,omitempty"`
	// NotIngressRelated counts the documents of a folder or file of kinds
	// the source does not read, by "Kind (apiVersion)": passed over.
	NotIngressRelated map[string]int `json:"notIngressRelated,omitempty"`
	Summary           CheckSummary   `json:"summary"`
}

// CheckedObject is an object besides the Ingresses and ConfigMaps that
// check fails on: an endpoint address nginx must not reach (of an
// EndpointSlice, FQDN ones as resolved, or a Service's cluster IP), or,
// from a folder, a manifest that cannot be read (it may be an Ingress).
type CheckedObject struct {
	Object string `json:"object"` // "EndpointSlice namespace/name", "File path#N"
	// Field is what of the object, `endpoints[0].addresses[0] "127.0.0.1"
	// port 80`; "" for a whole document.
	Field  string `json:"field,omitempty"`
	Status string `json:"status"` // refused or invalid
	Reason string `json:"reason"`
}

// CheckedIngress lists the annotations of one Ingress under our prefixes.
type CheckedIngress struct {
	Ingress string `json:"ingress"` // namespace/name
	// Moves says that the Ingress works as it is, as it did under
	// ingress-nginx: each annotation is supported, ignored by ingress-nginx
	// too, or only names an object the source lacks.
	Moves       bool                `json:"moves"`
	Annotations []CheckedAnnotation `json:"annotations"`
	// RenderRefused is why render refuses the Ingress, whose annotations
	// the model accepted ("" when it renders): the agent quarantines it.
	RenderRefused string `json:"renderRefused,omitempty"`
}

// CheckedAnnotation is one annotation and what restysync does with it.
type CheckedAnnotation struct {
	Key string `json:"key"`
	// Status is supported, invalid, missing-object, refused, unknown,
	// typo or ignored-by-ingress-nginx.
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	// Suggestion is the key most likely meant, prefix included: for a
	// typo, and an unknown key under restysync.io/ near a supported one.
	Suggestion string `json:"suggestion,omitempty"`
}

// CheckSummary counts the Ingresses that move and the annotations by status.
type CheckSummary struct {
	Ingresses             int `json:"ingresses"`
	Moves                 int `json:"moves"`
	Supported             int `json:"supported"`
	Invalid               int `json:"invalid"`
	MissingObject         int `json:"missing_object"`
	Refused               int `json:"refused"`
	Unknown               int `json:"unknown"`
	Typo                  int `json:"typo"`
	IgnoredByIngressNginx int `json:"ignored_by_ingress_nginx"`
	// RenderRefused counts the Ingresses render refuses.
	RenderRefused int `json:"render_refused"`
	// NotRead counts the documents that could not be read (each one of
	// Objects): any may be an Ingress nothing checked.
	NotRead int `json:"not_read"`
}

// Statuses check adds to model.AnnotationStatus's: a supported annotation
// whose value Build refused, and one whose value names an object the
// source does not hold (a Secret, a Service).
const (
	annotationInvalid       = model.AnnotationInvalid
	annotationMissingObject = model.AnnotationMissingObject
)

func check(c *cli.Context) error {
	output := c.String("output")
	if output != "text" && output != "json" {
		return fmt.Errorf("--output %q: want text or json", output)
	}
	if c.Duration("timeout") <= 0 {
		return fmt.Errorf("--timeout %s: must be positive", c.Duration("timeout"))
	}
	for _, flag := range []string{"configmap", "tcp-services-configmap", "udp-services-configmap"} {
		if name := c.String(flag); name != "" && !validNamespacedName(name) {
			return fmt.Errorf("--%s %q: want NAMESPACE/NAME", flag, name)
		}
	}
	ctx, cancel := context.WithTimeout(c.Context, c.Duration("timeout"))
	defer cancel()
	snap, read, err := readSource(ctx, c, c.String("source"), true)
	if err != nil {
		return err
	}
	report, problems := checkSnapshot(snap, c.String("configmap"))
	report.NotIngressRelated, read = file.OtherKinds(read)
	report.Objects = checkObjects(read, problems)
	for _, o := range report.Objects {
		if strings.HasPrefix(o.Object, "File ") {
			report.Summary.NotRead++
		}
	}
	if name := c.String("configmap"); name != "" {
		report.ConfigMap = checkConfigMap(name, snap.ConfigMap)
	}
	if name := c.String("tcp-services-configmap"); name != "" {
		report.TCPServices = checkServices(name, corev1.ProtocolTCP, snap.TCPServices, problems)
	}
	if name := c.String("udp-services-configmap"); name != "" {
		report.UDPServices = checkServices(name, corev1.ProtocolUDP, snap.UDPServices, problems)
	}
	if output == "json" {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		if err := enc.Encode(report); err != nil {
			return err
		}
	} else {
		writeCheck(c.App.Writer, report)
		writeCheckConfigMap(c.App.Writer, report.ConfigMap)
		writeCheckServices(c.App.Writer, report.TCPServices)
		writeCheckServices(c.App.Writer, report.UDPServices)
		writeCheckObjects(c.App.Writer, report.Objects)
	}
	if failures := checkFailures(report, c.String("source"), c.Bool("strict")); len(failures) > 0 {
		return cli.Exit("restysync check failed: "+strings.Join(failures, "; "), 1)
	}
	return nil
}

// checkFailures returns why the report fails the check, src being
// --source: each reason, none when it passes. strict fails it on keys
// that do nothing under either controller, too.
func checkFailures(report CheckReport, src string, strict bool) []string {
	var failures []string
	s := report.Summary
	if s.Ingresses == 0 {
		failures = append(failures, fmt.Sprintf("no Ingress found in --source %s: nothing was checked", src))
	}
	if s.NotRead > 0 {
		failures = append(failures, fmt.Sprintf("%d documents cannot be read; an Ingress among them is not checked", s.NotRead))
	}
	if n := len(report.Objects) - s.NotRead; n > 0 {
		failures = append(failures, fmt.Sprintf("%d endpoints are refused", n))
	}
	if cm := report.ConfigMap; cm != nil {
		if why := cm.failure(strict); why != "" {
			failures = append(failures, fmt.Sprintf("ConfigMap %s: %s", cm.ConfigMap, why))
		}
	}
	for _, svc := range []*CheckedServices{report.TCPServices, report.UDPServices} {
		if svc != nil && svc.failure() != "" {
			failures = append(failures, fmt.Sprintf("%s services ConfigMap %s: %s", svc.Protocol, svc.ConfigMap, svc.failure()))
		}
	}
	if s.RenderRefused > 0 {
		failures = append(failures, fmt.Sprintf("nginx.conf cannot be rendered with %d Ingresses; the agent quarantines them", s.RenderRefused))
	}
	return append(failures, statusFailures("annotations", s.Invalid, s.Refused, s.Unknown, s.Typo, s.IgnoredByIngressNginx, strict)...)
}

// statusFailures says why keys (annotations or a ConfigMap's) with these
// counts by status fail the check: any invalid, refused or unknown; with
// strict, any typo or ignored-by-ingress-nginx, which do nothing under
// either controller.
func statusFailures(keys string, invalid, refused, unknown, typo, ignored int, strict bool) []string {
	var why []string
	if invalid+refused+unknown > 0 {
		why = append(why, fmt.Sprintf("%d %s are not supported as written (%d invalid, %d refused, %d unknown)",
			invalid+refused+unknown, keys, invalid, refused, unknown))
	}
	if strict && typo+ignored > 0 {
		why = append(why, fmt.Sprintf("--strict: %d %s do nothing under either controller (%d typo, %d ignored-by-ingress-nginx)",
			typo+ignored, keys, typo, ignored))
	}
	return why
}

// checkTargets are where check lets nginx connect: as the agent in a
// cluster with the chart's ports, whatever the source (a folder of
// manifests is checked for the cluster it will be applied to). The pod's
// own address is not known here.
var checkTargets = model.Targets{PodPorts: []int32{80, 443, 10246, 10254, 10255}}

// checkOptions are the options check builds with, configMap the
// ConfigMap of --configmap ("": none): every Ingress as ours, in a cluster
// (checkTargets), with the agent's defaults and what checkRender assumes.
func checkOptions(configMap string) snapshot.Options {
	settings := checkRender
	settings.Limits = model.DefaultLimits()
	return snapshot.Options{IngressClass: checkClass, EveryIngressOurs: true, Render: settings,
		ConfigMap: configMap, Targets: checkTargets}
}

// checkSnapshot builds every Ingress of held, what the source holds, as
// ours, with the ConfigMap configMap ("": none), and classifies its
// annotations; a supported one is invalid when Build raised a Problem
// naming it. It returns Build's problems too (the ConfigMap's keys are
// checkConfigMap's).
func checkSnapshot(held model.Snapshot, configMap string) (CheckReport, []model.Problem) {
	built := snapshot.Build(held, checkOptions(configMap), nil, nil)
	snap := built.Snapshot
	_, problems := model.Build(snap)
	refused := renderRefused(snap)
	ours := snap.Ingresses.Slice()
	byIngress := map[string][]model.Problem{} // by "namespace/name"
	for _, p := range problems {
		if p.Kind == "Ingress" {
			key := p.Namespace + "/" + p.Name
			byIngress[key] = append(byIngress[key], p)
		}
	}

	var report CheckReport
	slices.SortFunc(ours, func(a, b *networkingv1.Ingress) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	for _, ing := range ours {
		id := ing.Namespace + "/" + ing.Name
		checked := CheckedIngress{Ingress: id, Moves: true, Annotations: []CheckedAnnotation{}}
		for _, key := range slices.Sorted(maps.Keys(ing.Annotations)) {
			a := checkAnnotation(key, ing.Annotations[key], byIngress[id])
			if a.Status == "" {
				continue
			}
			switch a.Status {
			case model.AnnotationSupported:
				report.Summary.Supported++
			case annotationInvalid:
				report.Summary.Invalid++
				checked.Moves = false
			case annotationMissingObject:
				report.Summary.MissingObject++
			case model.AnnotationRefused:
				report.Summary.Refused++
				checked.Moves = false
			case model.AnnotationIgnoredByIngressNginx:
				report.Summary.IgnoredByIngressNginx++
			case model.AnnotationTypo:
				report.Summary.Typo++
			default:
				report.Summary.Unknown++
				checked.Moves = false
			}
			checked.Annotations = append(checked.Annotations, a)
		}
		if err := refused[id]; err != nil {
			checked.RenderRefused = err.Error()
			checked.Moves = false
			report.Summary.RenderRefused++
		}
		if checked.Moves {
			report.Summary.Moves++
		}
		report.Ingresses = append(report.Ingresses, checked)
	}
	report.Summary.Ingresses = len(report.Ingresses)
	if report.Ingresses == nil {
		report.Ingresses = []CheckedIngress{}
	}
	return report, problems
}

// checkRender are the settings check renders nginx.conf with: the agent's
// defaults, with ssl-passthrough on, as the agent runs with
// --enable-ssl-passthrough (ingress-nginx needed its flag of that name
// too), and the ModSecurity module loaded (--load-module of
// ngx_http_modsecurity_module.so): ingress-nginx's image has it built;
// without it, the agent fails those Ingresses closed (503).
var checkRender = render.Settings{SharedDir: "/var/run/restysync", HTTPPort: 80, HTTPSPort: 443,
	SSLPassthrough: true, LoadModules: []string{render.DebianModSecurityModule}}

// renderRefused returns the Ingresses of snap that render refuses, by
// "namespace/name", with render's reason, as the agent finds them before
// it quarantines them (syncer.RenderFailures). A failure no Ingress
// explains is every Ingress's: check's settings are the agent's defaults.
func renderRefused(snap model.Snapshot) map[string]error {
	refused, err := syncer.RenderFailures(snap, checkRender, nil)
	if err != nil {
		refused = map[string]error{}
		for ing := range snap.Ingresses.All() {
			refused[ing.Namespace+"/"+ing.Name] = err
		}
	}
	return refused
}

// checkAnnotation classifies one annotation, key: value, of an Ingress
// whose Build problems are given; Status "" when the key is not one of
// ours. A supported key with an empty value is ignored, by Build as by
// ingress-nginx.
func checkAnnotation(key, value string, problems []model.Problem) CheckedAnnotation {
	status, why, suggestion := model.AnnotationStatusReason(key)
	if status == model.AnnotationSupported && value == "" {
		return CheckedAnnotation{Key: key, Status: model.AnnotationIgnoredByIngressNginx, Reason: model.EmptyAnnotationReason}
	}
	a := CheckedAnnotation{Key: key, Status: status, Reason: why, Suggestion: suggestion}
	if status == model.AnnotationIgnoredByIngressNginx || status == model.AnnotationTypo || status == "" {
		return a
	}
	if status == model.AnnotationUnknown && suggestion != "" {
		// restysync.io/ is ours alone: a typo there is not ingress-nginx's
		// to ignore, and stays unknown.
		a.Reason = "not a restysync annotation; a typo of " + suggestion + "?"
		return a
	}
	p := problemAbout(key, problems)
	if p.Reason == "" {
		return a
	}
	a.Reason = strings.TrimLeft(strings.TrimPrefix(p.Reason, "annotation "+key), ": ")
	if status == model.AnnotationSupported {
		a.Status = annotationInvalid
		switch {
		case p.Refused: // a snippet directive off the allowlist, or snippets off
			a.Status = model.AnnotationRefused
			a.Reason = strings.TrimPrefix(a.Reason, "refused: ")
		case p.Missing != "":
			a.Status = annotationMissingObject
		}
	}
	return a
}

// problemAbout returns the first problem about annotation key.
func problemAbout(key string, problems []model.Problem) model.Problem {
	for _, p := range problems {
		if strings.HasPrefix(p.Reason, "annotation "+key+" ") || strings.HasPrefix(p.Reason, "annotation "+key+":") {
			return p
		}
	}
	return model.Problem{}
}

// checkObjects returns the objects that fail the check besides the
// Ingresses and ConfigMaps: the source's manifests that could not be read
// (not those of a kind it does not read, a Deployment beside the
// Ingresses), and the endpoints Build refused as targets
// (model.Targets.CheckEndpoint).
func checkObjects(read, built []model.Problem) []CheckedObject {
	var out []CheckedObject
	for _, p := range read {
		if p.Kind == "File" && !file.OtherKind(p) {
			out = append(out, CheckedObject{Object: p.Object(), Status: annotationInvalid, Reason: p.Reason})
		}
	}
	for _, p := range built {
		if p.Refused && (p.Kind == "EndpointSlice" || p.Kind == "Service") {
			field, reason, _ := strings.Cut(p.Reason, ": refused: ")
			out = append(out, CheckedObject{Object: p.Object(), Field: field, Status: model.AnnotationRefused, Reason: reason})
		}
	}
	return out
}

func writeCheckObjects(w io.Writer, objects []CheckedObject) {
	for i, o := range objects {
		if i == 0 || objects[i-1].Object != o.Object {
			fmt.Fprintf(w, "\n%s\n", o.Object)
		}
		if o.Field == "" {
			fmt.Fprintf(w, "  %s  %s\n", o.Status, o.Reason)
		} else {
			fmt.Fprintf(w, "  %s  %s  %s\n", o.Field, o.Status, o.Reason)
		}
	}
}

// countsLine writes counts by name as "2 Deployment (apps/v1), 1 Role
// (rbac.authorization.k8s.io/v1)", sorted by name.
func countsLine(counts map[string]int) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%d %s", counts[name], name))
	}
	return strings.Join(parts, ", ")
}

func writeCheck(w io.Writer, r CheckReport) {
	s := r.Summary
	fmt.Fprintf(w, "restysync check: %d Ingresses; annotations: %d supported, %d invalid, %d missing-object, %d refused, %d unknown, %d typo, %d ignored-by-ingress-nginx\n",
		s.Ingresses, s.Supported, s.Invalid, s.MissingObject, s.Refused, s.Unknown, s.Typo, s.IgnoredByIngressNginx)
	if s.NotRead > 0 {
		fmt.Fprintf(w, "Not read: %d documents cannot be read, each named under File below; an Ingress among them is not checked\n", s.NotRead)
	}
	if len(r.NotIngressRelated) > 0 {
		fmt.Fprintf(w, "Not Ingress-related, passed over: %s\n", countsLine(r.NotIngressRelated))
	}
	for _, ing := range r.Ingresses {
		fmt.Fprintf(w, "\nIngress %s\n", ing.Ingress)
		if ing.RenderRefused != "" {
			fmt.Fprintf(w, "  nginx.conf cannot be rendered with it (the agent quarantines it): %s\n", ing.RenderRefused)
		}
		if len(ing.Annotations) == 0 {
			fmt.Fprintln(w, "  no annotations of restysync.io/ or nginx.ingress.kubernetes.io/")
			continue
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, a := range ing.Annotations {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", a.Key, a.Status, a.Reason)
		}
		tw.Flush()
	}
	fmt.Fprintf(w, "\n%d of %d Ingresses move unchanged\n", s.Moves, s.Ingresses)
}
