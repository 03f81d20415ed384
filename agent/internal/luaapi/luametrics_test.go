package luaapi

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// pureLuaMetrics is LuaMetrics as encoding/json alone reads it.
type pureLuaMetrics struct {
	Backends         []BackendMetrics `json:"backends"`
	BalancerRebuilds int64            `json:"balancer_rebuilds"`
	RegexFailures    int64            `json:"regex_failures"`
	Certificates     int              `json:"certificates"`
	Counting         bool             `json:"counting"`
	APIDenied        int64            `json:"api_denied"`
	LoopRefused      int64            `json:"loop_refused"`
	Nginx            *NginxProcess    `json:"nginx,omitempty"`
}

const luaMetricsSeed = `{"backends":[{"name":"default\/web:80","endpoints":3,"requests":10,"failures":1}],"balancer_rebuilds":17,"regex_failures":2,"certificates":40,"counting":true,"api_denied":1,"loop_refused":0,` +
	`"nginx":{"procs":3,"cpu_seconds":12.5,"resident_bytes":123456789,"connections":{"active":4,"reading":0,"writing":1,"waiting":3}}}`

var luaMetricsSeeds = []string{
	luaMetricsSeed, `{}`, ` { } `, `null`, `[]`, `{"backends":[]}`, `{"backends":null}`,
	strings.Replace(luaMetricsSeed, `"nginx":{`, `"nginx":null,"x":{`, 1),
	strings.Replace(luaMetricsSeed, `"counting":true`, `"counting":false`, 1),
	strings.Replace(luaMetricsSeed, `"counting":true`, `"counting":1`, 1),
	strings.Replace(luaMetricsSeed, `"certificates":40`, `"certificates":4e1`, 1),
	strings.Replace(luaMetricsSeed, `"certificates":40`, `"Certificates":40`, 1),
	strings.Replace(luaMetricsSeed, `"certificates":40`, `"certificates":40,"certificates":41`, 1),
	strings.Replace(luaMetricsSeed, `"backends":[`, `"backends":[],"backends":[`, 1),
	strings.Replace(luaMetricsSeed, `"procs":3`, `"procs":"3"`, 1),
	strings.Replace(luaMetricsSeed, `"procs":3`, `"procs":3,"x":"}\"{"`, 1),
	strings.Replace(luaMetricsSeed, `"cpu_seconds":12.5`, `"cpu_seconds":12.5}`, 1),
	strings.Replace(luaMetricsSeed, `"nginx":{`, `"nginx":[`, 1),
	luaMetricsSeed + "\n", luaMetricsSeed + "}", luaMetricsSeed[:len(luaMetricsSeed)-1],
}

// sameLuaMetrics checks that DecodeLuaMetrics reads data as encoding/json
// reads it into a pureLuaMetrics: the same values, or an error for both.
func sameLuaMetrics(t *testing.T, data []byte) {
	var want pureLuaMetrics
	wantErr := json.Unmarshal(data, &want)
	got, gotErr := DecodeLuaMetrics(data)
	if (wantErr == nil) != (gotErr == nil) {
		t.Fatalf("%q: error %v, encoding/json's %v", data, gotErr, wantErr)
	}
	if wantErr != nil {
		return
	}
	gotPure := pureLuaMetrics{[]BackendMetrics(got.Backends), got.BalancerRebuilds, got.RegexFailures, got.Certificates,
		got.Counting, got.APIDenied, got.LoopRefused, got.Nginx}
	if !reflect.DeepEqual(gotPure, want) {
		t.Fatalf("%q:\n got %#v\nwant %#v", data, gotPure, want)
	}
}

// DecodeLuaMetrics gives what encoding/json gives, for what Lua writes
// and for what it does not; what Lua writes it reads itself.
func TestDecodeLuaMetricsAsJSON(t *testing.T) {
	for _, s := range luaMetricsSeeds {
		sameLuaMetrics(t, []byte(s))
	}
	for _, s := range backendListSeeds {
		sameLuaMetrics(t, []byte(`{"backends":`+s+`,"counting":true}`))
	}
	if _, ok := readLuaMetrics([]byte(luaMetricsSeed)); !ok {
		t.Error("readLuaMetrics handed on what Lua writes")
	}
}

func FuzzDecodeLuaMetrics(f *testing.F) {
	for _, s := range luaMetricsSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { sameLuaMetrics(t, data) })
}
