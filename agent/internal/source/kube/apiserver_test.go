//go:build linux

package kube

import (
	"context"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/restysync/restysync/agent/internal/kubeclient"
	"github.com/restysync/restysync/agent/internal/source"
	"github.com/restysync/restysync/agent/internal/testenv/kubeapi"
)

// createAll creates objects with the typed client.
func createAll(t *testing.T, client kubernetes.Interface, objs ...runtime.Object) {
	t.Helper()
	ctx := context.Background()
	for _, obj := range objs {
		var err error
		switch o := obj.(type) {
		case *corev1.Namespace:
			_, err = client.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
		case *networkingv1.IngressClass:
			_, err = client.NetworkingV1().IngressClasses().Create(ctx, o, metav1.CreateOptions{})
		case *networkingv1.Ingress:
			_, err = client.NetworkingV1().Ingresses(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Service:
			_, err = client.CoreV1().Services(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *discoveryv1.EndpointSlice:
			_, err = client.DiscoveryV1().EndpointSlices(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Secret:
			_, err = client.CoreV1().Secrets(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.ConfigMap:
			_, err = client.CoreV1().ConfigMaps(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		default:
			t.Fatalf("createAll: unexpected %T", obj)
		}
		if err != nil {
			t.Fatalf("create %T: %v", obj, err)
		}
	}
}

// adminClient returns a client for the admin user, without the default
// 5 requests/s limit and without the warnings about the test's fake
// certificates.
func adminClient(t *testing.T, srv *kubeapi.Server) kubernetes.Interface {
	t.Helper()
	client, err := kubernetes.NewForConfig(adminConfig(srv))
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// adminConfig is the admin user's config for the tests' clients.
func adminConfig(srv *kubeapi.Server) *rest.Config {
	cfg := srv.Config()
	cfg.QPS, cfg.Burst = 1000, 1000
	cfg.WarningHandler = rest.NoWarnings{}
	return cfg
}

// agentClient is the agent's own client (package kubeclient) on cfg.
func agentClient(t *testing.T, cfg *rest.Config) kubeclient.Interface {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 1000, 1000
	cfg.WarningHandler = rest.NoWarnings{}
	client, err := kubeclient.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// storeKeys returns the sorted keys of the informer of kind.
func storeKeys(src *Source, kind source.Kind) []string {
	for _, ni := range src.allInformers() {
		if ni.kind == kind {
			keys := cachedKeys(ni.informer)
			slices.Sort(keys)
			return keys
		}
	}
	return nil
}

func TestSourceAPIServer(t *testing.T) {
	srv := kubeapi.Start(t, kubeapi.Options{})
	client := adminClient(t, srv)
	ctx := context.Background()

	createAll(t, client, namespace("web"), namespace("other"), namespace("restysync"))
	createAll(t, client, testObjects()[:6]...) // class, Ingress, Service, slice, TLS and Opaque Secret in web
	createAll(t, client,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "restysync", Namespace: "restysync"}, Data: map[string]string{"a": "1"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "restysync"}, Data: map[string]string{"b": "2"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "other"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "tls", Namespace: "other"},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{"tls.crt": []byte("c"), "tls.key": []byte("k")},
		},
	)

	src := New(agentClient(t, srv.Config()), Options{Namespace: "web", ConfigMap: "restysync/restysync"})
	counter := newKindCounter()
	startSource(t, src, counter.changed)

	snap, _ := src.Snapshot()
	for _, c := range []struct {
		kind string
		got  []string
		want []string
	}{
		{"ingresses", names(snap.Ingresses.Slice()), []string{"web/app"}},
		{"ingress classes", names(snap.IngressClasses.Slice()), []string{"restysync"}},
		{"services", names(snap.Services.Slice()), []string{"web/app"}},
		{"endpoint slices", names(snap.EndpointSlices.Slice()), []string{"web/app-1"}},
		{"secrets", names(snap.Secrets.Slice()), []string{"web/tls"}},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.kind, c.got, c.want)
		}
	}
	// The Opaque Secret and the other ConfigMap never reach the cache.
	if got, want := storeKeys(src, source.KindSecret), []string{"web/tls"}; !slices.Equal(got, want) {
		t.Errorf("cached secrets = %v, want %v", got, want)
	}
	if got, want := storeKeys(src, source.KindConfigMap), []string{"restysync/restysync"}; !slices.Equal(got, want) {
		t.Errorf("cached configmaps = %v, want %v", got, want)
	}
	if got, want := src.ConfigMapData(), map[string]string{"a": "1"}; !maps.Equal(got, want) {
		t.Errorf("ConfigMapData = %v, want %v", got, want)
	}
	for ing := range snap.Ingresses.All() {
		if len(ing.ManagedFields) != 0 {
			t.Errorf("ingress %s has managedFields %v, want them stripped", ing.Name, ing.ManagedFields)
		}
		if _, ok := ing.Annotations[source.LastAppliedAnnotation]; ok {
			t.Errorf("ingress %s kept %s", ing.Name, source.LastAppliedAnnotation)
		}
	}

	t.Run("new secrets", func(t *testing.T) {
		// Created in this order, the TLS Secret arriving proves the watch
		// went past the Opaque one.
		createAll(t, client,
			&corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "token", Namespace: "web"},
				Data:       map[string][]byte{"token": []byte("secret")},
			},
			&corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "tls-2", Namespace: "web"},
				Type:       corev1.SecretTypeTLS,
				Data:       map[string][]byte{"tls.crt": []byte("c"), "tls.key": []byte("k")},
			},
		)
		eventually(t, "web/tls-2 in snapshot", func() bool {
			snap, _ := src.Snapshot()
			return slices.Equal(names(snap.Secrets.Slice()), []string{"web/tls", "web/tls-2"})
		})
		if got, want := storeKeys(src, source.KindSecret), []string{"web/tls", "web/tls-2"}; !slices.Equal(got, want) {
			t.Errorf("cached secrets = %v, want %v", got, want)
		}
	})

	t.Run("endpoint slice burst", func(t *testing.T) {
		before := counter.get(source.KindEndpointSlice)
		slice, err := client.DiscoveryV1().EndpointSlices("web").Get(ctx, "app-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		const updates = 200
		for i := range updates {
			port := int32(8000 + i)
			slice.Ports[0].Port = &port
			if slice, err = client.DiscoveryV1().EndpointSlices("web").Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("update %d: %v", i, err)
			}
		}
		eventually(t, "last port in snapshot", func() bool {
			snap, _ := src.Snapshot()
			return snap.EndpointSlices.Len() == 1 && *snap.EndpointSlices.At(0).Ports[0].Port == 8000+updates-1
		})
		t.Logf("%d updates: changed(EndpointSlice) called %d times so far", updates, counter.get(source.KindEndpointSlice)-before)
	})

	t.Run("configmap update", func(t *testing.T) {
		cm, err := client.CoreV1().ConfigMaps("restysync").Get(ctx, "restysync", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data = map[string]string{"a": "2"}
		if _, err := client.CoreV1().ConfigMaps("restysync").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "new ConfigMap data", func() bool { return src.ConfigMapData()["a"] == "2" })
	})

	t.Run("delete", func(t *testing.T) {
		if err := client.NetworkingV1().Ingresses("web").Delete(ctx, "app", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := client.CoreV1().Secrets("web").Delete(ctx, "tls", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := client.NetworkingV1().IngressClasses().Delete(ctx, "restysync", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "deleted objects gone from snapshot", func() bool {
			snap, _ := src.Snapshot()
			return snap.Ingresses.Len() == 0 && snap.IngressClasses.Len() == 0 &&
				slices.Equal(names(snap.Secrets.Slice()), []string{"web/tls-2"})
		})
		if src.Ingress("web", "app") != nil {
			t.Error("Ingress(web, app) still cached after delete")
		}
	})
}
