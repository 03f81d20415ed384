package file

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/fsnotify/fsnotify"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/restysync/restysync/agent/internal/source"
)

// fileState is what one manifest file holds.
type fileState struct {
	sum      [sha256.Size]byte // of the bytes decoded; zero when the file could not be read
	docs     []document
	problems []problem
}

// batch is what the events since the last read ask for.
type batch struct {
	files map[string]bool // files to read again
	all   bool            // read the whole folder again
	root  bool            // the folder itself was removed or renamed: watch it anew
}

func newBatch() *batch { return &batch{files: map[string]bool{}} }

// note records what an event asks for and reports whether it asks for anything.
func (s *Source) note(b *batch, event fsnotify.Event) bool {
	path := filepath.Clean(event.Name)
	name := filepath.Base(path)
	switch {
	case path == s.dir:
		if event.Has(fsnotify.Remove) || event.Has(fsnotify.Rename) {
			b.root, b.all = true, true
			return true
		}
		return false
	case name == "..data":
		// kubelet swapped a ConfigMap volume to a new version: every
		// visible file is a symlink through ..data and got no event.
		b.all = true
		return true
	case hidden(name):
		return false
	case s.dirs[path]:
		// A watched subfolder was removed or renamed.
		b.all = true
		return true
	case event.Has(fsnotify.Create) && isFolder(path):
		// A new subfolder: watch it and read what is already in it.
		b.all = true
		return true
	case manifestName(name):
		b.files[path] = true
		return true
	}
	return false
}

// apply reads again what a batch asks for.
func (s *Source) apply(b *batch) {
	if b.root {
		// The folder may be a new one under the same name; the old watch
		// followed the old one.
		s.unwatchAll()
	}
	if b.all || s.folderErr != nil {
		s.readAll()
		return
	}
	for path := range b.files {
		s.readFile(path)
	}
}

// readAll reads the folder and its subfolders, watching each folder before
// listing it so that no file created meanwhile is missed. If the folder
// itself cannot be read, the files read before are kept and folderErr is set.
func (s *Source) readAll() {
	s.pendingAll = true // files and folders may be gone: publish builds the view whole
	seenFiles := map[string]bool{}
	seenDirs := map[string]bool{}
	s.dirProblem = nil
	err := s.readDir(s.dir, 0, seenFiles, seenDirs)
	s.readFiles(slices.Sorted(maps.Keys(seenFiles)))
	if err != nil {
		s.folderErr = fmt.Errorf("reading %s: %w", s.dir, err)
		s.unwatchAll()
		return
	}
	s.folderErr = nil
	for path := range s.files {
		if !seenFiles[path] {
			delete(s.files, path)
		}
	}
	for dir := range s.dirs {
		if !seenDirs[dir] {
			_ = s.watcher.Remove(dir) // fails when the folder is gone, which is fine
			delete(s.dirs, dir)
		}
	}
}

func (s *Source) readDir(dir string, depth int, seenFiles, seenDirs map[string]bool) error {
	if s.watcher != nil && !s.dirs[dir] {
		if err := s.watcher.Add(dir); err != nil {
			return fmt.Errorf("watching folder: %w", err)
		}
		s.dirs[dir] = true
	}
	seenDirs[dir] = true
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("listing folder: %w", err)
	}
	for _, entry := range entries {
		name := entry.Name()
		if hidden(name) {
			continue
		}
		path := filepath.Join(dir, name)
		switch {
		case entry.IsDir() && depth >= maxDepth:
			s.dirProblem = append(s.dirProblem, problem{path: path,
				reason: fmt.Sprintf("folder is more than %d levels deep; its manifests are left out", maxDepth)})
		case entry.IsDir():
			err := s.readDir(path, depth+1, seenFiles, seenDirs)
			if err != nil && !isGone(err) {
				s.dirProblem = append(s.dirProblem, problem{path: path,
					reason: fmt.Sprintf("%v; its manifests are left out", err)})
			}
		case manifestName(name):
			seenFiles[path] = true
		}
	}
	return nil
}

// unwatchAll drops every watch; readAll adds them again.
func (s *Source) unwatchAll() {
	for dir := range s.dirs {
		if s.watcher != nil {
			_ = s.watcher.Remove(dir) // fails for a folder that is gone, which is fine
		}
		delete(s.dirs, dir)
	}
}

// readFiles reads files again (readFile), decoding as many at once as Go
// runs threads: decoding YAML is most of the start with thousands of
// manifests, each file's is its own, and what the files define is then
// installed one file after another, in the order given.
func (s *Source) readFiles(paths []string) {
	reads := make([]fileRead, len(paths))
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(paths)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < len(paths); i = int(next.Add(1)) - 1 {
				reads[i] = s.decodeFile(paths[i])
			}
		}()
	}
	wg.Wait()
	for i, path := range paths {
		s.install(path, reads[i])
		reads[i] = fileRead{}
	}
}

// readFile reads one file again. A file that is gone drops its objects; a
// file whose bytes did not change is not decoded again. A document that
// fails to decode, or a file that cannot be read, keeps the last good
// version of what it defined (keepLastGood, lastgood.go).
func (s *Source) readFile(path string) {
	s.install(path, s.decodeFile(path))
}

// notePending records that path's state changes from old (nil: the file
// is new) before the next publish, which may then patch the view
// (patchView).
func (s *Source) notePending(path string, old *fileState) {
	if s.pending == nil {
		s.pending = map[string]*fileState{}
	}
	if _, ok := s.pending[path]; !ok {
		s.pending[path] = old
	}
}

// fileRead is what decodeFile found in one file, for install.
type fileRead struct {
	err       error // the file could not be read
	unchanged bool  // its bytes are those last decoded
	sum       [sha256.Size]byte
	docs      []document
	problems  []problem
}

// decodeFile loads and decodes one file. It only reads the Source's
// state, so several may run at once.
func (s *Source) decodeFile(path string) fileRead {
	data, err := s.load(path)
	if err != nil {
		return fileRead{err: err}
	}
	sum := sha256.Sum256(data)
	if old := s.files[path]; old != nil && old.sum == sum {
		return fileRead{unchanged: true}
	}
	docs, problems := decodeManifests(path, data, s.maxDocuments)
	return fileRead{sum: sum, docs: compact(docs), problems: problems}
}

// compact replaces each document's object by a copy made once the whole
// file is decoded. Decoding a document leaves several times the object's
// size in garbage (YAML nodes, the JSON it becomes, the decoder's state),
// allocated between the object's own parts: once collected, the spans
// the objects live in stay in use, mostly empty, for as long as the
// objects live. The copies are made one after another, so they share
// spans with each other instead (measured at 50,000 Ingresses, each with a
// Service and an EndpointSlice: the heap in use after the listing 173 →
// 143 MB for 131 MB live). The copy shares the strings (DeepCopy copies
// no string), so what shareStrings shared stays shared. The list is new
// too, of its length: the decoder's grew by appending, and kept up to
// twice the room (3 MB at 150,000 documents). An EndpointSlice whose one
// label names its Service loses the label's map, the name kept in the
// document (source.DropServiceLabel: 15 MB at 50,000 slices); the view
// answers for it (view.sliceServices). The copy's few-valued pointers
// (conditions, ports, class, path types) point at shared values
// (source.SharePointers).
func compact(docs []document) []document {
	out := make([]document, len(docs))
	for i, d := range docs {
		out[i] = d
		if slice, ok := d.obj.(*discoveryv1.EndpointSlice); ok {
			if service, dropped := source.DropServiceLabel(slice); dropped {
				out[i].service = service
			}
		}
		out[i].obj = servedCopy(d.obj)
		source.SharePointers(out[i].obj)
	}
	return out
}

// install makes what decodeFile read of path the file's state.
func (s *Source) install(path string, r fileRead) {
	var served []document
	old := s.files[path]
	if old != nil {
		served = old.docs
	}
	if !r.unchanged {
		s.notePending(path, old)
	}
	switch {
	case isGone(r.err):
		delete(s.files, path)
		return
	case r.err != nil:
		problems := []problem{{path: path, reason: r.err.Error(), failed: true}}
		s.files[path] = &fileState{docs: keepLastGood(served, nil, problems), problems: problems}
		return
	case r.unchanged:
		return
	}
	s.reuseUnchanged(r.docs)
	docs := keepLastGood(served, r.docs, r.problems)
	s.files[path] = &fileState{sum: r.sum, docs: docs, problems: r.problems}
}

// reuseUnchanged keeps the object already served for each document that
// decodes to the same content, so that publish sees no change for it. An
// EndpointSlice must belong to the same Service too: without its label,
// a slice moved to another Service decodes to the same object.
func (s *Source) reuseUnchanged(docs []document) {
	for i, doc := range docs {
		old := s.view.lookup(doc.key())
		if old == nil || !equality.Semantic.DeepEqual(old, doc.obj) {
			continue
		}
		if slice, ok := old.(*discoveryv1.EndpointSlice); ok && s.view.serviceOf(slice) != doc.sliceService() {
			continue
		}
		docs[i].obj = old
	}
}

// errGone means the path is no longer a regular file.
var errGone = errors.New("not a regular file")

// load returns the bytes of a regular file no larger than maxFileSize.
func (s *Source) load(path string) ([]byte, error) {
	info, err := os.Stat(path) // before opening: opening a FIFO would block
	if err != nil {
		return nil, fmt.Errorf("reading file: %w; file left out", err)
	}
	if !info.Mode().IsRegular() {
		return nil, errGone
	}
	if info.Size() > s.maxFileSize {
		return nil, s.tooLarge(info.Size())
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading file: %w; file left out", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, s.maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading file: %w; file left out", err)
	}
	if int64(len(data)) > s.maxFileSize {
		return nil, s.tooLarge(int64(len(data)))
	}
	return data, nil
}

func (s *Source) tooLarge(size int64) error {
	return fmt.Errorf("file is %d bytes, more than the limit of %d; file left out", size, s.maxFileSize)
}

// isGone reports whether err says that a path no longer exists.
func isGone(err error) bool {
	return errors.Is(err, errGone) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// hidden reports whether a name is hidden: dot files, which include editor
// lock files (".#x.yaml"), vim swap files (".x.yaml.swp") and a ConfigMap
// volume's "..data" and "..2006_01_02..." internals.
func hidden(name string) bool {
	return strings.HasPrefix(name, ".")
}

// manifestName reports whether a file name is a manifest to read. Backup
// and temp files ("x.yaml~", "x.yaml.swp", "#x.yaml#", vim's "4913") do not
// end in a manifest extension and so are not read.
func manifestName(name string) bool {
	if hidden(name) {
		return false
	}
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

func isFolder(path string) bool {
	info, err := os.Lstat(path)
	return err == nil && info.IsDir()
}
