package luaapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
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
	gotPure := pureLuaMetrics{want.Backends, got.BalancerRebuilds, got.RegexFailures, got.Certificates,
		got.Counting, got.APIDenied, got.LoopRefused, got.Nginx}
	if !sameBackends(got.Backends, want.Backends) || !reflect.DeepEqual(gotPure, want) {
		gotPure.Backends = slices.Collect(got.Backends.All())
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

// ReadLuaMetrics, reading from a stream a byte at a time, gives what
// DecodeLuaMetrics gives when it takes the answer (ok), and hands on what
// it does not read itself, Lua's shape always taken: an answer with more
// backends than one window holds, and names, with escapes, longer than
// the last answer's hint.
func TestReadLuaMetricsAsDecode(t *testing.T) {
	var big strings.Builder
	big.WriteString(`{"backends":[`)
	for i := range 3000 {
		if i > 0 {
			big.WriteByte(',')
		}
		fmt.Fprintf(&big, `{"name":"ns-%04d\/svc-\"%d\\:http","endpoints":%d,"requests":%d,"failures":%d}`, i, i, i%5, i*7, i%3)
	}
	big.WriteString(`],"balancer_rebuilds":1,"regex_failures":2,"certificates":3,"counting":true,"api_denied":4,"loop_refused":5,"nginx":null}` + "\n")
	seeds := append([]string{big.String()}, luaMetricsSeeds...)
	for _, s := range backendListSeeds {
		seeds = append(seeds, `{"backends":`+s+`,"counting":true}`)
	}
	for i, s := range seeds {
		want, wantErr := DecodeLuaMetrics([]byte(s))
		_, luaShape := readLuaMetrics([]byte(s))
		for _, hint := range []StreamHint{{}, {PackedBytes: 10, NameBytes: 100}, {PackedBytes: 50000, NameBytes: 1 << 20}} {
			got, next, ok, err := ReadLuaMetrics(iotest.OneByteReader(strings.NewReader(s)), hint)
			if err != nil || ok != luaShape {
				t.Fatalf("seed %d (%.40q): ok %v, error %v; readLuaMetrics's ok %v", i, s, ok, err, luaShape)
			}
			if !ok {
				continue
			}
			if wantErr != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d (%.40q):\n got %#v\nwant %#v, %v", i, s, got, want, wantErr)
			}
			if next.NameBytes != len(got.Backends.names) || next.PackedBytes != len(got.Backends.packed) {
				t.Errorf("seed %d: hint %+v for %d backends", i, next, got.Backends.Len())
			}
		}
	}
	if _, _, ok, _ := ReadLuaMetrics(strings.NewReader(big.String()), StreamHint{}); !ok {
		t.Error("ReadLuaMetrics handed on what Lua writes")
	}
	// An entry longer than half the window is handed on.
	long := `{"backends":[{"name":"` + strings.Repeat("x", streamWindow) + `","endpoints":1,"requests":1,"failures":0}],"counting":true}`
	if _, _, ok, err := ReadLuaMetrics(strings.NewReader(long), StreamHint{}); ok || err != nil {
		t.Errorf("a 64 KB name: ok %v, error %v; want it handed on", ok, err)
	}
	// The stream's error is returned, not taken for another shape.
	broken := io.MultiReader(strings.NewReader(big.String()[:40000]), iotest.ErrReader(errors.New("reset")))
	if _, _, ok, err := ReadLuaMetrics(broken, StreamHint{}); ok || err == nil || err.Error() != "reset" {
		t.Errorf("a stream cut by an error: ok %v, error %v; want the error", ok, err)
	}
}
