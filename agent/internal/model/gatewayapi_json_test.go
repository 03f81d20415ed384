package model

import (
	"encoding/json"
	"testing"
)

// GatewayAPIStatus is written as JSON (admin report, inspect) as it was
// when Routes was a slice: no "routes" key for none, an array of the
// statuses for some; and read back the same.
func TestGatewayAPIStatusJSONRoutes(t *testing.T) {
	none, err := json.Marshal(GatewayAPIStatus{Classes: []GatewayClassStatus{{Name: "c"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(none), `{"classes":[{"name":"c","generation":0,"conditions":null}]}`; got != want {
		t.Errorf("no routes:\n got %s\nwant %s", got, want)
	}
	st := GatewayAPIStatus{Routes: ListOf(&RouteStatus{Kind: "HTTPRoute", Namespace: "a", Name: "r", Generation: 2})}
	some, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var slice struct {
		Routes []*RouteStatus `json:"routes,omitempty"`
	}
	slice.Routes = st.Routes.Slice()
	want, _ := json.Marshal(slice)
	if string(some) != string(want) {
		t.Errorf("a route:\n got %s\nwant %s", some, want)
	}
	var back GatewayAPIStatus
	if err := json.Unmarshal(some, &back); err != nil || back.Routes.Len() != 1 || back.Routes.At(0).Name != "r" || back.Routes.At(0).Generation != 2 {
		t.Errorf("read back: %v, %s", err, dump(back.Routes))
	}
}
