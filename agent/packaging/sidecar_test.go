package packaging

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

func sidecarDir() string { return filepath.Join(repoRoot, "examples", "kubernetes", "sidecar") }

// buildSidecar runs `kustomize build examples/kubernetes/sidecar` with the
// kustomize Go API.
func buildSidecar(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resMap, err := k.Run(filesys.MakeFsOnDisk(), sidecarDir())
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
	nginx := container(t, spec, "openresty")
	if nginx.Image != "openresty/openresty:1.27.1.2-0-alpine" {
		t.Errorf("the patch changed the nginx image to %s", nginx.Image)
	}
	want := []string{"openresty", "-p", "/var/run/restysync/", "-c", "nginx.conf", "-g", "daemon off;"}
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
