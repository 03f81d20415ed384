package packaging

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The agent serves the Gateways of gateway.controllerName's classes on the
// addresses of gateway.addresses; the GatewayClass is created only where
// the cluster serves the Gateway API (its CRDs are the user's to install),
// and NOTES says which.
func TestChartGatewayAPI(t *testing.T) {
	values := map[string]any{"gateway": map[string]any{"controllerName": "example.com/gateways", "addresses": []any{"10.0.0.5", "10.0.0.6"}}}
	objs, notes := mustRender(t, values)
	agent, _ := agentContainer(t, podSpec(t, objs))
	for _, want := range []string{"--gateway-controller-name=example.com/gateways", "--gateway-addresses=10.0.0.5,10.0.0.6"} {
		if !slices.Contains(agent.Args, want) {
			t.Errorf("agent args %v: want %s", agent.Args, want)
		}
	}
	if classes := find(objs, "GatewayClass"); len(classes) != 0 {
		t.Errorf("a GatewayClass rendered for a cluster without the Gateway API's CRDs")
	}
	if !strings.Contains(notes, "the Gateway API's CRDs are yours to install") {
		t.Errorf("NOTES do not say the Gateway API's CRDs are the user's to install:\n%s", notes)
	}

	rel, err := renderChartFor(values, releaseNamespace, "v1.37.2", "gateway.networking.k8s.io/v1/GatewayClass")
	if err != nil {
		t.Fatal(err)
	}
	classes := find(decodeManifests(t, rel.Manifest), "GatewayClass")
	if len(classes) != 1 || classes[0].GetName() != "restysync" {
		t.Fatalf("GatewayClasses %v: want restysync where the CRDs are installed", classes)
	}
	if controller, _, _ := unstructured.NestedString(classes[0].Object, "spec", "controllerName"); controller != "example.com/gateways" {
		t.Errorf("GatewayClass controllerName %q, want example.com/gateways", controller)
	}
	if !strings.Contains(rel.Info.Notes, `the chart created the GatewayClass "restysync"`) {
		t.Errorf("NOTES do not name the GatewayClass:\n%s", rel.Info.Notes)
	}

	// By default: the default controllerName, no address pool.
	objs, _ = mustRender(t, nil)
	agent, _ = agentContainer(t, podSpec(t, objs))
	if !slices.Contains(agent.Args, "--gateway-controller-name=restysync.io/gateway-controller") ||
		slices.ContainsFunc(agent.Args, func(a string) bool { return strings.HasPrefix(a, "--gateway-addresses") }) {
		t.Errorf("default agent args %v: want the default controller name and no --gateway-addresses", agent.Args)
	}
}

// gateway.services false turns the Gateway Services off and takes the
// ClusterRole's writes of Services and EndpointSlices away; by default the
// agent keeps them (no flag) and the ClusterRole allows them.
func TestChartGatewayServices(t *testing.T) {
	writes := func(objs []*unstructured.Unstructured) (services bool) {
		rules, _, _ := unstructured.NestedSlice(find(objs, "ClusterRole")[0].Object, "rules")
		for _, r := range rules {
			rule := r.(map[string]any)
			resources, _, _ := unstructured.NestedStringSlice(rule, "resources")
			verbs, _, _ := unstructured.NestedStringSlice(rule, "verbs")
			if slices.Contains(resources, "services") && slices.Contains(verbs, "create") {
				services = true
			}
		}
		return services
	}
	objs, _ := mustRender(t, nil)
	agent, _ := agentContainer(t, podSpec(t, objs))
	if slices.ContainsFunc(agent.Args, func(a string) bool { return strings.HasPrefix(a, "--gateway-services") }) || !writes(objs) {
		t.Errorf("default: agent args %v, ClusterRole writes Services %v: want no --gateway-services and the writes", agent.Args, writes(objs))
	}
	objs, _ = mustRender(t, map[string]any{"gateway": map[string]any{"services": false}})
	agent, _ = agentContainer(t, podSpec(t, objs))
	if !slices.Contains(agent.Args, "--gateway-services=false") || writes(objs) {
		t.Errorf("gateway.services false: agent args %v, ClusterRole writes Services %v: want --gateway-services=false and no writes", agent.Args, writes(objs))
	}
}
