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
		Routes: []model.RouteStatus{{Kind: "HTTPRoute", Namespace: "web", Name: "app", Generation: 2,
			Parents: []model.RouteParentStatus{{Namespace: "web", Name: "gw", SectionName: "http",
				Conditions: []model.Condition{{Type: "Accepted", Status: false, Reason: "NoMatchingParent", Message: "no listener http"}}}}}},
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
