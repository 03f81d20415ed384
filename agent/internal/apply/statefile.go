package apply

// The saved state. A cold-started nginx has lost what Lua held, and would
// answer 404 for every host until the agent pushed again (or forever, with
// the agent down). So after each plan that changed what Lua holds, the
// agent writes all of it to StateName in the shared dir, and the master
// loads it at a cold start (lua/restysync/state.lua), before the first
// request; the agent then reads it back (LuaState.Observe) and pushes only
// what changed since. The file is written after the push, never before:
// Lua serves a change first, the file follows.
//
// Which profiles a loaded route may jump to is decided by the nginx.conf
// nginx starts with, not by the file: render puts that config's profile
// names into its init_by_lua, so they are the same bytes nginx loads, and
// the loader leaves out a route whose profile is not among them (a 500
// for a missing named location); the file's own config hash and profiles
// only say what it was pushed for. The file holds private keys: mode 0600,
// like the config API's secret, in the shared dir's top folder, where no
// path a tenant or the ConfigMap names can reach (those are under auth/
// and logs/).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/restysync/restysync/agent/internal/luaapi"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
)

// StateName is the saved state's file in the shared dir;
// lua/restysync/state.lua reads the same name.
const StateName = "restysync.state"

// The file is JSON: {"config_hash", "profiles", and "certificates",
// "backends", "routes" each as the body of the POST that would push it
// all: {"upserts":[...]}}. It is put together from each item's cached
// JSON (LuaState.encoded): at 10,000 routes a save after one endpoint
// changed encodes that backend, not everything.

// encodeState returns the file's bytes (in l.saveBuf, good until the next
// call) for what l holds, pushed for the
// config of configHash with profiles. A certificate whose key the agent
// does not know (read back after a restart, and not in the model with the
// same content) is left out: Lua has it, the next push brings it.
func (l *LuaState) encodeState(configHash string, profiles []render.Profile) ([]byte, error) {
	names := make([]string, len(profiles))
	for i, p := range profiles {
		names[i] = p.Name
	}
	head, err := json.Marshal(struct {
		ConfigHash string   `json:"config_hash"`
		Profiles   []string `json:"profiles"`
	}{configHash, names})
	if err != nil {
		return nil, fmt.Errorf("encoding the saved state: %w", err)
	}
	buf := &l.saveBuf
	buf.Reset()
	buf.Write(head[:len(head)-1])

	buf.WriteString(`,"certificates":{"upserts":[`)
	first := true
	for name, held := range l.certs {
		pem, ok := l.pems[name]
		if !ok || pem.hash != held.Hash {
			continue
		}
		data, err := json.Marshal(pem.payload)
		if err != nil {
			return nil, fmt.Errorf("encoding certificate %s for the saved state: %w", name, err)
		}
		first = appendItem(buf, data, first)
	}

	buf.WriteString(`]},"backends":{"upserts":[`)
	first = true
	for name, b := range l.backends {
		data, err := cached(l.encodedBackends, name, func() any { return luaapi.NewBackendPayload(b) })
		if err != nil {
			return nil, err
		}
		first = appendItem(buf, data, first)
	}

	buf.WriteString(`]},"routes":{"upserts":[`)
	first = true
	for host, r := range l.routes {
		data, err := cached(l.encodedRoutes, host, func() any { return luaapi.RoutePayloads([]model.Route{r})[0] })
		if err != nil {
			return nil, err
		}
		first = appendItem(buf, data, first)
	}
	buf.WriteString(`]}}`)
	return buf.Bytes(), nil
}

// cached returns the JSON of the item under key in cache, encoding
// payload() when it is not there.
func cached(cache map[string][]byte, key string, payload func() any) ([]byte, error) {
	if data, ok := cache[key]; ok {
		return data, nil
	}
	data, err := json.Marshal(payload())
	if err != nil {
		return nil, fmt.Errorf("encoding %s for the saved state: %w", key, err)
	}
	cache[key] = data
	return data, nil
}

func appendItem(buf *bytes.Buffer, data []byte, first bool) bool {
	if !first {
		buf.WriteByte(',')
	}
	buf.Write(data)
	return false
}

// Save writes what l holds to StateName in dir when it changed since the
// last Save (or a Save failed), for the config of configHash with
// profiles. It says whether it wrote.
func (l *LuaState) Save(dir, configHash string, profiles []render.Profile) (bool, error) {
	if !l.unsaved && configHash == l.savedHash {
		return false, nil
	}
	data, err := l.encodeState(configHash, profiles)
	if err != nil {
		return false, err
	}
	// Not synced to disk: other processes see the renamed file at once,
	// and a file a power cut tore is read as bad (nginx starts empty, as it
	// would without one). A sync costs most of a save (tens of ms at
	// 10,000 routes), which the next sync would wait for.
	if err := writeFileAtomic(filepath.Join(dir, StateName), data, 0o600, false); err != nil {
		return false, fmt.Errorf("saving the state for nginx's next start: %w", err)
	}
	l.unsaved, l.savedHash = false, configHash
	return true, nil
}
