package source

import (
	"testing"

	"github.com/restysync/restysync/agent/internal/model"
)

// A changed Service whose endpoints nginx.conf names (a stream backend)
// takes the fast path off; one of HTTP backends only does not.
func TestStreamUsesAny(t *testing.T) {
	st := model.Stream{Backends: []model.StreamBackend{{Name: "tcp:db/postgres:5432", Namespace: "db", Service: "postgres"}}}
	if StreamUsesAny(st, []ServiceKey{{"default", "web"}}) {
		t.Error("an HTTP Service's change needs a new nginx.conf")
	}
	if !StreamUsesAny(st, []ServiceKey{{"default", "web"}, {"db", "postgres"}}) {
		t.Error("a stream backend's Service changed and nginx.conf was kept")
	}
}
