package packaging

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

const (
	releaseName      = "edge"
	releaseNamespace = "ingress"
)

// valueSets are the value sets every chart test renders: the defaults and
// each option that changes the objects.
var valueSets = []struct {
	name   string
	values map[string]any
}{
	{"defaults", nil},
	{"daemonset", map[string]any{"kind": "DaemonSet"}},
	{"plain-sidecar", map[string]any{"agent": map[string]any{"nativeSidecar": false}}},
	{"nodeport", map[string]any{
		"service":      map[string]any{"type": "NodePort", "nodePorts": map[string]any{"http": 30080, "https": 30443}, "externalTrafficPolicy": "Local"},
		"ingressClass": map[string]any{"default": true},
	}},
	{"clusterip-no-publish", map[string]any{"service": map[string]any{"type": "ClusterIP", "publish": false}}},
	{"config", map[string]any{"config": map[string]any{"data": map[string]any{"use-gzip": "true", "proxy-body-size": "8m"}}}},
	{"no-config", map[string]any{"config": map[string]any{"create": false}}},
	{"stream", streamValues},
	{"hpa", map[string]any{"autoscaling": map[string]any{"enabled": true, "targetMemoryUtilizationPercentage": 75}}},
	{"servicemonitor", map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"}}, "dashboard": map[string]any{"enabled": true}}}},
	{"options", map[string]any{
		"fullnameOverride": "rs",
		"agent": map[string]any{
			"watchNamespace":           "apps",
			"watchIngressWithoutClass": true,
			"defaultSSLCertificate":    "apps/wildcard-tls",
			"extraArgs":                []any{"--kube-api-qps=20"},
			"image":                    map[string]any{"digest": "sha256:" + strings.Repeat("a", 64)},
		},
		"sharedVolume":        map[string]any{"medium": "Memory", "sizeLimit": nil},
		"podDisruptionBudget": map[string]any{"maxUnavailable": "50%"},
		"serviceAccount":      map[string]any{"annotations": map[string]any{"example.com/role": "ingress"}},
		"priorityClassName":   "system-cluster-critical",
		"tolerations":         []any{map[string]any{"key": "dedicated", "operator": "Equal", "value": "ingress", "effect": "NoSchedule"}},
	}},
}

func chartDir() string { return filepath.Join(repoRoot, "charts", "restysync") }

// renderChart renders the chart as `helm template` does (helm's Go SDK,
// client-only dry run: schema validation, templates, NOTES.txt).
func renderChart(values map[string]any) (*release.Release, error) {
	return renderChartIn(values, releaseNamespace)
}

// renderChartIn renders the chart for a release in namespace.
func renderChartIn(values map[string]any, namespace string) (*release.Release, error) {
	return renderChartFor(values, namespace, "v1.37.2")
}

// renderChartFor renders the chart for a cluster of kubeVersion that
// serves apiVersions besides the built-in ones ("group/version/Kind").
func renderChartFor(values map[string]any, namespace, kubeVersion string, apiVersions ...string) (*release.Release, error) {
	ch, err := loader.Load(chartDir())
	if err != nil {
		return nil, fmt.Errorf("loading chart: %w", err)
	}
	install := action.NewInstall(action.NewConfiguration())
	install.DryRunStrategy = action.DryRunClient
	install.ReleaseName = releaseName
	install.Namespace = namespace
	install.Replace = true
	kv, err := common.ParseKubeVersion(kubeVersion)
	if err != nil {
		return nil, err
	}
	install.KubeVersion = kv
	install.APIVersions = apiVersions
	if values == nil {
		values = map[string]any{}
	}
	rel, err := install.Run(ch, values)
	if err != nil {
		return nil, err
	}
	r, ok := rel.(*release.Release)
	if !ok {
		return nil, fmt.Errorf("release is a %T", rel)
	}
	return r, nil
}

// decodeManifests splits a multi-document YAML stream into objects.
func decodeManifests(t *testing.T, manifest string) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	var objs []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return objs
			}
			t.Fatalf("decoding rendered manifest: %v\n%s", err, manifest)
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

func mustRender(t *testing.T, values map[string]any) ([]*unstructured.Unstructured, string) {
	t.Helper()
	rel, err := renderChart(values)
	if err != nil {
		t.Fatalf("rendering chart: %v", err)
	}
	return decodeManifests(t, rel.Manifest), rel.Info.Notes
}

func find(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func convert[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return out
}

// podSpec returns the pod template of the rendered Deployment or DaemonSet.
func podSpec(t *testing.T, objs []*unstructured.Unstructured) corev1.PodSpec {
	t.Helper()
	if d := find(objs, "Deployment"); len(d) == 1 {
		return convert[appsv1.Deployment](t, d[0]).Spec.Template.Spec
	}
	if d := find(objs, "DaemonSet"); len(d) == 1 {
		return convert[appsv1.DaemonSet](t, d[0]).Spec.Template.Spec
	}
	t.Fatal("no single Deployment or DaemonSet rendered")
	return corev1.PodSpec{}
}

// agentContainer returns the agent container and whether it is a native
// sidecar (an init container with restartPolicy Always).
func agentContainer(t *testing.T, spec corev1.PodSpec) (corev1.Container, bool) {
	t.Helper()
	for _, c := range spec.InitContainers {
		if c.Name == "agent" {
			return c, c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		}
	}
	for _, c := range spec.Containers {
		if c.Name == "agent" {
			return c, false
		}
	}
	t.Fatal("no agent container")
	return corev1.Container{}, false
}

func container(t *testing.T, spec corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	for _, c := range spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %s", name)
	return corev1.Container{}
}

// Every value set renders, and the pod is what the design needs: stock
// OpenResty started on the shared dir with nothing baked in, the agent
// beside it (native sidecar unless turned off), a shared process namespace,
// one UID for both containers, probes on both, and the optional objects
// exactly when asked for.
func TestChartRenders(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			objs, notes := mustRender(t, vs.values)
			spec := podSpec(t, objs)

			if !ptrTrue(spec.ShareProcessNamespace) {
				t.Error("shareProcessNamespace is not true: the agent cannot signal nginx")
			}
			agent, native := agentContainer(t, spec)
			nginx := container(t, spec, "openresty")
			wantNative := vs.name != "plain-sidecar"
			if native != wantNative {
				t.Errorf("agent native sidecar = %v, want %v", native, wantNative)
			}
			if !strings.HasPrefix(nginx.Image, "openresty/openresty:") || strings.HasSuffix(nginx.Image, ":latest") {
				t.Errorf("nginx image %s: want the stock openresty/openresty at a pinned tag", nginx.Image)
			}
			start := strings.Join(nginx.Command, " ")
			if !strings.Contains(start, "openresty -p /var/run/restysync/ -c nginx.conf") {
				t.Errorf("nginx command %q does not start openresty on the shared dir", start)
			}
			if !native && !strings.Contains(start, "[ -s /var/run/restysync/nginx.conf ]") {
				t.Errorf("plain sidecar: nginx command %q does not wait for the agent's nginx.conf", start)
			}
			if len(nginx.Args) != 0 {
				t.Errorf("nginx args %q: want none", nginx.Args)
			}

			// One emptyDir, mounted at the shared dir in both containers.
			if len(spec.Volumes) != 1 || spec.Volumes[0].EmptyDir == nil {
				t.Fatalf("volumes %+v: want one emptyDir", spec.Volumes)
			}
			for _, c := range []corev1.Container{agent, nginx} {
				if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].Name != spec.Volumes[0].Name || c.VolumeMounts[0].MountPath != "/var/run/restysync" {
					t.Errorf("%s mounts %+v: want the shared emptyDir at /var/run/restysync", c.Name, c.VolumeMounts)
				}
			}

			// Same UID for both (signalling without CAP_KILL), non-root,
			// every capability dropped, read-only root filesystems.
			psc := spec.SecurityContext
			if psc == nil || psc.RunAsUser == nil || *psc.RunAsUser == 0 || !ptrTrue(psc.RunAsNonRoot) {
				t.Fatalf("pod securityContext %+v: want a non-root runAsUser", psc)
			}
			for _, c := range []corev1.Container{agent, nginx} {
				sc := c.SecurityContext
				if sc == nil || !ptrTrue(sc.RunAsNonRoot) || !ptrTrue(sc.ReadOnlyRootFilesystem) || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
					t.Errorf("%s securityContext %+v: want runAsNonRoot, readOnlyRootFilesystem, no privilege escalation", c.Name, sc)
					continue
				}
				if sc.RunAsUser != nil && *sc.RunAsUser != *psc.RunAsUser {
					t.Errorf("%s runs as %d, the pod as %d: the agent could not signal nginx", c.Name, *sc.RunAsUser, *psc.RunAsUser)
				}
				if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
					t.Errorf("%s capabilities %+v: want drop ALL, add none", c.Name, sc.Capabilities)
				}
			}

			// Probes: the agent's /healthz and /readyz?serving (a refused
			// ConfigMap, shared by every replica, takes none out of the
			// Service) on the metrics port, nginx's status server's /healthz.
			for probe, want := range map[*corev1.Probe]string{agent.StartupProbe: "/healthz", agent.LivenessProbe: "/healthz", agent.ReadinessProbe: "/readyz?serving"} {
				if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != want || probe.HTTPGet.Port.String() != "metrics" {
					t.Errorf("agent probe %+v: want GET %s on port metrics", probe, want)
				}
			}
			if !hasPort(agent, "metrics", 10254) {
				t.Errorf("agent ports %+v: want metrics 10254", agent.Ports)
			}
			checkAdminNotExposed(t, agent)
			for _, probe := range []*corev1.Probe{nginx.LivenessProbe, nginx.ReadinessProbe} {
				if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != "/healthz" || probe.HTTPGet.Port.String() != "status" {
					t.Errorf("nginx probe %+v: want GET /healthz on port status", probe)
				}
			}
			if !hasPort(nginx, "http", 8080) || !hasPort(nginx, "https", 8443) || !hasPort(nginx, "status", 10246) {
				t.Errorf("nginx ports %+v: want http 8080, https 8443, status 10246", nginx.Ports)
			}
			if !slices.Contains(agent.Args, "--status-port=10246") {
				t.Errorf("agent args %v: want --status-port=10246, the port of nginx's probes", agent.Args)
			}

			// Optional objects.
			wantKinds := map[string]int{
				"ServiceAccount": 1, "ClusterRole": 1, "ClusterRoleBinding": 1, "Role": 1, "RoleBinding": 1,
				"IngressClass": 1, "Service": 2, "PodDisruptionBudget": 1,
				"HorizontalPodAutoscaler": 0, "ServiceMonitor": 0, "Deployment": 1, "DaemonSet": 0,
				"ConfigMap": 1, // the agent's settings (config.create)
			}
			switch vs.name {
			case "no-config":
				wantKinds["ConfigMap"] = 0
			case "stream":
				wantKinds["ConfigMap"] = 3 // settings, TCP services, UDP services
			case "daemonset":
				wantKinds["Deployment"], wantKinds["DaemonSet"], wantKinds["PodDisruptionBudget"] = 0, 1, 0
			case "hpa":
				wantKinds["HorizontalPodAutoscaler"] = 1
			case "servicemonitor":
				wantKinds["ServiceMonitor"], wantKinds["ConfigMap"] = 1, 2
				var dashboard string
				for _, cm := range find(objs, "ConfigMap") {
					if data, ok, _ := unstructured.NestedString(cm.Object, "data", "restysync.json"); ok {
						dashboard = data
					}
				}
				if !json.Valid([]byte(dashboard)) || !strings.Contains(dashboard, "restysync_syncs_total") {
					t.Errorf("no dashboard ConfigMap holds the dashboard JSON")
				}
			}
			for kind, n := range wantKinds {
				if got := len(find(objs, kind)); got != n {
					t.Errorf("%d %s rendered, want %d", got, kind, n)
				}
			}
			for _, o := range objs {
				if len(o.GetName()) > 63 {
					t.Errorf("%s name %q is longer than 63", o.GetKind(), o.GetName())
				}
			}

			ic := find(objs, "IngressClass")[0]
			if ctrl, _, _ := unstructured.NestedString(ic.Object, "spec", "controller"); ctrl != "restysync.io/ingress-controller" {
				t.Errorf("IngressClass controller %q", ctrl)
			}
			isDefault := ic.GetAnnotations()["ingressclass.kubernetes.io/is-default-class"] == "true"
			if isDefault != (vs.name == "nodeport") {
				t.Errorf("IngressClass default = %v", isDefault)
			}
			svc := serviceNamed(t, objs, fullname(vs.name))
			wantType := map[string]corev1.ServiceType{"nodeport": "NodePort", "clusterip-no-publish": "ClusterIP"}[vs.name]
			if wantType == "" {
				wantType = "LoadBalancer"
			}
			if svc.Spec.Type != wantType {
				t.Errorf("Service type %s, want %s", svc.Spec.Type, wantType)
			}
			if vs.name == "nodeport" && (svc.Spec.Ports[0].NodePort != 30080 || svc.Spec.ExternalTrafficPolicy != "Local") {
				t.Errorf("NodePort Service %+v", svc.Spec)
			}
			if vs.name == "hpa" {
				if d := find(objs, "Deployment")[0]; hasField(d, "spec", "replicas") {
					t.Error("Deployment sets replicas while the HPA owns them")
				}
			}

			if !strings.Contains(notes, "ingressClassName: restysync") {
				t.Errorf("NOTES.txt does not say how to use the class:\n%s", notes)
			}
		})
	}
}

func fullname(set string) string {
	if set == "options" {
		return "rs"
	}
	return releaseName + "-restysync"
}

func serviceNamed(t *testing.T, objs []*unstructured.Unstructured, name string) *corev1.Service {
	t.Helper()
	for _, o := range find(objs, "Service") {
		if o.GetName() == name {
			return convert[corev1.Service](t, o)
		}
	}
	t.Fatalf("no Service %s", name)
	return nil
}

func hasField(u *unstructured.Unstructured, path ...string) bool {
	_, found, _ := unstructured.NestedFieldNoCopy(u.Object, path...)
	return found
}

func hasPort(c corev1.Container, name string, port int32) bool {
	for _, p := range c.Ports {
		if p.Name == name && p.ContainerPort == port {
			return true
		}
	}
	return false
}

func ptrTrue(b *bool) bool { return b != nil && *b }

// values.schema.json turns bad values away before anything renders, with a
// message that names the value.
func TestChartSchemaRejectsBadValues(t *testing.T) {
	cases := []struct {
		name   string
		values map[string]any
		want   []string // all in the error
	}{
		{"negative replicas", map[string]any{"replicaCount": -1}, []string{"replicaCount", "minimum"}},
		{"bogus service type", map[string]any{"service": map[string]any{"type": "Bogus"}}, []string{"service/type", "LoadBalancer"}},
		{"bogus kind", map[string]any{"kind": "StatefulSet"}, []string{"kind", "DaemonSet"}},
		{"unknown value", map[string]any{"replicas": 3}, []string{"replicas"}},
		{"log level", map[string]any{"agent": map[string]any{"logLevel": "loud"}}, []string{"agent/logLevel"}},
		{"port out of range", map[string]any{"containerPorts": map[string]any{"http": 70000}}, []string{"containerPorts/http"}},
		{"relative shared dir", map[string]any{"sharedDir": "run/restysync"}, []string{"sharedDir"}},
		{"extra arg not a flag", map[string]any{"agent": map[string]any{"extraArgs": []any{"kube"}}}, []string{"agent/extraArgs"}},
		{"worker processes", map[string]any{"openresty": map[string]any{"workerProcesses": "many"}}, []string{"openresty/workerProcesses"}},
		{"config value a map", map[string]any{"config": map[string]any{"data": map[string]any{"keep-alive": map[string]any{"seconds": 75}}}}, []string{"config/data"}},
		{"config value a list", map[string]any{"config": map[string]any{"data": map[string]any{"proxy-set-headers": []any{"a"}}}}, []string{"config/data"}},
		{"source range not a CIDR", map[string]any{"service": map[string]any{"loadBalancerSourceRanges": []any{"office"}}}, []string{"service/loadBalancerSourceRanges"}},
		{"tcp key not a port", map[string]any{"tcp": map[string]any{"ssh": "default/git:22"}}, []string{"tcp", "ssh"}},
		{"tcp port out of range", map[string]any{"tcp": map[string]any{"70000": "default/echo:80"}}, []string{"tcp", "70000"}},
		{"tcp port leading zero", map[string]any{"tcp": map[string]any{"09000": "default/echo:80"}}, []string{"tcp", "09000"}},
		{"tcp target without port", map[string]any{"tcp": map[string]any{"9000": "default/echo"}}, []string{"tcp/9000"}},
		{"tcp target bad flag", map[string]any{"tcp": map[string]any{"9000": "default/echo:80:PROXY:PROXY:PROXY"}}, []string{"tcp/9000"}},
		{"tcp target not a string", map[string]any{"tcp": map[string]any{"9000": 80}}, []string{"tcp/9000"}},
		{"udp with PROXY", map[string]any{"udp": map[string]any{"53": "kube-system/dns:53:PROXY"}}, []string{"udp/53"}},
		{"passthrough not a bool", map[string]any{"agent": map[string]any{"enableSSLPassthrough": "yes"}}, []string{"agent/enableSSLPassthrough"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := renderChart(c.values)
			if err == nil {
				t.Fatalf("values %v rendered; want a schema error", c.values)
			}
			msg := err.Error()
			if !strings.Contains(msg, "values don't meet the specifications of the schema") {
				t.Errorf("error is not a schema error: %v", err)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
			t.Logf("%s: %v", c.name, err)
		})
	}
}

// config: the chart creates the agent's ConfigMap with config.data and
// points --configmap at it; with create false there is neither.
func TestChartConfigMap(t *testing.T) {
	objs, _ := mustRender(t, map[string]any{"config": map[string]any{"data": map[string]any{"use-gzip": "true", "proxy-body-size": "8m"}}})
	cms := find(objs, "ConfigMap")
	if len(cms) != 1 {
		t.Fatalf("%d ConfigMaps rendered, want 1", len(cms))
	}
	cm := convert[corev1.ConfigMap](t, cms[0])
	if want := map[string]string{"use-gzip": "true", "proxy-body-size": "8m"}; !maps.Equal(cm.Data, want) {
		t.Errorf("ConfigMap data %v, want %v", cm.Data, want)
	}
	agent, _ := agentContainer(t, podSpec(t, objs))
	if want := "--configmap=" + cm.Namespace + "/" + cm.Name; !slices.Contains(agent.Args, want) {
		t.Errorf("agent args %q lack %s", agent.Args, want)
	}

	// `--set config.data.keep-alive=30` gives a number, `--set
	// config.data.use-gzip=true` a boolean: each is written as its string.
	objs, _ = mustRender(t, map[string]any{"config": map[string]any{"data": map[string]any{"keep-alive": int64(30), "use-gzip": true, "proxy-connect-timeout": 2.5}}})
	cm = convert[corev1.ConfigMap](t, find(objs, "ConfigMap")[0])
	if want := map[string]string{"keep-alive": "30", "use-gzip": "true", "proxy-connect-timeout": "2.5"}; !maps.Equal(cm.Data, want) {
		t.Errorf("ConfigMap data %v, want %v", cm.Data, want)
	}

	objs, _ = mustRender(t, map[string]any{"config": map[string]any{"create": false}})
	if cms := find(objs, "ConfigMap"); len(cms) != 0 {
		t.Errorf("config.create false rendered %d ConfigMaps", len(cms))
	}
	agent, _ = agentContainer(t, podSpec(t, objs))
	for _, arg := range agent.Args {
		if strings.HasPrefix(arg, "--configmap") {
			t.Errorf("config.create false: agent has %s", arg)
		}
	}
}

// The chart's RBAC is exactly examples/kubernetes/rbac.yaml, the minimum
// the agent's own tests prove it needs, with the names and namespace of the
// release.
func TestChartRBACMatchesExample(t *testing.T) {
	objs, _ := mustRender(t, nil)
	raw, err := os.ReadFile(filepath.Join(repoRoot, "examples", "kubernetes", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	example := decodeManifests(t, string(bytes.TrimSpace(raw)))
	for _, kind := range []string{"ClusterRole", "Role"} {
		want := convert[rbacv1.ClusterRole](t, withKind(find(example, kind)[0], "ClusterRole")).Rules
		got := convert[rbacv1.ClusterRole](t, withKind(find(objs, kind)[0], "ClusterRole")).Rules
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s rules differ from examples/kubernetes/rbac.yaml:\n got %+v\nwant %+v", kind, got, want)
		}
	}
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		b := convert[rbacv1.RoleBinding](t, withKind(find(objs, kind)[0], "RoleBinding"))
		sa := find(objs, "ServiceAccount")[0]
		if len(b.Subjects) != 1 || b.Subjects[0].Kind != "ServiceAccount" || b.Subjects[0].Name != sa.GetName() || b.Subjects[0].Namespace != releaseNamespace {
			t.Errorf("%s subjects %+v: want the ServiceAccount %s/%s", kind, b.Subjects, releaseNamespace, sa.GetName())
		}
		if b.RoleRef.Name != find(objs, strings.TrimSuffix(kind, "Binding"))[0].GetName() {
			t.Errorf("%s refers to %s", kind, b.RoleRef.Name)
		}
	}
	if r := find(objs, "Role")[0]; r.GetNamespace() != releaseNamespace {
		t.Errorf("Role in namespace %q, want the release namespace", r.GetNamespace())
	}
}

// withKind lets Role and ClusterRole (same fields) convert into one type.
func withKind(u *unstructured.Unstructured, kind string) *unstructured.Unstructured {
	c := u.DeepCopy()
	c.SetKind(kind)
	return c
}

// Native sidecars need Kubernetes 1.29: on an older cluster the chart
// refuses to render one (the API server would drop restartPolicy and the
// agent would block the pod as a plain init container) and says what to set.
func TestChartNativeSidecarNeedsKube129(t *testing.T) {
	_, err := renderChartFor(nil, releaseNamespace, "v1.28.9")
	if err == nil || !strings.Contains(err.Error(), "agent.nativeSidecar=false") {
		t.Fatalf("rendering for 1.28 with a native sidecar: %v; want an error naming agent.nativeSidecar=false", err)
	}
	if _, err := renderChartFor(map[string]any{"agent": map[string]any{"nativeSidecar": false}}, releaseNamespace, "v1.28.9"); err != nil {
		t.Fatalf("plain sidecar on 1.28: %v", err)
	}
}

// checkAdminNotExposed proves that the pod network reaches only /metrics,
// /healthz and /readyz of the agent: the port the probes, the container
// port and the metrics Service use is --metrics-probes-address's, which
// serves nothing else, and the full admin server (/debug/state, every
// tenant's configuration) listens on loopback. The agent learns the pod's
// own address from POD_IP, so that no Ingress can point nginx at it.
func checkAdminNotExposed(t *testing.T, agent corev1.Container) {
	t.Helper()
	var probes, admin string
	for _, a := range agent.Args {
		if v, ok := strings.CutPrefix(a, "--metrics-probes-address="); ok {
			probes = v
		}
		if v, ok := strings.CutPrefix(a, "--metrics-address="); ok {
			admin = v
		}
	}
	if probes != "0.0.0.0:10254" {
		t.Errorf("agent args %v: want --metrics-probes-address=0.0.0.0:10254, the listener of /metrics, /healthz and /readyz alone", agent.Args)
	}
	host, _, err := net.SplitHostPort(admin)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		t.Errorf("agent args %v: want --metrics-address on loopback: its /debug/state shows every tenant's configuration", agent.Args)
	}
	for _, p := range agent.Ports {
		if admin != "" && strings.HasSuffix(admin, fmt.Sprintf(":%d", p.ContainerPort)) {
			t.Errorf("agent port %+v is the admin server's", p)
		}
	}
	podIP := false
	for _, e := range agent.Env {
		if e.Name == "POD_IP" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP" {
			podIP = true
		}
	}
	if !podIP {
		t.Errorf("agent env %+v: want POD_IP from status.podIP (--pod-ip)", agent.Env)
	}
}

// A platform's allowed networks reach the agent as one flag.
func TestChartAllowInternalNetworks(t *testing.T) {
	objs, _ := mustRender(t, map[string]any{"agent": map[string]any{"allowInternalNetworks": []any{"127.0.0.0/8", "169.254.0.0/16"}}})
	agent, _ := agentContainer(t, podSpec(t, objs))
	if !slices.Contains(agent.Args, "--allow-internal-networks=127.0.0.0/8,169.254.0.0/16") {
		t.Errorf("agent args %v: want --allow-internal-networks=127.0.0.0/8,169.254.0.0/16", agent.Args)
	}
	objs, _ = mustRender(t, nil)
	agent, _ = agentContainer(t, podSpec(t, objs))
	for _, a := range agent.Args {
		if strings.HasPrefix(a, "--allow-internal-networks") {
			t.Errorf("agent args %v: want no --allow-internal-networks by default", agent.Args)
		}
	}
}

// service.loadBalancerSourceRanges (ingress-nginx's
// controller.service.loadBalancerSourceRanges) reaches a LoadBalancer
// Service; other types have no load balancer to restrict.
func TestChartLoadBalancerSourceRanges(t *testing.T) {
	ranges := []any{"10.0.0.0/8", "2001:db8::/32"}
	objs, _ := mustRender(t, map[string]any{"service": map[string]any{"loadBalancerSourceRanges": ranges}})
	svc := serviceNamed(t, objs, fullname(""))
	if want := []string{"10.0.0.0/8", "2001:db8::/32"}; !slices.Equal(svc.Spec.LoadBalancerSourceRanges, want) {
		t.Errorf("Service loadBalancerSourceRanges %v, want %v", svc.Spec.LoadBalancerSourceRanges, want)
	}
	objs, _ = mustRender(t, nil)
	if svc := serviceNamed(t, objs, fullname("")); len(svc.Spec.LoadBalancerSourceRanges) != 0 {
		t.Errorf("default Service loadBalancerSourceRanges %v, want none", svc.Spec.LoadBalancerSourceRanges)
	}
	objs, _ = mustRender(t, map[string]any{"service": map[string]any{"type": "ClusterIP", "loadBalancerSourceRanges": ranges}})
	if svc := serviceNamed(t, objs, fullname("")); len(svc.Spec.LoadBalancerSourceRanges) != 0 {
		t.Errorf("ClusterIP Service loadBalancerSourceRanges %v, want none", svc.Spec.LoadBalancerSourceRanges)
	}
}

// A values file pasted from ingress-nginx's chart (everything under
// controller:) is refused with a pointer to the chart README's table that
// maps its keys, and that table names each key users set most.
func TestChartRefusesIngressNginxValues(t *testing.T) {
	pasted := map[string]any{"controller": map[string]any{
		"replicaCount": 3,
		"config":       map[string]any{"use-gzip": "true"},
		"service":      map[string]any{"loadBalancerSourceRanges": []any{"10.0.0.0/8"}},
	}}
	_, err := renderChart(pasted)
	if err == nil {
		t.Fatal("values with controller: rendered; want an error pointing at the mapping table")
	}
	const table = "ingress-nginx chart → restysync chart"
	for _, want := range []string{"controller:", table, "charts/restysync/README.md", "controller.config → config.data"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	t.Logf("controller: %v", err)

	readme, err := os.ReadFile(filepath.Join(chartDir(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, found := strings.Cut(string(readme), "## "+table+"\n")
	if !found {
		t.Fatalf("charts/restysync/README.md has no section %q", table)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	for _, key := range []string{
		"controller.ingressClassResource", "controller.config", "controller.service.type",
		"controller.service.loadBalancerSourceRanges", "controller.service.annotations",
		"controller.metrics.serviceMonitor", "controller.replicaCount", "controller.resources",
		"controller.extraArgs", "controller.admissionWebhooks",
	} {
		if !strings.Contains(section, "`"+key) {
			t.Errorf("the table %q has no row for %s", table, key)
		}
	}
	// Every restysync value the table names exists in values.yaml.
	known := map[string]bool{}
	docs, _ := chartValueDocs(t)
	for _, d := range docs {
		known[d.key] = true
	}
	valueKey := regexp.MustCompile("`([a-z][a-zA-Z0-9]*(?:\\.[a-zA-Z0-9]+)+)`")
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`controller.") {
			continue
		}
		for _, m := range valueKey.FindAllStringSubmatch(cells[2], -1) {
			if !known[m[1]] {
				t.Errorf("the table names %s, which values.yaml does not have", m[1])
			}
		}
	}
}
