package status

import (
	"reflect"
	"testing"

	"github.com/restysync/restysync/agent/internal/model"
)

func TestServedGatewayAPI(t *testing.T) {
	gateway := func(name string, generation int64) model.GatewayStatus {
		return model.GatewayStatus{Namespace: "web", Name: name, Generation: generation,
			Conditions: []model.Condition{{Type: "Accepted", Status: true, Reason: "Accepted"}, {Type: "Programmed", Status: true, Reason: "Programmed"}},
			Listeners: []model.ListenerStatus{
				{Name: "http", Conditions: []model.Condition{{Type: "Programmed", Status: true, Reason: "Programmed"}}},
				{Name: "bad", Conditions: []model.Condition{{Type: "Programmed", Status: false, Reason: "Invalid"}}},
			}}
	}
	wanted := model.GatewayAPIStatus{Gateways: []model.GatewayStatus{gateway("a", 2), gateway("b", 1), gateway("c", 1)}}
	applied := model.GatewayAPIStatus{Gateways: []model.GatewayStatus{
		gateway("a", 1), // an older generation: not confirmed
		gateway("b", 1), // confirmed, but its listener http was not yet programmed
	}}
	applied.Gateways[1].Listeners = applied.Gateways[1].Listeners[1:]
	before := reflect.ValueOf(wanted.Gateways[0].Conditions).Pointer()
	got := ServedGatewayAPI(wanted, applied)

	pending := model.Condition{Type: "Programmed", Status: false, Reason: ReasonPending, Message: pendingMessage}
	programmed := model.Condition{Type: "Programmed", Status: true, Reason: "Programmed"}
	invalid := model.Condition{Type: "Programmed", Status: false, Reason: "Invalid"}
	for i, want := range []struct {
		gateway, http model.Condition
	}{
		{pending, pending},    // a: generation 2 not confirmed
		{programmed, pending}, // b: confirmed, its listener http not
		{pending, pending},    // c: never confirmed
	} {
		g := got.Gateways[i]
		if g.Conditions[1] != want.gateway || g.Listeners[0].Conditions[0] != want.http {
			t.Errorf("gateway %s: Programmed %+v, listener http %+v; want %+v, %+v", g.Name, g.Conditions[1], g.Listeners[0].Conditions[0], want.gateway, want.http)
		}
		if g.Conditions[0].Reason != "Accepted" || g.Listeners[1].Conditions[0] != invalid {
			t.Errorf("gateway %s: other conditions changed: %+v", g.Name, g)
		}
	}
	// wanted is left as it was.
	if wanted.Gateways[0].Conditions[1] != programmed || reflect.ValueOf(wanted.Gateways[0].Conditions).Pointer() != before ||
		wanted.Gateways[0].Listeners[0].Conditions[0] != programmed {
		t.Errorf("wanted changed: %+v", wanted.Gateways[0])
	}
	// Confirmed at the same generation: as wanted.
	if got := ServedGatewayAPI(wanted, wanted); !reflect.DeepEqual(got, wanted) {
		t.Errorf("confirmed status changed: %+v", got)
	}
}

func TestSupportedFeatures(t *testing.T) {
	got := supportedFeatures([]string{"HTTPRouteQueryParamMatching", "Gateway", "", "HTTPRoute", "Gateway"})
	var names []string
	for _, f := range got {
		names = append(names, string(f.Name))
	}
	if want := []string{"Gateway", "HTTPRoute", "HTTPRouteQueryParamMatching"}; !reflect.DeepEqual(names, want) {
		t.Errorf("supportedFeatures = %v, want %v", names, want)
	}
}

func TestTruncateMessage(t *testing.T) {
	long := make([]byte, maxMessage+10)
	for i := range long {
		long[i] = 'x'
	}
	long[maxMessage-1] = 0xc3 // the first byte of "é" cut in half
	long[maxMessage] = 0xa9
	got := truncateMessage(string(long))
	if len(got) != maxMessage-1 {
		t.Errorf("truncated to %d bytes, want %d", len(got), maxMessage-1)
	}
	if truncateMessage("short") != "short" {
		t.Error("a short message changed")
	}
}
