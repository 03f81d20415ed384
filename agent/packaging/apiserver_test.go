package packaging

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/testenv/syncbuf"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/restysync/restysync/agent/internal/testenv/kubeapi"
)

// cluster is a real kube-apiserver with a dynamic client and a RESTMapper
// from its discovery.
type cluster struct {
	srv    *kubeapi.Server
	dyn    *dynamic.DynamicClient
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	srv := kubeapi.Start(t, kubeapi.Options{})
	cfg := srv.Config()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{srv: srv, dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
}

// create sends obj to the API server with strict field validation (an
// unknown or duplicate field is an error, as with kubectl apply), as a
// server-side dry run when dryRun is set.
func (c *cluster) create(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) error {
	gvk := obj.GroupVersionKind()
	mapping, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("%s: %w", gvk, err)
	}
	var ri dynamic.ResourceInterface = c.dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			return fmt.Errorf("%s %s has no namespace", gvk.Kind, obj.GetName())
		}
		ri = c.dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
	}
	opts := metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err = ri.Create(ctx, obj, opts)
	return err
}

func (c *cluster) namespace(t *testing.T, name string) {
	t.Helper()
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}}}
	if err := c.create(context.Background(), ns, false); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// serviceMonitorCRD is a minimal monitoring.coreos.com/v1 ServiceMonitor
// CRD: the real one is not part of Kubernetes. Its schema has the fields the
// chart sets and no others, so that strict validation still catches a
// misspelt one.
const serviceMonitorCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: servicemonitors.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {kind: ServiceMonitor, listKind: ServiceMonitorList, plural: servicemonitors, singular: servicemonitor}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              required: [selector, endpoints]
              properties:
                selector:
                  type: object
                  properties:
                    matchLabels: {type: object, additionalProperties: {type: string}}
                namespaceSelector:
                  type: object
                  properties:
                    any: {type: boolean}
                    matchNames: {type: array, items: {type: string}}
                endpoints:
                  type: array
                  items:
                    type: object
                    properties:
                      port: {type: string}
                      path: {type: string}
                      interval: {type: string, pattern: '^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$'}
                      scrapeTimeout: {type: string, pattern: '^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$'}
`

func (c *cluster) installServiceMonitorCRD(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	crd := decodeManifests(t, serviceMonitorCRD)[0]
	if err := c.create(ctx, crd, false); err != nil {
		t.Fatalf("creating the ServiceMonitor CRD: %v", err)
	}
	crdRes := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := c.dyn.Resource(crdRes).Get(ctx, crd.GetName(), metav1.GetOptions{})
		if err == nil && conditionTrue(got, "Established") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ServiceMonitor CRD not established: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.mapper.Reset()
}

func conditionTrue(u *unstructured.Unstructured, typ string) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ && m["status"] == "True" {
			return true
		}
	}
	return false
}

// Everything the chart renders, for every value set, and everything the
// sidecar kustomization builds, is accepted by a real kube-apiserver
// (server-side dry run, strict field validation); and the agent, run with
// the rendered arguments and the chart's ServiceAccount token against that
// API server, syncs its sources and takes the status Lease: the chart's RBAC
// is enough and its flags parse.
func TestAPIServer(t *testing.T) {
	c := startCluster(t)
	c.installServiceMonitorCRD(t)
	ctx := context.Background()

	t.Run("chart", func(t *testing.T) {
		c.namespace(t, releaseNamespace)
		for _, vs := range valueSets {
			t.Run(vs.name, func(t *testing.T) {
				objs, _ := mustRender(t, vs.values)
				for _, o := range objs {
					if err := c.create(ctx, o, true); err != nil {
						t.Errorf("%s %s rejected: %v", o.GetKind(), o.GetName(), err)
					}
				}
				t.Logf("%d objects accepted", len(objs))
			})
		}
	})

	for name, build := range map[string]func(*testing.T) []*unstructured.Unstructured{
		"sidecar": buildSidecar, "sidecar-stream": buildSidecarStream,
	} {
		t.Run(name, func(t *testing.T) {
			objs := build(t)
			c.namespace(t, "web")
			for _, o := range objs {
				if err := c.create(ctx, o, true); err != nil {
					t.Errorf("%s %s rejected: %v", o.GetKind(), o.GetName(), err)
				}
			}
			t.Logf("%d objects accepted", len(objs))
		})
	}

	t.Run("agent", func(t *testing.T) {
		runAgentWithChart(t, c, "agent-run", nil, nil)
	})

	// With TCP and UDP services and passthrough: the agent reads both
	// ConfigMaps through its watch by name (the Role is enough) and reports
	// their Services missing. Another full name, so that the cluster-scoped
	// objects do not collide with the run above; its IngressClass is reused.
	t.Run("agent-stream", func(t *testing.T) {
		const ns = "agent-stream"
		values := map[string]any{
			"fullnameOverride": "edge-stream",
			"ingressClass":     map[string]any{"create": false},
			"tcp":              streamValues["tcp"],
			"udp":              streamValues["udp"],
			"agent":            streamValues["agent"],
		}
		runAgentWithChart(t, c, ns, values, []string{
			`"msg":"problem","object":"ConfigMap ` + ns + `/edge-stream-tcp"`,
			`"msg":"problem","object":"ConfigMap ` + ns + `/edge-stream-udp"`,
		})
	})
}

// runAgentWithChart creates the chart's objects for values in namespace ns
// for real, then runs the agent with the Deployment's arguments (as the
// kubelet would expand them) and the chart ServiceAccount's token, and
// waits for it to log each of wantLogs besides its start-up.
func runAgentWithChart(t *testing.T, c *cluster, ns string, values map[string]any, wantLogs []string) {
	ctx := context.Background()
	c.namespace(t, ns)
	rel, err := renderChartIn(values, ns)
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeManifests(t, rel.Manifest)
	for _, o := range objs {
		if err := c.create(ctx, o, false); err != nil {
			t.Fatalf("creating %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	spec := podSpec(t, objs)
	agent, _ := agentContainer(t, spec)
	kubeconfig := c.srv.ServiceAccountKubeconfig(t, ns, spec.ServiceAccountName)

	// The kubelet expands $(VAR) from the container's env; the downward API
	// gives these two.
	env := map[string]string{"POD_NAMESPACE": ns, "POD_NAME": "edge-restysync-7d9f-abcde"}
	shared := t.TempDir()
	metricsAddr := ""
	var args []string
	for _, a := range agent.Args {
		a = regexp.MustCompile(`\$\(([A-Z_]+)\)`).ReplaceAllStringFunc(a, func(m string) string { return env[m[2:len(m)-1]] })
		name, _, _ := strings.Cut(a, "=")
		switch name {
		case "--shared-dir":
			a = "--shared-dir=" + shared
		case "--metrics-address":
			metricsAddr = freeAddr(t)
			a = "--metrics-address=" + metricsAddr
		}
		args = append(args, a)
	}
	args = append(args, "--kubeconfig="+kubeconfig)
	t.Logf("restysync %s", strings.Join(args, " "))

	var out syncbuf.Buffer
	cmd := exec.Command(agentBinary, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-done
		}
	})

	waitFor := func(what string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(out.String(), what) {
			select {
			case err := <-done:
				t.Fatalf("agent exited (%v) before logging %q:\n%s", err, what, out.String())
			case <-time.After(50 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("agent did not log %q in 30s:\n%s", what, out.String())
			}
		}
	}
	if metricsAddr == "" {
		t.Fatal("the chart passes no --metrics-address: the agent's probes have nothing to reach")
	}
	// The startup probe (GET /healthz) passes only once nginx.conf is there
	// for the nginx container to start with.
	probe := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := probe.Get("http://" + metricsAddr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				if _, err := os.Stat(filepath.Join(shared, "nginx.conf")); err != nil {
					t.Errorf("/healthz answers 200 before nginx.conf is written: %v", err)
				}
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz did not answer 200 in 30s: %v\n%s", err, out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	waitFor(`"msg":"bootstrap nginx.conf written"`)
	if fi, err := os.Stat(filepath.Join(shared, "nginx.conf")); err != nil || fi.Size() == 0 {
		t.Errorf("no nginx.conf in the shared dir: %v", err)
	}
	waitFor(`"msg":"source synced"`)                   // list+watch of every kind: the ClusterRole
	waitFor(`"msg":"leading: writing Ingress status"`) // the Lease: the Role, --election-namespace
	for _, want := range wantLogs {
		waitFor(want)
	}
	{
		client := &http.Client{Timeout: 2 * time.Second}
		for _, path := range []string{"/healthz", "/metrics"} {
			resp, err := client.Get("http://" + metricsAddr + path)
			if err != nil {
				t.Errorf("GET %s: %v", path, err)
				continue
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("GET %s: %s", path, resp.Status)
			}
		}
	}
	if strings.Contains(strings.ToLower(out.String()), "forbidden") {
		t.Errorf("the chart's RBAC refused the agent something:\n%s", out.String())
	}

	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("agent exited with %v on SIGTERM, want 0:\n%s", err, out.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("agent did not stop within 20s of SIGTERM:\n%s", out.String())
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
