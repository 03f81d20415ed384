package apply

// The saved state. A cold-started nginx has lost what Lua held, and would
// answer 404 for every host until the agent pushed again (or forever, with
// the agent down). So after each plan that changed what Lua holds, the
// agent saves all of it in the shared dir, and the master loads it at a
// cold start (lua/restysync/state.lua), before the first request; the
// agent then reads it back (LuaState.Observe) and pushes only what changed
// since. The state is written after the push, never before: Lua serves a
// change first, the file follows.
//
// The state is a folder of chunk files and a small manifest. StateName,
// the manifest, holds the config hash, the profiles, and for each kind
// (certificates, backends, routes) the names of the chunk files in
// StateChunks that hold its items, each a JSON list of the upserts a POST
// would push. The items of a kind are spread over a power of two of chunks
// by a hash of their names (savedItems), about chunkItems each, and a
// chunk file is named by its content (a hash of it), so a name never
// stands for two contents. A save writes the chunks that changed since the
// last one, then the manifest (temp file and rename: a reader sees the old
// manifest or the new, each naming files that exist), then removes the
// chunk files neither the new manifest nor the one it replaced names (a
// cold start that read the old one a moment ago still finds its chunks).
// The writer remembers what its last two manifests named (stateFolder),
// so a save after one change neither reads the old manifest back nor
// lists the folder; the first write after a start or after a failed one
// does both, and removes what a write cut short left there.
// At 50,000 hosts a single file meant 10 MB written for each save once a
// second under endpoint churn, and the agent kept every item's JSON
// (12–16 MB) and an index of them (11 MB) to put it together cheaply;
// now it keeps each chunk's names and file name, encodes the few chunks
// that changed (off the sync path, in the writer), and writes those.
//
// Which profiles a loaded route may jump to is decided by the nginx.conf
// nginx starts with, not by the file: render puts that config's profile
// names into its init_by_lua, so they are the same bytes nginx loads, and
// the loader leaves out a route whose profile is not among them (a 500
// for a missing named location); the file's own config hash and profiles
// only say what it was pushed for. The chunks hold private keys: mode
// 0600 (the folder 0700), like the config API's secret, in the shared
// dir's top folder, where no path a tenant or the ConfigMap names can
// reach (those are under auth/ and logs/). The state is written off the
// sync path, at most once a second (stateWriter).

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/restysync/restysync/agent/internal/luaapi"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/plan"
	"github.com/restysync/restysync/agent/internal/render"
)

// StateName is the saved state's manifest in the shared dir;
// lua/restysync/state.lua reads the same name.
const StateName = "restysync.state"

// StateChunks is the folder of the saved state's chunk files, beside
// StateName; lua/restysync/state.lua reads the same name.
const StateChunks = "restysync.state.d"

// chunkItems is how many items a chunk of the saved state holds on
// average at most: a save after one change encodes and writes one chunk
// (about 25 KB of routes), and the manifest names n/chunkItems to
// 2n/chunkItems chunks of each kind.
const chunkItems = 256

// savedState is one save's content: the head (config hash, profiles), and
// each kind's chunks: the file of those written already, and for the
// others the items as they were when the snapshot was taken, which the
// writer encodes, so that it can put the state together while the sync
// goes on. A chunk is a pointer, 8 bytes of the snapshot's lists: at
// 50,000 hosts they list some 500 chunks a save.
type savedState struct {
	configHash              string
	profiles                []string
	certs, backends, routes []*chunkContent
	// folder is what the earlier writes of the same LuaState left on
	// disk; nil: nothing known (the write reads back and lists).
	folder *stateFolder
}

// chunkContent is a chunk of the saved state: its items as the snapshot
// took them, until the writer has written them to file, then the file.
// The snapshots taken until the chunk changes hand out the same one: a
// snapshot taken before the writer wrote it (a write failed) does not
// copy the items again, and one taken after names the file.
type chunkContent struct {
	// encode returns the chunk's JSON, encoded into buf (encodeJSON);
	// nil once written: the items are let go.
	encode func(buf *bytes.Buffer) ([]byte, error)
	file   string // "" until written
}

// snapshot returns what l holds, pushed for the config of configHash
// with profiles, or nil when nothing changed since the last snapshot
// (and none failed since). A certificate whose key the agent does not
// know (read back after a restart, and not in the model with the same
// content) is left out: Lua has it, the next push brings it. It costs a
// look at each chunk and a copy of the items of those that changed since
// they were last written (savedItems), not a walk of every item.
func (l *LuaState) snapshot(configHash string, profiles []render.Profile) (*savedState, error) {
	if !l.unsaved && configHash == l.savedHash {
		return nil, nil
	}
	names := make([]string, len(profiles))
	for i, p := range profiles {
		names[i] = p.Name
	}
	s := &savedState{configHash: configHash, profiles: names, folder: &l.stateFolder}
	s.certs = l.savedCerts.take(func(names []string) func(*bytes.Buffer) ([]byte, error) {
		items := make([]luaapi.CertificatePayload, len(names))
		for i, name := range names {
			pem := l.pems[name]
			items[i] = luaapi.CertificatePayload{Name: name, Hosts: l.certs[name].Hosts, Cert: pem.cert, Key: pem.key}
		}
		return func(buf *bytes.Buffer) ([]byte, error) { return encodeJSON(buf, items) }
	})
	s.backends = l.savedBackends.take(func(names []string) func(*bytes.Buffer) ([]byte, error) {
		items := make([]model.Backend, len(names))
		for i, name := range names {
			items[i], _ = plan.HeldBackend(l.backends, name)
		}
		return func(buf *bytes.Buffer) ([]byte, error) { return encodeJSON(buf, payloads(items)) }
	})
	// The routes are looked up by the writer: the record's list is never
	// changed (a push makes a new one), so the snapshot keeps it and a
	// copy of the names.
	routes := l.heldRoutes()
	s.routes = l.savedRoutes.take(func(names []string) func(*bytes.Buffer) ([]byte, error) {
		names = slices.Clone(names)
		return func(buf *bytes.Buffer) ([]byte, error) {
			// The payloads made as the routes are looked up: a slice of
			// routes beside them was 30 KB more a save at 256-512 routes.
			items := make([]luaapi.RoutePayload, len(names))
			for i, host := range names {
				r, _ := routes.Get(host)
				items[i] = luaapi.NewRoutePayload(r)
			}
			return encodeJSON(buf, items)
		}
	})
	l.unsaved, l.savedHash = false, configHash
	return s, nil
}

// savedItems are the names of the backends (routes, certificates) Lua
// holds whose content the agent knows, spread over chunks of the saved
// state by a hash of the name, with the file each chunk was last written
// to. The record tells it which names come, change and go (changed,
// remove): a change marks its chunk for the next save to encode again. It
// holds no JSON and no index of the names: a chunk is found by the hash
// of the name, and a name in its chunk (remove) by a look through that
// chunk's names, about chunkItems of them.
type savedItems struct {
	seed   maphash.Seed
	chunks []savedChunk // a power of two of them, once there is an item
	count  int
}

// savedChunk is one chunk of savedItems.
type savedChunk struct {
	names []string
	// content is the chunk as the last snapshot took it, written to its
	// file or not yet; nil: it changed since.
	content *chunkContent
}

// chunkOf returns the chunk name belongs to.
func (s *savedItems) chunkOf(name string) *savedChunk {
	return &s.chunks[maphash.String(s.seed, name)&uint64(len(s.chunks)-1)]
}

// changed says the item of name changed, or, when added, that it is new.
func (s *savedItems) changed(name string, added bool) {
	if s.chunks == nil {
		s.seed, s.chunks = maphash.MakeSeed(), make([]savedChunk, 1)
	}
	c := s.chunkOf(name)
	c.content = nil
	if !added {
		return
	}
	c.names = append(c.names, name)
	if s.count++; s.count > chunkItems*len(s.chunks) {
		s.grow()
	}
}

// grow doubles the chunks, spreading the names again: every chunk is
// written again at the next save (once for each doubling, so about twice
// the items in all).
func (s *savedItems) grow() {
	old := s.chunks
	s.chunks = make([]savedChunk, 2*len(old))
	for _, c := range old {
		for _, name := range c.names {
			to := s.chunkOf(name)
			to.names = append(to.names, name)
		}
	}
}

// remove says the item of name is gone.
func (s *savedItems) remove(name string) {
	if s.chunks == nil {
		return
	}
	c := s.chunkOf(name)
	i := slices.Index(c.names, name)
	if i < 0 {
		return
	}
	last := len(c.names) - 1
	c.names[i], c.names[last] = c.names[last], ""
	c.names, c.content = c.names[:last], nil
	s.count--
}

// reset forgets every item: the record was read back whole.
func (s *savedItems) reset() { *s = savedItems{} }

// take returns the chunks of the saved state: the content of each taken
// since its last change (written or not), and for the others a new one
// of the function encode makes of their names (it copies what it needs:
// the names change after).
func (s *savedItems) take(encode func(names []string) func(*bytes.Buffer) ([]byte, error)) []*chunkContent {
	out := make([]*chunkContent, 0, len(s.chunks))
	for i := range s.chunks {
		c := &s.chunks[i]
		switch {
		case len(c.names) == 0:
		case c.content != nil:
			out = append(out, c.content)
		default:
			if cap(c.names)-len(c.names) > len(c.names)/4 {
				// Grown by append, the list has up to twice the room
				// its names need (a third more at 50,000, over every
				// chunk): sized again, with an eighth to spare so that
				// the next few names come without a new list each.
				c.names = append(make([]string, 0, len(c.names)+len(c.names)/8), c.names...)
			}
			c.content = &chunkContent{encode: encode(c.names)}
			out = append(out, c.content)
		}
	}
	return out
}

// manifest is the saved state's StateName.
type manifest struct {
	ConfigHash   string         `json:"config_hash"`
	Profiles     []string       `json:"profiles"`
	Certificates manifestChunks `json:"certificates"`
	Backends     manifestChunks `json:"backends"`
	Routes       manifestChunks `json:"routes"`
}

// manifestChunks are one kind's chunk files, in StateChunks.
type manifestChunks struct {
	Chunks []string `json:"chunks"`
}

// files returns the names of every chunk m names.
func (m manifest) files() []string {
	return slices.Concat(m.Certificates.Chunks, m.Backends.Chunks, m.Routes.Chunks)
}

// stateFolder is what the writes of a LuaState's saved state know of
// what is on disk: after a write that went through whole, the folder of
// chunks in dir holds the files of the last two manifests written (last,
// before) and nothing else, so the next write removes the files of before
// that neither it nor last names, without reading last back or listing
// the folder (at 50,000 hosts some 500 files: the read back, its decoding
// and the listing were about 100 KB of garbage a save). A write knows
// nothing after a failed one, or at the first into dir: it reads the
// manifest it replaces back and lists the folder, as a crash or a write
// cut short may have left files there. The writes of a LuaState run one
// at a time (the stage's writer, Save only once it is idle), and only
// they use it.
type stateFolder struct {
	dir   string
	known bool // last and before are what dir's folder holds
	// last and before are the chunk files of the last manifest written
	// and of the one before it, sorted; spare is a list let go, reused
	// for the next write's.
	last, before, spare []string
	// names are the manifest's chunk files in its order, and encoded the
	// JSON of a chunk or the manifest, reused from write to write (not
	// past keptBuffer: a chunk of certificates is a megabyte or two).
	names   []string
	encoded bytes.Buffer
}

// keptBuffer is the most room stateFolder.encoded keeps after a write:
// a chunk of routes or backends and the manifest at 50,000 hosts (about
// 35 and 20 KB) fit.
const keptBuffer = 256 << 10

// encodeJSON returns json.Marshal's bytes of v, encoded into buf (what it
// held is dropped): Marshal copies them out of its own buffer, which was
// a chunk's size of garbage a save.
func encodeJSON(buf *bytes.Buffer, v any) ([]byte, error) {
	buf.Reset()
	if err := json.NewEncoder(buf).Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil // Encode ends with a newline, Marshal does not
}

// write writes s to dir: the chunks not written yet into StateChunks, then
// the manifest StateName, then it removes the chunk files neither that
// manifest nor the one it replaced names. Not synced to disk: other
// processes see the renamed files at once, and a file a power cut tore is
// read as bad (nginx starts empty, as it would without one).
func (s *savedState) write(dir string) error {
	f := s.folder
	if f == nil {
		f = &stateFolder{}
	}
	known := f.known && f.dir == dir
	f.dir, f.known = dir, false // until this write went through whole
	err := s.writeChunks(dir, &f.encoded)
	if f.encoded.Cap() > keptBuffer {
		f.encoded = bytes.Buffer{}
	}
	if err != nil {
		return fmt.Errorf("saving the state for nginx's next start: %w", err)
	}
	data, err := f.manifest(s)
	if err != nil {
		return fmt.Errorf("encoding the saved state: %w", err)
	}
	path := filepath.Join(dir, StateName)
	previous := f.last
	if !known {
		previous = readManifestFiles(path)
	}
	if err := writeFileAtomicFrom(path, func(w io.Writer) error { _, err := w.Write(data); return err }, 0o600, false); err != nil {
		return fmt.Errorf("saving the state for nginx's next start: %w", err)
	}
	current := append(f.spare[:0], f.names...)
	slices.Sort(current)
	folder := filepath.Join(dir, StateChunks)
	if known {
		err = removeChunks(folder, f.before, current, previous)
	} else {
		err = removeChunksBut(folder, current, previous)
	}
	if err != nil {
		return err
	}
	f.spare, f.before, f.last, f.known = f.before[:0], previous, current, true
	return nil
}

// manifest returns the manifest of s, its chunks written, as JSON (in
// f.encoded), its chunk files listed in f.names.
func (f *stateFolder) manifest(s *savedState) ([]byte, error) {
	if f.names == nil {
		f.names = []string{} // a kind without chunks is [], not null
	}
	f.names = f.names[:0]
	for _, kind := range [][]*chunkContent{s.certs, s.backends, s.routes} {
		for _, c := range kind {
			f.names = append(f.names, c.file)
		}
	}
	certs, backends := len(s.certs), len(s.certs)+len(s.backends)
	m := manifest{ConfigHash: s.configHash, Profiles: s.profiles,
		Certificates: manifestChunks{f.names[:certs:certs]},
		Backends:     manifestChunks{f.names[certs:backends:backends]},
		Routes:       manifestChunks{f.names[backends:]}}
	return encodeJSON(&f.encoded, &m)
}

// readManifestFiles returns the chunk files the manifest at path names,
// sorted; none when it does not read or decode.
func readManifestFiles(path string) []string {
	var m manifest
	if data, err := os.ReadFile(path); err == nil {
		json.Unmarshal(data, &m) // a bad one names nothing to keep
	}
	files := m.files()
	slices.Sort(files)
	return files
}

// writeChunks writes each chunk of s not written yet to a file named by
// its content in StateChunks (made, mode 0700, when missing), and names
// it; each is encoded into buf.
func (s *savedState) writeChunks(dir string, buf *bytes.Buffer) error {
	folder := filepath.Join(dir, StateChunks)
	if err := os.Mkdir(folder, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	for _, kind := range [][]*chunkContent{s.certs, s.backends, s.routes} {
		for _, c := range kind {
			if c.file != "" { // written by an earlier write
				continue
			}
			data, err := c.encode(buf)
			if err != nil {
				return fmt.Errorf("encoding a chunk: %w", err)
			}
			sum := sha256.Sum256(data)
			name := hex.EncodeToString(sum[:16])
			if err := writeFileAtomicFrom(filepath.Join(folder, name), func(w io.Writer) error { _, err := w.Write(data); return err }, 0o600, false); err != nil {
				return err
			}
			c.file, c.encode = name, nil
		}
	}
	return nil
}

// removeChunks removes the files of folder named in before but neither
// in keep nor in previous, both sorted: the chunks of the manifest before
// last that the last two written no longer name.
func removeChunks(folder string, before, keep, previous []string) error {
	for _, name := range before {
		if _, found := slices.BinarySearch(keep, name); found {
			continue
		}
		if _, found := slices.BinarySearch(previous, name); found {
			continue
		}
		if err := os.Remove(filepath.Join(folder, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing an old chunk of the saved state: %w", err)
		}
	}
	return nil
}

// removeChunksBut removes every file in folder but those named in keep
// and previous, both sorted (and leftovers of a write cut short go too).
// The folder is listed a batch of names at a time, and each name looked
// up in the two: os.ReadDir's entries with a map of the names kept were
// 130 KB of garbage at 50,000 hosts (some 500 files).
func removeChunksBut(folder string, keep, previous []string) error {
	f, err := os.Open(folder)
	if err != nil {
		return fmt.Errorf("removing old chunks of the saved state: %w", err)
	}
	defer f.Close()
	var gone []string // removed once listed: the listing does not see its own removals
	for {
		names, err := f.Readdirnames(256)
		for _, name := range names {
			if _, found := slices.BinarySearch(keep, name); found {
				continue
			}
			if _, found := slices.BinarySearch(previous, name); found {
				continue
			}
			gone = append(gone, name)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("removing old chunks of the saved state: %w", err)
		}
	}
	for _, name := range gone {
		if err := os.Remove(filepath.Join(folder, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing an old chunk of the saved state: %w", err)
		}
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

// idle waits for the running write, if one runs; its error stays to be
// taken.
func (w *stateWriter) idle() {
	w.mu.Lock()
	done := w.done
	w.mu.Unlock()
	if done != nil {
		<-done
	}
}

// wait waits for the running write, if one runs, and returns its error.
func (w *stateWriter) wait() error {
	w.idle()
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.err
	w.err = nil
	return err
}
