package luaapi

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

var backendListSeeds = []string{
	`[]`, ` [ ] `, `null`, `[{}]`,
	`[{"name":"default\/web:80","endpoints":3,"requests":10,"failures":1},{"name":"a\/b:1","endpoints":0,"requests":0,"failures":0}]`,
	"[\n {\"failures\" : 5 , \"requests\":6,\"endpoints\":7,\"name\":\"z\\/r:1\"} \n]",
	`[{"name":"a\/quote\"back\\slash\nnl:80","endpoints":1}]`,
	`[{"name":"b\/\u00e9t\u00e9:https","endpoints":0}]`,
	"[{\"name\":\"bad\\/\xff\xfe:1\",\"endpoints\":2}]",
	`[{"name":"x","name":"y","endpoints":1,"endpoints":2}]`,
	`[{"Name":"x","ENDPOINTS":1}]`,
	`[{"name":"x","weight":3}]`,
	`[{"name":"x","requests":1e3}]`,
	`[{"name":"x","requests":1.0}]`,
	`[{"name":"x","requests":-0,"failures":-12}]`,
	`[{"name":"x","requests":9223372036854775807}]`,
	`[{"name":"x","requests":9223372036854775808}]`,
	`[{"name":"x","requests":123456789012345678}]`,
	`[{"name":"x","requests":null,"endpoints":"3"}]`,
	`[{"name":null}]`, `[{"name":1}]`, `[1]`, `[{"name":"x"},]`, `[{"name":"x"}`, `{"name":"x"}`,
	`[{"name":"x\u0000y"}]`, `[{"name":"\ud83d\ude00"}]`, `[{"name":"\ud83d"}]`, `[{"name":"x","endpoints":01}]`,
	`[{"name":"x"}] x`, `[{"name":"x\/"}]`, `[{"name":"\\\/"}]`,
}

// sameAsJSON checks that BackendList reads data as encoding/json reads it
// into a []BackendMetrics: the same entries, or an error for both.
func sameAsJSON(t *testing.T, data []byte) {
	var want []BackendMetrics
	wantErr := json.Unmarshal(data, &want)
	var got BackendList
	gotErr := json.Unmarshal(data, &got)
	if (wantErr == nil) != (gotErr == nil) {
		t.Fatalf("%q: error %v, encoding/json's %v", data, gotErr, wantErr)
	}
	if wantErr == nil && !sameBackends(got, want) {
		t.Fatalf("%q:\n got %#v\nwant %#v", data, slices.Collect(got.All()), want)
	}
	// Called directly, without encoding/json's check of the input first.
	var direct BackendList
	directErr := direct.UnmarshalJSON(data)
	if wantErr == nil && (directErr != nil || !sameBackends(direct, want)) {
		t.Fatalf("%q direct: %#v, %v; want %#v", data, slices.Collect(direct.All()), directErr, want)
	}
}

// sameBackends says whether l holds want's entries, in order (an empty
// list is as good as none: encoding/json reads null as nil).
func sameBackends(l BackendList, want []BackendMetrics) bool {
	got := slices.Collect(l.All())
	return l.Len() == len(want) && (len(want) == 0 || reflect.DeepEqual(got, want))
}

// BackendList's own reader gives what encoding/json gives, for what Lua
// writes and for what it does not.
func TestBackendListAsJSON(t *testing.T) {
	for _, s := range backendListSeeds {
		sameAsJSON(t, []byte(s))
	}
	// The reader itself takes what Lua writes, rather than handing it on.
	var b strings.Builder
	b.WriteString("[")
	for i := range 100 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"name":"ns-%d\/svc:%d","endpoints":%d,"requests":%d,"failures":%d}`, i, i, i%3, i*1000, -i)
	}
	b.WriteString("]")
	list, ok := readBackends([]byte(b.String()))
	entries := slices.Collect(list.All())
	if !ok || list.Len() != 100 || len(entries) != 100 || entries[42] != (BackendMetrics{Name: "ns-42/svc:42", Endpoints: 0, Requests: 42000, Failures: -42}) {
		t.Fatalf("readBackends: ok %v, %d entries", ok, list.Len())
	}
	if got := BackendListOf(entries...); !sameBackends(got, entries) {
		t.Errorf("BackendListOf: %+v", slices.Collect(got.All()))
	}
	sameAsJSON(t, []byte(b.String()))
}

func FuzzBackendList(f *testing.F) {
	for _, s := range backendListSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { sameAsJSON(t, data) })
}
