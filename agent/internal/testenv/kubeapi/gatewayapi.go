package kubeapi

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
)

// GatewayAPIVersion is the Gateway API release whose CRDs
// InstallGatewayAPI applies: the sigs.k8s.io/gateway-api module of go.mod.
const GatewayAPIVersion = "v1.6.3"

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallGatewayAPI applies the Gateway API CRDs of GatewayAPIVersion
// (the module's config/crd/standard, or config/crd/experimental when
// experimental) server-side, as a user installs them, and waits until
// each is established.
func InstallGatewayAPI(t testing.TB, s *Server, experimental bool) {
	t.Helper()
	channel := "standard"
	if experimental {
		channel = "experimental"
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api").Output()
	if err != nil {
		t.Fatalf("finding the sigs.k8s.io/gateway-api module: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "config", "crd", channel)
	files, err := filepath.Glob(filepath.Join(dir, "gateway.networking.k8s.io_*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Gateway API CRDs in %s: %v", dir, err)
	}
	client, err := dynamic.NewForConfig(s.Config())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var names []string
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		crd := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(data, &crd.Object); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if crd.GetKind() != "CustomResourceDefinition" {
			continue // the ValidatingAdmissionPolicy of safe upgrades
		}
		if _, err := client.Resource(crdResource).Apply(ctx, crd.GetName(), crd, metav1.ApplyOptions{FieldManager: "restysync-tests", Force: true}); err != nil {
			t.Fatalf("applying %s: %v", crd.GetName(), err)
		}
		names = append(names, crd.GetName())
	}
	for _, name := range names {
		if err := waitEstablished(ctx, client, name); err != nil {
			t.Fatal(err)
		}
	}
}

func waitEstablished(ctx context.Context, client dynamic.Interface, name string) error {
	for {
		crd, err := client.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			for _, c := range conditions {
				if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRD %s not established: %v", name, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// RemoveGatewayAPIResource deletes the CRD of one resource of the Gateway
// API ("tlsroutes"), as a cluster with an older or partial install lacks
// it, and waits until discovery of gateway.networking.k8s.io/v1 no longer
// lists it.
func RemoveGatewayAPIResource(t testing.TB, s *Server, resource string) {
	t.Helper()
	disc := discovery.NewDiscoveryClientForConfigOrDie(s.Config())
	client, err := dynamic.NewForConfig(s.Config())
	if err != nil {
		t.Fatal(err)
	}
	name := resource + ".gateway.networking.k8s.io"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := client.Resource(crdResource).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting CRD %s: %v", name, err)
	}
	for {
		list, err := disc.ServerResourcesForGroupVersion("gateway.networking.k8s.io/v1")
		var served bool
		switch {
		case apierrors.IsNotFound(err): // the group version is gone with it
		case err != nil:
			served = true // unknown: ask again
		default:
			served = slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == resource })
		}
		if !served {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("CRD %s deleted, but discovery still serves %s (error %v)", name, resource, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
