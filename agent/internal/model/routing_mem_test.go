package model

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"unsafe"
)

// At 50,000 Ingresses render holds a RouteLocation per location and a
// Route per host (and apply a Route per host): each byte is 50 KB.
// RouteLocation keeps its rare settings behind one pointer and its bools
// side by side (88 bytes, the 96-byte size class, with the request
// metrics' labels, which every location has when they are on; it was 184,
// the 192 class), Route its two bools side by side (64; it was 72).
func TestRouteSizes(t *testing.T) {
	if got := unsafe.Sizeof(RouteLocation{}); got != 88 {
		t.Errorf("RouteLocation is %d bytes, want 88", got)
	}
	if got := unsafe.Sizeof(Route{}); got != 64 {
		t.Errorf("Route is %d bytes, want 64", got)
	}
}

// Lua reads a location's JSON by name: the options, embedded, are fields
// of the location's object as they were, and none is sent for a location
// without options. Read back (apply's saved state), it is the location it
// was.
func TestRouteLocationJSON(t *testing.T) {
	full := RouteLocation{Path: "/p", Exact: true, Regex: true, NoRegex: true, SSLRedirect: true, PreserveTrailingSlash: true,
		LoopGuard: true, Backend: "ns/svc:80", Profile: "@p", Rule: &RouteRule{Route: "ns/r"}}.WithOptions(RouteOptions{
		Ingress: "ns/ing", AuthFile: "auth/f", MaxBody: 1024, ConnectTimeout: 1, SendTimeout: 2, ReadTimeout: 3,
		RedirectHost: "www.example.com"})
	full.Metric = "m"
	data, err := json.Marshal(full)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"path": "/p", "exact": true, "regex": true, "noregex": true, "ssl_redirect": true,
		"preserve_trailing_slash": true, "loop_guard": true, "backend": "ns/svc:80", "profile": "@p", "ingress": "ns/ing",
		"auth_file": "auth/f", "max_body": 1024.0, "connect_timeout": 1.0, "send_timeout": 2.0, "read_timeout": 3.0,
		"redirect_host": "www.example.com", "metric": "m", "rule": got["rule"]}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("JSON %s\nwant the fields %v", data, want)
	}
	// The labels come where they came when they were an option: after
	// the options, before the rule.
	if i, j, k := bytes.Index(data, []byte(`"redirect_host"`)), bytes.Index(data, []byte(`"metric"`)), bytes.Index(data, []byte(`"rule"`)); !(i < j && j < k) {
		t.Errorf("JSON %s: want redirect_host, metric, rule in that order", data)
	}
	var back RouteLocation
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if !back.Equal(full) {
		t.Errorf("read back %+v, want %+v", back, full)
	}

	plain := RouteLocation{Path: "/", Backend: "ns/svc:80"}.WithOptions(RouteOptions{})
	if plain.RouteOptions != nil {
		t.Error("no options: want no RouteOptions")
	}
	data, err = json.Marshal(plain)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != `{"path":"/","backend":"ns/svc:80"}` {
		t.Errorf("no options: JSON %s", data)
	}
	back = RouteLocation{}
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back.RouteOptions != nil || !back.Equal(plain) {
		t.Errorf("no options: read back %+v", back)
	}
}

// Equal compares the options by value, and WithOptions leaves the options
// of the location it copies (which other copies share) as they were.
func TestRouteLocationOptions(t *testing.T) {
	a := RouteLocation{Path: "/"}.WithOptions(RouteOptions{MaxBody: 10})
	b := RouteLocation{Path: "/"}.WithOptions(RouteOptions{MaxBody: 10})
	if a.RouteOptions == b.RouteOptions || !a.Equal(b) {
		t.Error("equal options in two allocations: want Equal")
	}
	if c := a.WithOptions(RouteOptions{MaxBody: 20}); c.Equal(a) {
		t.Error("other options: want not Equal")
	}
	if a.Options().MaxBody != 10 {
		t.Errorf("WithOptions changed the options it copied: %+v", a.Options())
	}
	empty := RouteLocation{Path: "/", RouteOptions: &RouteOptions{}}
	if !empty.Equal(RouteLocation{Path: "/"}) {
		t.Error("zero options and none: want Equal")
	}
	if (RouteLocation{}).Options() != (RouteOptions{}) {
		t.Error("no options: want the zero RouteOptions")
	}
}
