//go:build linux

package events

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/typed/apis/v1"

	"github.com/restysync/restysync/agent/internal/kubeclient"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/testenv/kubeapi"
)

// TestGatewayAPIProblemsAPIServer: a Problem on a GatewayClass, Gateway
// or HTTPRoute becomes a Warning Event on it, with its UID (what kubectl
// describe looks Events up by); one on an object gone is dropped.
func TestGatewayAPIProblemsAPIServer(t *testing.T) {
	srv := kubeapi.Start(t, kubeapi.Options{})
	kubeapi.InstallGatewayAPI(t, srv, false)
	client, err := kubernetes.NewForConfig(srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gatewayclient.NewForConfig(srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	class, err := gw.GatewayClasses().Create(ctx, &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "restysync"},
		Spec: gatewayv1.GatewayClassSpec{ControllerName: model.GatewayControllerName}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gateway, err := gw.Gateways("web").Create(ctx, &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: "gw"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "restysync", Listeners: []gatewayv1.Listener{
			{Name: "ftp", Protocol: "example.com/ftp", Port: 21}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	route, err := gw.HTTPRoutes("web").Create(ctx, &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: "app"},
		Spec: gatewayv1.HTTPRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "gw"}}}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	kc, err := kubeclient.New(srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	rec := New(kc, Options{GatewayAPI: true})
	runCtx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	if err := rec.Start(runCtx); err != nil {
		t.Fatal(err)
	}
	problems := []model.Problem{
		{Kind: "GatewayClass", Name: "restysync", Reason: "spec.parametersRef: not supported (InvalidParameters)"},
		{Kind: "Gateway", Namespace: "web", Name: "gw", Reason: `spec.listeners[0].protocol "example.com/ftp": UnsupportedProtocol; listener left out`},
		{Kind: "HTTPRoute", Namespace: "web", Name: "app", Reason: "spec.rules[0].backendRefs[0]: Service web/missing not found (BackendNotFound); its share answers 500"},
		{Kind: "HTTPRoute", Namespace: "web", Name: "gone", Reason: "spec.parentRefs[0]: NoMatchingParent"},
		{Kind: "Ingress", Namespace: "web", Name: "other", Reason: "not a Gateway API object"},
	}
	for range 3 { // deduplicated
		rec.GatewayAPIProblems(problems)
	}
	uids := map[string]types.UID{"GatewayClass restysync": class.UID, "Gateway gw": gateway.UID, "HTTPRoute app": route.UID}
	var got []string
	for _, ev := range append(waitForEvents(t, client, "web", 2), waitForEvents(t, client, "default", 1)...) {
		key := ev.Regarding.Kind + " " + ev.Regarding.Name
		if ev.Regarding.UID != uids[key] || ev.Regarding.APIVersion != "gateway.networking.k8s.io/v1" {
			t.Errorf("event %s regards %+v, want UID %s", ev.Name, ev.Regarding, uids[key])
		}
		got = append(got, ev.Type+" "+ev.Reason+" "+key+" "+ev.Regarding.FieldPath)
	}
	slices.Sort(got)
	want := []string{
		"Warning Problem Gateway gw spec.listeners[0].protocol",
		"Warning Problem GatewayClass restysync spec.parametersRef",
		"Warning Problem HTTPRoute app spec.rules[0].backendRefs[0]",
	}
	if !slices.Equal(got, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// One more problem, queued after that of the route gone: once its
	// Event is in, the one before was dealt with, and dropped.
	extra := model.Problem{Kind: "Gateway", Namespace: "web", Name: "gw", Reason: "spec.addresses[0]: UnsupportedAddress"}
	rec.GatewayAPIProblems(append(problems, extra))
	for _, ev := range waitForEvents(t, client, "web", 3) {
		if ev.Regarding.Name == "gone" {
			t.Errorf("an Event on a route that does not exist: %+v", ev)
		}
	}
}
