//go:build linux

package kube

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/restysync/restysync/agent/internal/events"
	"github.com/restysync/restysync/agent/internal/kubeclient"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/source"
	"github.com/restysync/restysync/agent/internal/status"
	"github.com/restysync/restysync/agent/internal/testenv/kubeapi"
)

// rbacFile is examples/kubernetes/rbac.yaml, from this package's folder.
var rbacFile = filepath.Join("..", "..", "..", "..", "examples", "kubernetes", "rbac.yaml")

// applyManifest creates every object of a multi-document YAML file.
func applyManifest(t *testing.T, client kubernetes.Interface, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		switch o := obj.(type) {
		case *corev1.Namespace:
			_, err = client.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
		case *corev1.ServiceAccount:
			_, err = client.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, err = client.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = client.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			_, err = client.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = client.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		default:
			t.Fatalf("%s: unexpected %T", path, obj)
		}
		if err != nil {
			t.Fatalf("%s: create %T: %v", path, obj, err)
		}
	}
}

// TestRBAC runs the source, the status writer and the event recorder as the
// ServiceAccount of examples/kubernetes/rbac.yaml, with the Gateway API's
// CRDs installed: the writer writes the status of an Ingress and of each
// Gateway API kind, the recorder Events on each. What the file does not
// grant must be forbidden.
func TestRBAC(t *testing.T) {
	srv := kubeapi.Start(t, kubeapi.Options{})
	admin := adminClient(t, srv)
	ctx := context.Background()
	kubeapi.InstallGatewayAPI(t, srv, false)

	applyManifest(t, admin, rbacFile)
	saConfig, err := clientcmd.BuildConfigFromFlags("", srv.ServiceAccountKubeconfig(t, "restysync", "restysync"))
	if err != nil {
		t.Fatal(err)
	}
	saConfig.QPS, saConfig.Burst = 100, 100
	saConfig.WarningHandler = rest.NoWarnings{}
	// agentSA is what the agent holds; sa tries what the file must not grant.
	agentSA, err := kubeclient.New(saConfig)
	if err != nil {
		t.Fatal(err)
	}
	sa, err := kubernetes.NewForConfig(saConfig)
	if err != nil {
		t.Fatal(err)
	}
	saGateway, err := gatewayclient.NewForConfig(saConfig)
	if err != nil {
		t.Fatal(err)
	}

	createAll(t, admin, namespace("web"), namespace("other"))
	createAll(t, admin, testObjects()[:6]...) // class, Ingress, Service, slice, TLS and Opaque Secret in web
	headers := authIngress("tenant", "web", "restysync", "users")
	headers.Annotations = map[string]string{
		"nginx.ingress.kubernetes.io/auth-url":               "http://auth.test/check",
		"nginx.ingress.kubernetes.io/auth-proxy-set-headers": "auth-headers",
	}
	createAll(t, admin, headers,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "auth-headers", Namespace: "web"}, Data: map[string]string{"X-Tenant": "a"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "restysync", Namespace: "restysync"}, Data: map[string]string{"a": "1"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "other"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "backend-ca", Namespace: "web"}, Data: map[string]string{"ca.crt": "x"}},
		&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "restysync", Namespace: "restysync"},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
		},
	)
	// The Gateway API's objects: our Gateway's listener names an Opaque
	// Secret in certs.
	createAll(t, admin, namespace("certs"))
	createAll(t, admin, gatewayCoreObjects()[3:]...) // the listeners' Secrets
	gatewayAdmin, err := gatewayclient.NewForConfig(adminConfig(srv))
	if err != nil {
		t.Fatal(err)
	}
	createGatewayObjects(t, gatewayAdmin, gatewayTestObjects()...)
	publishSvc, err := admin.CoreV1().Services("restysync").Get(ctx, "restysync", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// The source syncs every informer.
	src := New(agentSA, Options{ConfigMap: "restysync/restysync", IngressClass: "restysync"})
	startSource(t, src, func(source.Change) {})
	snap, _ := src.Snapshot()
	if got := names(snap.Ingresses.Slice()); !slices.Equal(got, []string{"web/app", "web/tenant"}) {
		t.Errorf("ingresses = %v", got)
	}
	eventually(t, "the ConfigMaps an Ingress and a BackendTLSPolicy name, read by name with the ServiceAccount", func() bool {
		snap, _ := src.Snapshot()
		return slices.Equal(names(snap.ConfigMaps.Slice()), []string{"web/auth-headers", "web/backend-ca"})
	})
	if got := names(snap.Secrets.Slice()); !slices.Equal(got, []string{"certs/gw-cert", "web/tls"}) {
		t.Errorf("secrets = %v", got)
	}
	for kind, got := range map[string][]string{
		"GatewayClasses": names(snap.GatewayClasses.Slice()), "Gateways": names(snap.Gateways.Slice()),
		"HTTPRoutes": names(snap.HTTPRoutes.Slice()), "GRPCRoutes": names(snap.GRPCRoutes.Slice()), "TLSRoutes": names(snap.TLSRoutes.Slice()), "ReferenceGrants": names(snap.ReferenceGrants.Slice()),
		"ListenerSets":       names(snap.ListenerSets.Slice()),
		"BackendTLSPolicies": names(snap.BackendTLSPolicies.Slice()),
	} {
		if len(got) == 0 {
			t.Errorf("%s: none read with the ServiceAccount", kind)
		}
	}
	if !slices.Contains(names(snap.Namespaces.Slice()), "certs") {
		t.Errorf("namespaces = %v, want certs among them", names(snap.Namespaces.Slice()))
	}
	if got := storeKeys(src, source.KindSecret); !slices.Equal(got, []string{"web/tls"}) {
		t.Errorf("cached secrets = %v, want only web/tls", got)
	}
	if got := src.ConfigMapData(); got["a"] != "1" {
		t.Errorf("ConfigMapData = %v", got)
	}

	// The status writer takes the Lease and writes the Ingress and Gateway
	// API status (here without a cache, so it also reads each object with
	// get, as it does after a conflict).
	pub, err := status.NewServicePublisher(agentSA, "restysync/restysync")
	if err != nil {
		t.Fatal(err)
	}
	writer, err := status.NewWriter(agentSA, pub, status.Options{
		Namespace:     "restysync",
		Identity:      "rbac-test",
		LeaseDuration: 2 * time.Second,
		RenewDeadline: 1500 * time.Millisecond,
		RetryPeriod:   200 * time.Millisecond,
		GatewayAPI:    &status.GatewayAPIOptions{Services: src},
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	writerDone := make(chan error, 1)
	go func() { writerDone <- writer.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-writerDone:
			if err != nil {
				t.Errorf("status writer: %v", err)
			}
		case <-time.After(waitTimeout):
			t.Errorf("status writer did not stop within %s", waitTimeout)
		}
	})
	writer.Update([]types.NamespacedName{{Namespace: "web", Name: "app"}})
	eventually(t, "status written", func() bool {
		ing, err := admin.NetworkingV1().Ingresses("web").Get(ctx, "app", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		lb := ing.Status.LoadBalancer.Ingress
		return len(lb) == 1 && lb[0].IP == publishSvc.Spec.ClusterIP
	})
	wanted := gatewayStatusOf(t, snap)
	writer.UpdateGatewayAPI(wanted, wanted)
	eventually(t, "Gateway API status written", func() bool {
		return gatewayStatusWritten(t, gatewayAdmin)
	})
	// The Gateway's Service and EndpointSlice: created, updated, deleted.
	gw := snap.Gateways.At(slices.IndexFunc(snap.Gateways.Slice(), func(g *gatewayv1.Gateway) bool { return g.Name == "gw" }))
	gwService := model.GatewayService{Namespace: "web", Gateway: "gw", GatewayUID: string(gw.UID), Name: "gw-restysync",
		Labels: map[string]string{model.GatewayServiceManagedByLabel: model.GatewayServiceManagedBy, "v": "1"}, Ports: []int32{80},
		Slices: []model.GatewayServiceSlice{{Name: "gw-restysync-ipv4", AddressType: "IPv4", Addresses: []string{"192.0.2.10"}}}}
	serviceLabel := func() string {
		svc, err := admin.CoreV1().Services("web").Get(ctx, "gw-restysync", metav1.GetOptions{})
		_, sliceErr := admin.DiscoveryV1().EndpointSlices("web").Get(ctx, "gw-restysync-ipv4", metav1.GetOptions{})
		if apierrors.IsNotFound(err) && apierrors.IsNotFound(sliceErr) {
			return "gone"
		}
		if err != nil || sliceErr != nil {
			return ""
		}
		return svc.Labels["v"]
	}
	for _, v := range []string{"1", "2", "gone"} {
		next := wanted
		if v != "gone" {
			gwService.Labels = map[string]string{model.GatewayServiceManagedByLabel: model.GatewayServiceManagedBy, "v": v}
			next.Services = []model.GatewayService{gwService}
		}
		eventually(t, "the Gateway's Service at "+v, func() bool {
			writer.UpdateGatewayAPI(next, next)
			return serviceLabel() == v
		})
	}

	// The recorder creates Events (create is all it is granted): a problem
	// that goes and comes back is an Event of its own.
	rec := events.New(agentSA, events.Options{})
	if err := rec.Start(runCtx); err != nil {
		t.Fatal(err)
	}
	ing := src.Ingress("web", "app")
	lookup := func(namespace, name string) runtime.Object {
		if ing := src.Ingress(namespace, name); ing != nil {
			return ing
		}
		return nil
	}
	eventually(t, "status update in the cache", func() bool {
		ing = src.Ingress("web", "app")
		return ing != nil && len(ing.Status.LoadBalancer.Ingress) == 1
	})
	problem := model.Problem{Kind: "Ingress", Namespace: "web", Name: "app", Reason: `spec.rules[0].http.paths[0].backend: Service "app" has no port 81; the path answers 503`}
	rec.Served(ing)
	rec.Problems([]model.Problem{problem}, lookup)
	eventually(t, "two events", func() bool {
		list, err := admin.EventsV1().Events("web").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return len(list.Items) == 2
	})
	rec.Problems(nil, lookup)
	rec.Problems([]model.Problem{problem}, lookup)
	eventually(t, "the repeated problem as a second Problem event", func() bool {
		list, err := admin.EventsV1().Events("web").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, ev := range list.Items {
			if ev.Reason == events.ReasonProblem {
				n++
			}
		}
		return n == 2
	})

	// Events on the Gateway API's kinds: the recorder reads each object's
	// UID with get.
	gatewayRec := events.New(agentSA, events.Options{GatewayAPI: true})
	if err := gatewayRec.Start(runCtx); err != nil {
		t.Fatal(err)
	}
	gatewayRec.GatewayAPIProblems([]model.Problem{
		{Kind: "GatewayClass", Name: "restysync", Reason: "spec.parametersRef: not supported (InvalidParameters)"},
		{Kind: "Gateway", Namespace: "web", Name: "gw", Reason: "spec.addresses[0]: UnsupportedAddress"},
		{Kind: "HTTPRoute", Namespace: "web", Name: "app", Reason: "spec.rules[0].backendRefs[0]: BackendNotFound"},
		{Kind: "ListenerSet", Namespace: "web", Name: "extra", Reason: "spec.listeners[0]: HostnameConflict"},
	})
	eventually(t, "an Event on each Gateway API kind, with its UID", func() bool {
		kinds := map[string]bool{}
		for _, ns := range []string{"default", "web"} {
			list, err := admin.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range list.Items {
				if ev.Regarding.APIVersion == kubeclient.GatewayGroupVersion && ev.Regarding.UID != "" {
					kinds[ev.Regarding.Kind] = true
				}
			}
		}
		return len(kinds) == 4
	})

	// What the file does not grant.
	forbidden := []struct {
		what string
		call func() error
	}{
		{"get a Secret", func() error {
			_, err := sa.CoreV1().Secrets("web").Get(ctx, "password", metav1.GetOptions{})
			return err
		}},
		{"create a Secret", func() error {
			_, err := sa.CoreV1().Secrets("web").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
			return err
		}},
		{"get a ConfigMap", func() error {
			_, err := sa.CoreV1().ConfigMaps("other").Get(ctx, "cm", metav1.GetOptions{})
			return err
		}},
		{"update a ConfigMap", func() error {
			_, err := sa.CoreV1().ConfigMaps("other").Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "other"}}, metav1.UpdateOptions{})
			return err
		}},
		{"update an Ingress", func() error {
			_, err := sa.NetworkingV1().Ingresses("web").Update(ctx, ing.DeepCopy(), metav1.UpdateOptions{})
			return err
		}},
		{"delete an Ingress", func() error {
			return sa.NetworkingV1().Ingresses("web").Delete(ctx, "app", metav1.DeleteOptions{})
		}},
		{"get a Service", func() error {
			_, err := sa.CoreV1().Services("web").Get(ctx, "app", metav1.GetOptions{})
			return err
		}},
		{"list Pods", func() error {
			_, err := sa.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
			return err
		}},
		{"get a Lease in another namespace", func() error {
			_, err := sa.CoordinationV1().Leases("web").Get(ctx, status.DefaultLeaseName, metav1.GetOptions{})
			return err
		}},
		{"create a core/v1 Event", func() error {
			_, err := sa.CoreV1().Events("web").Create(ctx, &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{Name: "x"},
				InvolvedObject: corev1.ObjectReference{Kind: "Ingress", Namespace: "web", Name: "app"},
			}, metav1.CreateOptions{})
			return err
		}},
		{"get a ReferenceGrant", func() error {
			_, err := saGateway.GatewayV1().ReferenceGrants("certs").Get(ctx, "gateways", metav1.GetOptions{})
			return err
		}},
		{"delete a Gateway", func() error {
			return saGateway.GatewayV1().Gateways("web").Delete(ctx, "gw", metav1.DeleteOptions{})
		}},
		{"patch a Gateway's status", func() error {
			_, err := saGateway.GatewayV1().Gateways("web").Patch(ctx, "gw", types.MergePatchType, []byte(`{"status":{}}`), metav1.PatchOptions{}, "status")
			return err
		}},
		{"update a Gateway", func() error {
			_, err := saGateway.GatewayV1().Gateways("web").Update(ctx, snap.Gateways.At(0).DeepCopy(), metav1.UpdateOptions{})
			return err
		}},
		{"create an HTTPRoute", func() error {
			_, err := saGateway.GatewayV1().HTTPRoutes("web").Create(ctx, &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
			return err
		}},
		{"delete a ReferenceGrant", func() error {
			return saGateway.GatewayV1().ReferenceGrants("certs").Delete(ctx, "gateways", metav1.DeleteOptions{})
		}},
		{"create a GatewayClass", func() error {
			_, err := saGateway.GatewayV1().GatewayClasses().Create(ctx, &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "x"},
				Spec: gatewayv1.GatewayClassSpec{ControllerName: "example.com/x"}}, metav1.CreateOptions{})
			return err
		}},
		{"get a Namespace", func() error {
			_, err := sa.CoreV1().Namespaces().Get(ctx, "web", metav1.GetOptions{})
			return err
		}},
		{"update a Namespace", func() error {
			_, err := sa.CoreV1().Namespaces().Update(ctx, namespace("web"), metav1.UpdateOptions{})
			return err
		}},
		{"create an IngressClass", func() error {
			_, err := sa.NetworkingV1().IngressClasses().Create(ctx, &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
			return err
		}},
	}
	for _, f := range forbidden {
		if err := f.call(); !apierrors.IsForbidden(err) {
			t.Errorf("%s as the ServiceAccount: err = %v, want 403 Forbidden", f.what, err)
		}
	}

	// RBAC cannot restrict a list by type: the ServiceAccount may list every
	// Secret, as rbac.yaml says. Only the agent's field selector keeps the
	// Opaque Secret out of its cache (checked above). If this ever fails,
	// the comment in rbac.yaml is out of date.
	if _, err := sa.CoreV1().Secrets("web").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("listing all Secrets as the ServiceAccount: %v; rbac.yaml says RBAC allows it", err)
	}
}

// gatewayStatusOf returns a Gateway API status, as the model would give
// it, for our GatewayClass, our Gateway web/gw and the HTTPRoute web/app of
// snap (gatewayTestObjects).
func gatewayStatusOf(t *testing.T, snap model.Snapshot) model.GatewayAPIStatus {
	t.Helper()
	accepted := []model.Condition{{Type: "Accepted", Status: true, Reason: "Accepted", Message: "RBAC test"}}
	programmed := append(slices.Clone(accepted), model.Condition{Type: "Programmed", Status: true, Reason: "Programmed"})
	class := snap.GatewayClasses.At(slices.IndexFunc(snap.GatewayClasses.Slice(), func(c *gatewayv1.GatewayClass) bool { return c.Name == "restysync" }))
	gateway := snap.Gateways.At(slices.IndexFunc(snap.Gateways.Slice(), func(g *gatewayv1.Gateway) bool { return g.Name == "gw" }))
	route := snap.HTTPRoutes.At(slices.IndexFunc(snap.HTTPRoutes.Slice(), func(r *gatewayv1.HTTPRoute) bool { return r.Namespace == "web" }))
	calls := snap.GRPCRoutes.At(0)
	extra := snap.ListenerSets.At(0)
	policy := snap.BackendTLSPolicies.At(0)
	return model.GatewayAPIStatus{
		Classes: []model.GatewayClassStatus{{Name: class.Name, Generation: class.Generation, Conditions: accepted}},
		Gateways: []model.GatewayStatus{{Namespace: "web", Name: gateway.Name, Generation: gateway.Generation, Conditions: programmed,
			Listeners: []model.ListenerStatus{{Name: "http", SupportedKinds: []string{"HTTPRoute"}, AttachedRoutes: 1, Conditions: programmed}}}},
		Routes: model.ListOf([]*model.RouteStatus{{Kind: "HTTPRoute", Namespace: "web", Name: route.Name, Generation: route.Generation,
			Parents: []model.RouteParentStatus{{Namespace: "web", Name: "gw", Conditions: accepted}}},
			{Kind: "GRPCRoute", Namespace: "web", Name: calls.Name, Generation: calls.Generation,
				Parents: []model.RouteParentStatus{{Namespace: "web", Name: "gw", Conditions: accepted}}},
			{Kind: "BackendTLSPolicy", Namespace: "web", Name: policy.Name, Generation: policy.Generation,
				Parents: []model.RouteParentStatus{{Namespace: "web", Name: "gw", Conditions: accepted}}}}...),
		ListenerSets: []model.GatewayStatus{{Namespace: "web", Name: extra.Name, Generation: extra.Generation, Conditions: programmed,
			Listeners: []model.ListenerStatus{{Name: "extra", SupportedKinds: []string{"HTTPRoute"}, Conditions: programmed}}}},
	}
}

// gatewayStatusWritten reports whether the status of gatewayStatusOf's
// objects is on them.
func gatewayStatusWritten(t *testing.T, admin gatewayclient.Interface) bool {
	t.Helper()
	ctx := context.Background()
	class, err := admin.GatewayV1().GatewayClasses().Get(ctx, "restysync", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gateway, err := admin.GatewayV1().Gateways("web").Get(ctx, "gw", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	route, err := admin.GatewayV1().HTTPRoutes("web").Get(ctx, "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	calls, err := admin.GatewayV1().GRPCRoutes("web").Get(ctx, "calls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	extra, err := admin.GatewayV1().ListenerSets("web").Get(ctx, "extra", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	policy, err := admin.GatewayV1().BackendTLSPolicies("web").Get(ctx, "backend-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ours := func(p gatewayv1.RouteParentStatus) bool { return p.ControllerName == model.GatewayControllerName }
	ourAncestor := func(p gatewayv1.PolicyAncestorStatus) bool { return p.ControllerName == model.GatewayControllerName }
	return meta.IsStatusConditionTrue(class.Status.Conditions, "Accepted") &&
		meta.IsStatusConditionTrue(extra.Status.Conditions, "Programmed") && len(extra.Status.Listeners) == 1 &&
		meta.IsStatusConditionTrue(gateway.Status.Conditions, "Programmed") && len(gateway.Status.Listeners) == 1 &&
		slices.ContainsFunc(route.Status.Parents, ours) && slices.ContainsFunc(calls.Status.Parents, ours) &&
		slices.ContainsFunc(policy.Status.Ancestors, ourAncestor)
}
