package luaapi

import (
	"encoding/json"
	"testing"

	"github.com/restysync/restysync/agent/internal/model"
)

// A backend's payload leaves the default policy out and shares the
// model's other one, without a copy: the saved state encodes some 200
// backends' payloads a save, and a copy of the Policy made each of them
// some 300 bytes of garbage, the default one too.
func TestNewBackendPayloadSharesThePolicy(t *testing.T) {
	endpoints := []model.Endpoint{{Address: "10.0.0.1", Port: 80}}
	ewma := &model.Policy{Algorithm: model.AlgorithmEWMA}
	for _, tt := range []struct {
		backend model.Backend
		want    string
	}{
		{model.Backend{Name: "a", Endpoints: endpoints}, `{"name":"a","endpoints":[{"address":"10.0.0.1","port":80}]}`},
		{model.Backend{Name: "a", Endpoints: endpoints, Policy: &model.Policy{}}, `{"name":"a","endpoints":[{"address":"10.0.0.1","port":80}]}`},
		{model.Backend{Name: "a", Policy: ewma}, `{"name":"a","endpoints":[],"policy":{"algorithm":"ewma"}}`},
	} {
		p := NewBackendPayload(tt.backend)
		if got, _ := json.Marshal(p); string(got) != tt.want {
			t.Errorf("NewBackendPayload(%+v) = %s, want %s", tt.backend, got, tt.want)
		}
		if p.Policy != nil && p.Policy != tt.backend.Policy {
			t.Errorf("NewBackendPayload(%+v): a copy of the policy", tt.backend)
		}
		if allocs := testing.AllocsPerRun(10, func() { p = NewBackendPayload(tt.backend) }); allocs > 0 {
			t.Errorf("NewBackendPayload(%+v): %.0f allocations, want none", tt.backend, allocs)
		}
	}
}
