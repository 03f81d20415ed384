package apply

import (
	"fmt"
	"testing"

	"github.com/restysync/restysync/agent/internal/model"
)

// A save leaves each chunk's list of names it took no larger than the
// names need and an eighth to spare (give or take the allocator's size
// class): at 50,000 routes and backends the lists grown by append held
// about a third more room than names.
func TestSavedNamesSizedAtSave(t *testing.T) {
	l := NewLuaState(nil, nil)
	var bs []model.Backend
	var rs []model.Route
	for i := range 20000 {
		bs = append(bs, model.Backend{Name: fmt.Sprintf("ns-%d/svc-%d:80", i%50, i)})
		rs = append(rs, model.Route{Host: fmt.Sprintf("host-%d.example.com", i)})
	}
	l.holdBackends(bs)
	l.holdRoutes(rs)
	l.unsaved = true
	if _, err := l.snapshot("c1", nil); err != nil {
		t.Fatal(err)
	}
	for kind, s := range map[string]*savedItems{"backends": &l.savedBackends, "routes": &l.savedRoutes} {
		names, room := 0, 0
		for _, c := range s.chunks {
			names += len(c.names)
			room += cap(c.names)
		}
		if names != 20000 || room > names+names/4 {
			t.Errorf("%s: %d names in lists of room for %d, want at most %d", kind, names, room, names+names/4)
		}
	}
}
