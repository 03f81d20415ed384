package packaging

import (
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

func sidecarDir() string { return filepath.Join(repoRoot, "examples", "kubernetes", "sidecar") }

// buildSidecar runs `kustomize build examples/kubernetes/sidecar` with the
// kustomize Go API.
func buildSidecar(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	return buildKustomization(t, sidecarDir())
}

func sidecarStreamDir() string {
	return filepath.Join(repoRoot, "examples", "kubernetes", "sidecar-stream")
}

// buildSidecarStream builds the optional overlay sidecar-stream.
func buildSidecarStream(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	return buildKustomization(t, sidecarStreamDir())
}

func buildKustomization(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resMap, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build: %v", err)
	}
	out, err := resMap.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return decodeManifests(t, string(out))
}

// The kustomize patch adds the agent to the sample OpenResty Deployment:
// the native sidecar, the shared volume in both containers, the shared
// process namespace, one UID, nginx started on the shared dir; and it moves
// the RBAC into the Deployment's namespace. plain.yaml, the same Deployment
// written out by hand, is what the patch produces.
func TestSidecarPatch(t *testing.T) {
	objs := buildSidecar(t)
	deps := find(objs, "Deployment")
	if len(deps) != 1 {
		t.Fatalf("%d Deployments", len(deps))
	}
	d := convert[appsv1.Deployment](t, deps[0])
	spec := d.Spec.Template.Spec
	if !ptrTrue(spec.ShareProcessNamespace) {
		t.Error("shareProcessNamespace not set")
	}
	if spec.ServiceAccountName != "restysync" {
		t.Errorf("serviceAccountName %q", spec.ServiceAccountName)
	}
	agent, native := agentContainer(t, spec)
	if !native {
		t.Error("agent is not a native sidecar")
	}
	checkAdminNotExposed(t, agent)
	nginx := container(t, spec, "openresty")
	if nginx.Image != "openresty/openresty:1.27.1.2-0-alpine" {
		t.Errorf("the patch changed the nginx image to %s", nginx.Image)
	}
	want := []string{"openresty", "-p", "/var/run/restysync/", "-c", "nginx.conf", "-e", "stderr", "-g", "daemon off;"}
	if !reflect.DeepEqual(nginx.Command, want) {
		t.Errorf("nginx command %q, want %q", nginx.Command, want)
	}
	if len(nginx.Ports) != 2 || nginx.Ports[0].ContainerPort != 8080 || nginx.Ports[1].ContainerPort != 8443 {
		t.Errorf("nginx ports %+v: want only 8080 and 8443 (port 80 replaced)", nginx.Ports)
	}
	if nginx.Resources.Requests.Cpu().String() != "100m" {
		t.Error("the patch lost the existing container's resources")
	}
	if len(spec.Volumes) != 1 || spec.Volumes[0].EmptyDir == nil {
		t.Fatalf("volumes %+v", spec.Volumes)
	}
	for _, c := range []string{agent.Name, nginx.Name} {
		cc := agent
		if c == nginx.Name {
			cc = nginx
		}
		if len(cc.VolumeMounts) != 1 || cc.VolumeMounts[0].Name != spec.Volumes[0].Name || cc.VolumeMounts[0].MountPath != "/var/run/restysync" {
			t.Errorf("%s mounts %+v", c, cc.VolumeMounts)
		}
	}
	if sc := spec.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 65532 {
		t.Errorf("pod securityContext %+v: want runAsUser 65532", sc)
	}
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			continue
		}
		if ns := o.GetNamespace(); ns != "" && ns != "web" {
			t.Errorf("%s %s in namespace %s, want web", o.GetKind(), o.GetName(), ns)
		}
	}
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		for _, b := range find(objs, kind) {
			subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
			for _, s := range subjects {
				if ns := s.(map[string]any)["namespace"]; ns != "web" {
					t.Errorf("%s subject namespace %v, want web (the ServiceAccount's)", kind, ns)
				}
			}
		}
	}

	// plain.yaml is the same Deployment written out.
	raw, err := os.ReadFile(filepath.Join(sidecarDir(), "plain.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	plain := find(decodeManifests(t, string(raw)), "Deployment")
	if len(plain) != 1 {
		t.Fatalf("plain.yaml: %d Deployments", len(plain))
	}
	if p := convert[appsv1.Deployment](t, plain[0]); !reflect.DeepEqual(p.Spec, d.Spec) {
		t.Errorf("plain.yaml differs from what the patch produces:\n plain %+v\npatched %+v", p.Spec.Template.Spec, d.Spec.Template.Spec)
	}
}

// sidecar/rbac.yaml (kustomize loads no file outside the kustomization's
// folder) is ../rbac.yaml without its Namespace.
func TestSidecarRBACMatchesExample(t *testing.T) {
	read := func(path string) []*unstructured.Unstructured {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return decodeManifests(t, string(raw))
	}
	var want []*unstructured.Unstructured
	for _, o := range read(filepath.Join(repoRoot, "examples", "kubernetes", "rbac.yaml")) {
		if o.GetKind() != "Namespace" {
			want = append(want, o)
		}
	}
	got := read(filepath.Join(sidecarDir(), "rbac.yaml"))
	if !reflect.DeepEqual(got, want) {
		t.Errorf("examples/kubernetes/sidecar/rbac.yaml differs from examples/kubernetes/rbac.yaml (less its Namespace)")
	}
}

// sidecar-stream adds to the sidecar the TCP and UDP services ConfigMaps,
// points the agent at them and turns SSL passthrough on (through the
// flags' environment variables, after POD_NAMESPACE, which they expand),
// and opens one port per service on the nginx container with its
// protocol; everything else is the sidecar's, unchanged.
func TestSidecarStream(t *testing.T) {
	objs := buildSidecarStream(t)
	base := convert[appsv1.Deployment](t, find(buildSidecar(t), "Deployment")[0])
	deps := find(objs, "Deployment")
	if len(deps) != 1 {
		t.Fatalf("%d Deployments", len(deps))
	}
	d := convert[appsv1.Deployment](t, deps[0])
	spec := d.Spec.Template.Spec
	agent, native := agentContainer(t, spec)
	if !native {
		t.Error("agent is not a native sidecar")
	}
	nginx := container(t, spec, "openresty")

	// The ConfigMaps, in the Deployment's namespace, and the env pointing
	// at them once the kubelet expanded $(POD_NAMESPACE).
	const ns = "web"
	wantEnv := map[string]string{
		"RESTYSYNC_TCP_SERVICES_CONFIGMAP": "$(POD_NAMESPACE)/restysync-tcp",
		"RESTYSYNC_UDP_SERVICES_CONFIGMAP": "$(POD_NAMESPACE)/restysync-udp",
		"RESTYSYNC_ENABLE_SSL_PASSTHROUGH": "true",
	}
	podNamespace := slices.IndexFunc(agent.Env, func(e corev1.EnvVar) bool { return e.Name == "POD_NAMESPACE" })
	for name, want := range wantEnv {
		i := slices.IndexFunc(agent.Env, func(e corev1.EnvVar) bool { return e.Name == name })
		if i < 0 || agent.Env[i].Value != want {
			t.Errorf("agent env %s: want %q (env %+v)", name, want, agent.Env)
			continue
		}
		if strings.Contains(want, "$(POD_NAMESPACE)") && (podNamespace < 0 || podNamespace > i) {
			t.Errorf("agent env %s refers to POD_NAMESPACE, which is not defined before it", name)
		}
	}
	protocols := map[string]corev1.Protocol{"restysync-tcp": corev1.ProtocolTCP, "restysync-udp": corev1.ProtocolUDP}
	var wantPorts []corev1.ContainerPort
	for _, name := range []string{"restysync-tcp", "restysync-udp"} {
		var cm *corev1.ConfigMap
		for _, o := range find(objs, "ConfigMap") {
			if o.GetName() == name {
				cm = convert[corev1.ConfigMap](t, o)
			}
		}
		if cm == nil {
			t.Fatalf("no ConfigMap %s", name)
		}
		if cm.Namespace != ns {
			t.Errorf("ConfigMap %s in namespace %q, want %s", name, cm.Namespace, ns)
		}
		if len(cm.Data) == 0 {
			t.Errorf("ConfigMap %s has no services", name)
		}
		for _, key := range slices.Sorted(maps.Keys(cm.Data)) {
			port, err := strconv.ParseInt(key, 10, 32)
			if err != nil || port <= 1024 || port > 65535 {
				t.Errorf("ConfigMap %s key %q: want a port above 1024 (nginx is not root)", name, key)
				continue
			}
			proto := protocols[name]
			wantPorts = append(wantPorts, corev1.ContainerPort{Name: strings.ToLower(string(proto)) + "-" + key, ContainerPort: int32(port), Protocol: proto})
		}
	}

	// nginx: the sidecar's ports, then one per service.
	for _, p := range wantPorts {
		if !slices.Contains(nginx.Ports, p) {
			t.Errorf("nginx ports %+v lack %+v", nginx.Ports, p)
		}
	}
	if len(nginx.Ports) != 2+len(wantPorts) {
		t.Errorf("nginx ports %+v: want http, https and %d more", nginx.Ports, len(wantPorts))
	}

	// The ClusterRole lets the agent watch the ConfigMaps (by name).
	var watches bool
	for _, r := range find(objs, "ClusterRole") {
		role := convert[rbacv1.ClusterRole](t, r)
		for _, rule := range role.Rules {
			if slices.Contains(rule.APIGroups, "") && slices.Contains(rule.Resources, "configmaps") &&
				slices.Contains(rule.Verbs, "list") && slices.Contains(rule.Verbs, "watch") {
				watches = true
			}
		}
	}
	if !watches {
		t.Errorf("no ClusterRole grants list and watch on configmaps")
	}

	// Without the additions, the Deployment is the sidecar's.
	stripped := d.DeepCopy()
	sspec := &stripped.Spec.Template.Spec
	for i := range sspec.InitContainers {
		sspec.InitContainers[i].Env = slices.DeleteFunc(sspec.InitContainers[i].Env, func(e corev1.EnvVar) bool { _, ok := wantEnv[e.Name]; return ok })
	}
	for i := range sspec.Containers {
		sspec.Containers[i].Ports = slices.DeleteFunc(sspec.Containers[i].Ports, func(p corev1.ContainerPort) bool { return slices.Contains(wantPorts, p) })
	}
	// (The patch's env entries come first: POD_NAMESPACE moves up.)
	byName := func(a, b corev1.EnvVar) int { return strings.Compare(a.Name, b.Name) }
	for _, s := range []*corev1.PodSpec{sspec, &base.Spec.Template.Spec} {
		for i := range s.InitContainers {
			slices.SortFunc(s.InitContainers[i].Env, byName)
		}
	}
	if !reflect.DeepEqual(stripped.Spec, base.Spec) {
		t.Errorf("sidecar-stream changes more than the agent's env and nginx's ports:\n stream %+v\nsidecar %+v", sspec, base.Spec.Template.Spec)
	}
	if n, want := len(objs), len(buildSidecar(t))+2; n != want {
		t.Errorf("%d objects, want the sidecar's and the two ConfigMaps (%d)", n, want)
	}
}

// The sidecar example takes the Deployment and its nginx container as they
// are named: a copy whose Deployment is "shop" with a container "nginx",
// and whose agent-sidecar.yaml has only its NGINX CONTAINER line changed,
// builds into that Deployment with the agent added and the one nginx
// container patched (no second container, no other object renamed). The
// stream overlay, with its own NGINX CONTAINER line changed, follows.
func TestSidecarNames(t *testing.T) {
	root := t.TempDir()
	for _, dir := range []string{"sidecar", "sidecar-stream"} {
		src := filepath.Join(repoRoot, "examples", "kubernetes", dir)
		entries, err := os.ReadDir(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			raw, err := os.ReadFile(filepath.Join(src, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			text := string(raw)
			switch e.Name() {
			case "deployment.yaml": // stands for the user's own Deployment
				text = strings.Replace(text, "  name: web\n", "  name: shop\n", 1)
				text = strings.Replace(text, "- name: openresty\n", "- name: nginx\n", 1)
			case "agent-sidecar.yaml", "agent-stream.yaml":
				line := regexp.MustCompile(`(?m)^(\s+- name: )openresty(\s+# NGINX CONTAINER.*)$`)
				if n := len(line.FindAllString(text, -1)); n != 1 {
					t.Fatalf("%s/%s: %d NGINX CONTAINER lines, want exactly 1", dir, e.Name(), n)
				}
				text = line.ReplaceAllString(text, "${1}nginx${2}")
			}
			if err := os.WriteFile(filepath.Join(root, dir, e.Name()), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}

	for _, dir := range []string{"sidecar", "sidecar-stream"} {
		objs := buildKustomization(t, filepath.Join(root, dir))
		deps := find(objs, "Deployment")
		if len(deps) != 1 || deps[0].GetName() != "shop" {
			t.Fatalf("%s: Deployments %v, want the one named shop", dir, deps)
		}
		spec := convert[appsv1.Deployment](t, deps[0]).Spec.Template.Spec
		if len(spec.Containers) != 1 || spec.Containers[0].Name != "nginx" {
			t.Fatalf("%s: containers %+v, want only nginx (patched in place)", dir, spec.Containers)
		}
		nginx := spec.Containers[0]
		if nginx.Image != "openresty/openresty:1.27.1.2-0-alpine" || len(nginx.Command) == 0 || nginx.Command[0] != "openresty" {
			t.Errorf("%s: nginx container image %s command %q: want the user's image started by the patch's command", dir, nginx.Image, nginx.Command)
		}
		if len(nginx.VolumeMounts) != 1 || nginx.VolumeMounts[0].MountPath != "/var/run/restysync" {
			t.Errorf("%s: nginx mounts %+v: want the shared folder", dir, nginx.VolumeMounts)
		}
		if _, native := agentContainer(t, spec); !native {
			t.Errorf("%s: agent is not a native sidecar", dir)
		}
		if dir == "sidecar-stream" && len(nginx.Ports) != 4 {
			t.Errorf("%s: nginx ports %+v: want http, https and the two services'", dir, nginx.Ports)
		}
	}
}
