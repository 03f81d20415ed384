//go:build linux

package kubeapi

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func TestServer(t *testing.T) {
	s := Start(t, Options{})
	ctx := context.Background()

	// The admin kubeconfig works as a client would load it.
	cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	const ns = "web"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "app"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ready, portName, port := true, "http", int32(8080)
	if _, err := client.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:   "app-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: "app"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{"10.244.1.10"},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready},
		}},
		Ports: []discoveryv1.EndpointPort{{Name: &portName, Port: &port}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	services, err := client.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(services.Items) != 1 || services.Items[0].Name != "app" || services.Items[0].Spec.ClusterIP == "" {
		t.Errorf("services = %+v, want app with a cluster IP", services.Items)
	}
	slices, err := client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=app",
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(slices.Items) != 1 || slices.Items[0].Endpoints[0].Addresses[0] != "10.244.1.10" {
		t.Errorf("endpoint slices = %+v, want one with 10.244.1.10", slices.Items)
	}

	// A ServiceAccount without RBAC grants is authenticated but forbidden.
	saConfig, err := clientcmd.BuildConfigFromFlags("", s.ServiceAccountKubeconfig(t, ns, "reader"))
	if err != nil {
		t.Fatal(err)
	}
	saClient, err := kubernetes.NewForConfig(saConfig)
	if err != nil {
		t.Fatal(err)
	}
	_, err = saClient.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("listing secrets as the service account: err = %v, want 403 Forbidden", err)
	}

	// Stopped, the API server refuses connections; started again, it serves
	// the same objects at the same address to the same kubeconfig. An open
	// watch does not hold the stop back.
	w, err := client.CoreV1().Services(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	stopStart := time.Now()
	s.StopAPIServer(t)
	if took := time.Since(stopStart); took > stopTimeout/2 {
		t.Errorf("StopAPIServer with a watch open took %s", took)
	}
	down, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := client.CoreV1().Services(ns).Get(down, "app", metav1.GetOptions{}); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("with the API server stopped: err = %v, want connection refused", err)
	}
	s.StartAPIServer(t)
	if _, err := client.CoreV1().Services(ns).Get(ctx, "app", metav1.GetOptions{}); err != nil {
		t.Errorf("after StartAPIServer, with the same client: %v", err)
	}
	if _, err := saClient.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("after StartAPIServer, the service account's token: err = %v, want 403 Forbidden", err)
	}
}

// The Gateway API CRDs install and serve: a GatewayClass can be created
// and read back through the v1 API.
func TestInstallGatewayAPI(t *testing.T) {
	s := Start(t, Options{})
	InstallGatewayAPI(t, s, false)
	client, err := dynamic.NewForConfig(s.Config())
	if err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gatewayclasses"}
	gc := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
		"metadata": map[string]any{"name": "test"}, "spec": map[string]any{"controllerName": "example.com/test"}}}
	ctx := context.Background()
	if _, err := client.Resource(gvr).Create(ctx, gc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := client.Resource(gvr).Get(ctx, "test", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if name, _, _ := unstructured.NestedString(got.Object, "spec", "controllerName"); name != "example.com/test" {
		t.Errorf("controllerName %q", name)
	}
}

// With EtcdInMemory, etcd keeps its data in a directory of /dev/shm that
// holds what the API server stored while it runs, and is gone once the
// test has ended.
func TestEtcdInMemory(t *testing.T) {
	before, _ := filepath.Glob("/dev/shm/kubeapi-etcd-*")
	var dir string
	t.Run("server", func(t *testing.T) {
		s := Start(t, Options{EtcdInMemory: true})
		client, err := kubernetes.NewForConfig(s.Config())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.CoreV1().Namespaces().Create(context.Background(),
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		after, _ := filepath.Glob("/dev/shm/kubeapi-etcd-*")
		for _, d := range after {
			if !slices.Contains(before, d) {
				dir = d
			}
		}
		if dir == "" {
			t.Fatal("no new /dev/shm/kubeapi-etcd-* directory")
		}
		if wal, _ := filepath.Glob(filepath.Join(dir, "etcd", "member", "wal", "*.wal")); len(wal) == 0 {
			t.Errorf("no etcd write-ahead log in %s", dir)
		}
	})
	if dir == "" {
		return
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s is still there after the test: %v", dir, err)
	}
}
