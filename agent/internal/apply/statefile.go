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
// and logs/). The file is written off the sync path, at most once a
// second (stateWriter).

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"time"

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

// savedState is one save's content: the head and each item's JSON, which
// no one changes once encoded (a change of an item drops its cache entry
// for a new slice), so a writer can put the file together while the sync
// goes on.
type savedState struct {
	head                    []byte
	certs, backends, routes [][]byte
}

// snapshot returns what l holds, pushed for the config of configHash
// with profiles, or nil when nothing changed since the last snapshot
// (and none failed since). A certificate whose key the agent does not
// know (read back after a restart, and not in the model with the same
// content) is left out: Lua has it, the next push brings it.
func (l *LuaState) snapshot(configHash string, profiles []render.Profile) (*savedState, error) {
	if !l.unsaved && configHash == l.savedHash {
		return nil, nil
	}
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
	s := &savedState{head: head[:len(head)-1], backends: make([][]byte, 0, len(l.backends)), routes: make([][]byte, 0, len(l.routes))}
	for name, held := range l.certs {
		pem, ok := l.pems[name]
		if !ok || pem.hash != held.Hash {
			continue
		}
		data, err := json.Marshal(pem.payload)
		if err != nil {
			return nil, fmt.Errorf("encoding certificate %s for the saved state: %w", name, err)
		}
		s.certs = append(s.certs, data)
	}
	for name, b := range l.backends {
		data, err := cached(l.encodedBackends, name, func() any { return luaapi.NewBackendPayload(b) })
		if err != nil {
			return nil, err
		}
		s.backends = append(s.backends, data)
	}
	for host, r := range l.routes {
		data, err := cached(l.encodedRoutes, host, func() any { return luaapi.RoutePayloads([]model.Route{r})[0] })
		if err != nil {
			return nil, err
		}
		s.routes = append(s.routes, data)
	}
	l.unsaved, l.savedHash = false, configHash
	return s, nil
}

// encode writes the file to w.
func (s *savedState) encode(w io.Writer) error {
	b := bufio.NewWriterSize(w, 64<<10)
	b.Write(s.head)
	for i, section := range [][][]byte{s.certs, s.backends, s.routes} {
		b.WriteString([]string{`,"certificates":{"upserts":[`, `]},"backends":{"upserts":[`, `]},"routes":{"upserts":[`}[i])
		for j, item := range section {
			if j > 0 {
				b.WriteByte(',')
			}
			b.Write(item)
		}
	}
	b.WriteString(`]}}`)
	return b.Flush() // the first error of any write
}

// write writes s to StateName in dir, streamed: at 50,000 hosts the file
// is over 10 MB, which a buffer would hold between saves. Not synced to
// disk: other processes see the renamed file at once, and a file a power
// cut tore is read as bad (nginx starts empty, as it would without one).
func (s *savedState) write(dir string) error {
	if err := writeFileAtomicFrom(filepath.Join(dir, StateName), s.encode, 0o600, false); err != nil {
		return fmt.Errorf("saving the state for nginx's next start: %w", err)
	}
	return nil
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

// Save writes what l holds to StateName in dir now, when it changed since
// the last save, for the config of configHash with profiles. It says
// whether it wrote. The stage saves through a stateWriter instead, off
// the sync path.
func (l *LuaState) Save(dir, configHash string, profiles []render.Profile) (bool, error) {
	s, err := l.snapshot(configHash, profiles)
	if err != nil || s == nil {
		return false, err
	}
	if err := s.write(dir); err != nil {
		l.unsaved = true
		return false, err
	}
	return true, nil
}

// stateWriter writes saved states off the sync path, one at a time and at
// most one per saveInterval. An endpoint change at 5,000 backends would
// otherwise write megabytes before the next sync could start (B1's tail);
// the cost is a file up to about a second older than Lua, which the agent
// corrects after a cold start as it does any difference (it reads back
// what nginx loaded and pushes what changed).
type stateWriter struct {
	mu   sync.Mutex
	busy bool      // a write runs
	last time.Time // when the last write started
	err  error     // the last write's error, not yet taken
	done chan struct{}
}

// saveInterval is the least time between two writes of the saved state.
const saveInterval = time.Second

// ready says a new write may start now: none runs, and the last started
// saveInterval ago. It returns the failed write's error once.
func (w *stateWriter) ready(now time.Time) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.err
	w.err = nil
	return !w.busy && now.Sub(w.last) >= saveInterval, err
}

// start writes s to dir in the background.
func (w *stateWriter) start(dir string, s *savedState, now time.Time) {
	w.mu.Lock()
	w.busy, w.last, w.done = true, now, make(chan struct{})
	done := w.done
	w.mu.Unlock()
	go func() {
		defer close(done)
		err := s.write(dir)
		w.mu.Lock()
		w.busy, w.err = false, err
		w.mu.Unlock()
	}()
}

// wait waits for the running write, if one runs, and returns its error.
func (w *stateWriter) wait() error {
	w.mu.Lock()
	done := w.done
	w.mu.Unlock()
	if done != nil {
		<-done
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.err
	w.err = nil
	return err
}
