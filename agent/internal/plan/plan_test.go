package plan

import (
	"reflect"
	"testing"

	"github.com/restysync/restysync/agent/internal/model"
)

func ep(addr string) model.Endpoint { return model.Endpoint{Address: addr, Port: 80} }

func TestCompute(t *testing.T) {
	loc := model.Location{Path: "/", PathType: model.PathPrefix, Backend: "ns/a:80", Ingress: "ns/i"}
	base := model.Model{
		Servers:  []model.Server{{Host: "a.example.com", Locations: []model.Location{loc}}},
		Backends: []model.Backend{{Name: "ns/a:80", Endpoints: []model.Endpoint{ep("10.0.0.1")}}},
	}
	moved := base
	moved.Backends = []model.Backend{{Name: "ns/a:80", Endpoints: []model.Endpoint{ep("10.0.0.2")}}}
	rehosted := base
	rehosted.Servers = []model.Server{{Host: "b.example.com", Locations: []model.Location{loc}}}
	held := map[string][]model.Endpoint{"ns/a:80": {ep("10.0.0.1")}}

	tests := []struct {
		name    string
		applied *model.Model
		held    map[string][]model.Endpoint
		next    model.Model
		want    Plan
	}{
		{"first sync reloads and pushes all", nil, nil, base,
			Plan{Reload: true, Upserts: base.Backends}},
		{"nothing changed", &base, held, base, Plan{}},
		{"endpoint moved: push only", &base, held, moved,
			Plan{Upserts: moved.Backends}},
		{"host changed: reload, no push", &base, held, rehosted,
			Plan{Reload: true}},
		{"backend gone: removed", &base, map[string][]model.Endpoint{"ns/a:80": {ep("10.0.0.1")}, "ns/old:80": nil}, base,
			Plan{Removes: []string{"ns/old:80"}}},
		{"lua lost its state: push all, no reload", &base, map[string][]model.Endpoint{}, base,
			Plan{Upserts: base.Backends}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Compute(tt.applied, tt.held, tt.next)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Compute() = %+v, want %+v", got, tt.want)
			}
		})
	}
}
