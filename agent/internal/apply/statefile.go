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
	"slices"
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
// all: {"upserts":[...]}}. It is put together from each item's kept
// JSON (savedItems): at 10,000 routes a save after one endpoint changed
// encodes that backend, not everything.

// savedState is one save's content: the head and each item's JSON, which
// no one changes once encoded (a change of an item drops its cache entry
// for a new slice), so a writer can put the file together while the sync
// goes on.
type savedState struct {
	head                    []byte
	certs, backends, routes savedList
}

// snapshot returns what l holds, pushed for the config of configHash
// with profiles, or nil when nothing changed since the last snapshot
// (and none failed since). A certificate whose key the agent does not
// know (read back after a restart, and not in the model with the same
// content) is left out: Lua has it, the next push brings it. It costs
// the certificates, backends and routes that changed since the last
// snapshot (their JSON), not a walk of every one (savedItems).
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
	s := &savedState{head: head[:len(head)-1]}
	if s.certs, err = l.savedCerts.take(func(name string) any { return l.pems[name].payload }); err != nil {
		return nil, err
	}
	if s.backends, err = l.savedBackends.take(func(name string) any { return luaapi.NewBackendPayload(l.backends[name]) }); err != nil {
		return nil, err
	}
	if s.routes, err = l.savedRoutes.take(func(host string) any { return luaapi.RoutePayloads([]model.Route{l.routes[host]})[0] }); err != nil {
		return nil, err
	}
	l.unsaved, l.savedHash = false, configHash
	return s, nil
}

// savedItems is the JSON of each backend (route, certificate) Lua holds,
// for the saved state, kept as the list a save hands its writer: at 50,000
// hosts a walk of the records and a lookup of each item's JSON took tens
// of milliseconds of the sync loop once a second, and garbage the size of
// the list. The record tells it which names changed (changed, remove);
// take encodes those and hands out the list, which stays as it was while
// the writer reads it. The list is in chunks of savedChunk items, and the
// first change of a chunk after a take copies that chunk (and the list of
// chunks), not the list: a change after a save at 50,000 backends copied
// 1.2 MB of it, now about 10 KB. The order of the items is not the
// records' (a removed item's place takes the last one); the file does not
// need one.
type savedItems struct {
	at    map[string]int // each name's place in names and json
	names []string
	json  savedList // nil item: not encoded since it changed
	// stale are the names whose JSON is nil, once each (some may have
	// been removed since).
	stale []string
	// epoch counts the takes; owned is the epoch since which json's list
	// of chunks was this one's own, chunkOwned each chunk's: anything
	// owned before the last take is shared with its writer, and is copied
	// before it changes.
	epoch, owned uint64
	chunkOwned   []uint64
}

// savedChunk is how many items a chunk of a savedList holds.
const savedChunk = 256

// savedList is a list of JSON items in chunks of savedChunk (the last one
// may be shorter).
type savedList struct{ chunks [][][]byte }

// len is how many items l holds.
func (l savedList) len() int {
	if len(l.chunks) == 0 {
		return 0
	}
	return (len(l.chunks)-1)*savedChunk + len(l.chunks[len(l.chunks)-1])
}

func (l savedList) at(i int) []byte { return l.chunks[i/savedChunk][i%savedChunk] }

// all returns the items in order, in one slice.
func (l savedList) all() [][]byte {
	var out [][]byte
	for _, c := range l.chunks {
		out = append(out, c...)
	}
	return out
}

// changed says the item of name is new or changed.
func (s *savedItems) changed(name string) {
	if s.at == nil {
		s.at = map[string]int{}
	}
	i, ok := s.at[name]
	if !ok {
		s.at[name] = len(s.names)
		s.names = append(s.names, name)
		s.push(nil)
		s.stale = append(s.stale, name)
		return
	}
	if s.json.at(i) != nil {
		s.set(i, nil)
		s.stale = append(s.stale, name)
	}
}

// remove says the item of name is gone.
func (s *savedItems) remove(name string) {
	i, ok := s.at[name]
	if !ok {
		return
	}
	last := len(s.names) - 1
	s.set(i, s.json.at(last))
	s.names[i] = s.names[last]
	s.at[s.names[i]] = i
	s.names = s.names[:last]
	s.pop()
	delete(s.at, name)
}

// reset forgets every item: the record was read back whole.
func (s *savedItems) reset() { *s = savedItems{} }

// ownChunks makes the list of chunks this one's own, copying it when a
// save holds it.
func (s *savedItems) ownChunks() {
	if s.owned != s.epoch {
		s.json.chunks, s.owned = slices.Clone(s.json.chunks), s.epoch
	}
}

// ownChunk makes chunk c this one's own, copying it when a save holds it.
func (s *savedItems) ownChunk(c int) {
	if s.chunkOwned[c] != s.epoch {
		s.ownChunks()
		s.json.chunks[c], s.chunkOwned[c] = append(make([][]byte, 0, savedChunk), s.json.chunks[c]...), s.epoch
	}
}

// set puts data at i.
func (s *savedItems) set(i int, data []byte) {
	c := i / savedChunk
	s.ownChunk(c)
	s.json.chunks[c][i%savedChunk] = data
}

// push adds data after the last item.
func (s *savedItems) push(data []byte) {
	s.ownChunks()
	if n := len(s.json.chunks); n == 0 || len(s.json.chunks[n-1]) == savedChunk {
		s.json.chunks = append(s.json.chunks, make([][]byte, 0, savedChunk))
		s.chunkOwned = append(s.chunkOwned, s.epoch)
	}
	c := len(s.json.chunks) - 1
	s.ownChunk(c)
	s.json.chunks[c] = append(s.json.chunks[c], data)
}

// pop drops the last item.
func (s *savedItems) pop() {
	s.ownChunks()
	c := len(s.json.chunks) - 1
	if s.json.chunks[c] = s.json.chunks[c][:len(s.json.chunks[c])-1]; len(s.json.chunks[c]) == 0 {
		s.json.chunks, s.chunkOwned = s.json.chunks[:c], s.chunkOwned[:c]
	}
}

// take encodes the payload of each stale item and returns the JSON of
// every item, which no one changes after.
func (s *savedItems) take(payload func(name string) any) (savedList, error) {
	for k, name := range s.stale {
		i, ok := s.at[name]
		if !ok || s.json.at(i) != nil {
			continue
		}
		data, err := json.Marshal(payload(name))
		if err != nil {
			s.stale = s.stale[k:]
			return savedList{}, fmt.Errorf("encoding %s for the saved state: %w", name, err)
		}
		s.set(i, data)
	}
	// Let go of the list, not only empty it: after a first save of every
	// item it would keep room for all of them (0.8 MB at 50,000 hosts,
	// for backends and for routes) when later saves name a few.
	s.stale = nil
	s.epoch++
	return savedList{chunks: s.json.chunks[:len(s.json.chunks):len(s.json.chunks)]}, nil
}

// encode writes the file to w.
func (s *savedState) encode(w io.Writer) error {
	b := bufio.NewWriterSize(w, 64<<10)
	b.Write(s.head)
	for i, section := range []savedList{s.certs, s.backends, s.routes} {
		b.WriteString([]string{`,"certificates":{"upserts":[`, `]},"backends":{"upserts":[`, `]},"routes":{"upserts":[`}[i])
		first := true
		for _, chunk := range section.chunks {
			for _, item := range chunk {
				if !first {
					b.WriteByte(',')
				}
				first = false
				b.Write(item)
			}
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
