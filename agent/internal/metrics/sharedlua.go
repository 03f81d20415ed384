package metrics

import (
	"context"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/restysync/restysync/agent/internal/luaapi"
)

// sharedLua lets one Metrics.Gather ask Lua for GET /metrics once, for
// both the Lua families (luaGatherer) and the nginx_process_* series of
// the ingress-nginx collector, when both read the same Lua. At 50,000
// backends the answer is 4 MB that nginx writes in the worker that serves
// traffic, and the ingress-nginx collector only wants its nginx part.
// Gathers that share are taken one at a time (Metrics.gatherMu); a gather
// of the registry alone (Registry().Gather) reads Lua itself.
type sharedLua struct {
	lua LuaReader
	cur atomic.Pointer[luaRead] // the gather under way's read; nil outside one
}

// luaRead is one gather's read of Lua, made by its first caller.
type luaRead struct {
	once sync.Once
	m    luaapi.LuaMetrics
	err  error
}

// Metrics is the gather under way's read of Lua, or a read of its own
// outside one.
func (s *sharedLua) Metrics(ctx context.Context) (luaapi.LuaMetrics, error) {
	r := s.cur.Load()
	if r == nil {
		return s.lua.Metrics(ctx)
	}
	r.once.Do(func() { r.m, r.err = s.lua.Metrics(ctx) })
	return r.m, r.err
}

// sameLua says whether a and b are the same reader (comparable, equal):
// the agent passes its one LuaClient as both.
func sameLua(a LuaReader, b IngressNginxLua) bool {
	return a != nil && b != nil && reflect.TypeOf(a).Comparable() && a == LuaReader(b)
}
