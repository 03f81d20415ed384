package main

import (
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/model"
)

func TestWriteGatewayAPI(t *testing.T) {
	st := &model.GatewayAPIStatus{
		Classes: []model.GatewayClassStatus{{Name: "restysync", Generation: 1,
			Conditions:        []model.Condition{{Type: "Accepted", Status: true, Reason: "Accepted"}},
			SupportedFeatures: []string{"Gateway", "HTTPRoute"}}},
		Gateways: []model.GatewayStatus{{Namespace: "web", Name: "gw", Generation: 3, Addresses: []string{"127.0.50.1"},
			Conditions: []model.Condition{{Type: "Accepted", Status: true, Reason: "Accepted"},
				{Type: "Programmed", Status: false, Reason: "Pending", Message: "waiting for nginx"}},
			Listeners: []model.ListenerStatus{{Name: "ftp", AttachedRoutes: 0,
				Conditions: []model.Condition{{Type: "Accepted", Status: false, Reason: "UnsupportedProtocol", Message: "protocol example.com/ftp"}}}}}},
		Routes: model.ListOf([]*model.RouteStatus{{Kind: "HTTPRoute", Namespace: "web", Name: "app", Generation: 2,
			Parents: []model.RouteParentStatus{{Namespace: "web", Name: "gw", SectionName: "http",
				Conditions: []model.Condition{{Type: "Accepted", Status: false, Reason: "NoMatchingParent", Message: "no listener http"}}}}}}...),
	}
	var b strings.Builder
	writeGatewayAPI(&b, st, false)
	want := `
Gateway API status
  GatewayClass restysync (generation 1): Accepted=True (Accepted)
    supported features: Gateway, HTTPRoute
  Gateway web/gw (generation 3) on 127.0.50.1: Accepted=True (Accepted), Programmed=False (Pending)
    Programmed: waiting for nginx
    listener ftp: 0 routes, kinds none: Accepted=False (UnsupportedProtocol)
      Accepted: protocol example.com/ftp
  HTTPRoute web/app (generation 2)
    parent Gateway web/gw section http: Accepted=False (NoMatchingParent)
      Accepted: no listener http
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	writeGatewayAPI(&b, nil, false)
	if b.Len() != 0 {
		t.Errorf("no Gateway API objects: printed %q", b.String())
	}
}

// A ListenerSet is printed after the Gateways, and a route's parent names
// its kind.
func TestWriteGatewayAPIListenerSet(t *testing.T) {
	attached := int32(1)
	accepted := []model.Condition{{Type: "Accepted", Status: true, Reason: "Accepted"}}
	st := &model.GatewayAPIStatus{
		Gateways: []model.GatewayStatus{{Namespace: "web", Name: "gw", Generation: 1, Conditions: accepted, AttachedListenerSets: &attached}},
		ListenerSets: []model.GatewayStatus{{Namespace: "tenant", Name: "extra", Generation: 2, Conditions: accepted,
			Listeners: []model.ListenerStatus{{Name: "shop", AttachedRoutes: 1, SupportedKinds: []string{"HTTPRoute"},
				Conditions: []model.Condition{{Type: "Conflicted", Status: true, Reason: "HostnameConflict"}}}}}},
		Routes: model.ListOf([]*model.RouteStatus{{Kind: "HTTPRoute", Namespace: "tenant", Name: "app", Generation: 1,
			Parents: []model.RouteParentStatus{{Kind: "ListenerSet", Namespace: "tenant", Name: "extra", Conditions: accepted}}}}...),
	}
	var b strings.Builder
	writeGatewayAPI(&b, st, false)
	want := `
Gateway API status
  Gateway web/gw (generation 1) on none: Accepted=True (Accepted)
    attached ListenerSets: 1
  ListenerSet tenant/extra (generation 2): Accepted=True (Accepted)
    listener shop: 1 routes, kinds HTTPRoute: Conflicted=True (HostnameConflict)
  HTTPRoute tenant/app (generation 1)
    parent ListenerSet tenant/extra: Accepted=True (Accepted)
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}
