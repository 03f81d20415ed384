package apply

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/restysync/restysync/lua"
)

// The agent writes the Lua modules with WriteFileAtomic: stale files and
// folders get the modes nginx workers need, and no temp file stays.
func TestWriteLuaModules(t *testing.T) {
	dir := t.TempDir()
	// A stale module and a folder with a tight mode, as an older agent or a
	// restrictive umask may have left them.
	if err := os.MkdirAll(filepath.Join(dir, "lua", "restysync"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "lua", "restysync", "api.lua"), []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	for round := range 2 { // the second round replaces what the first wrote
		if err := lua.WriteTo(dir, WriteFileAtomic); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}

	for _, name := range []string{"init.lua", "api.lua", "backends.lua", "balancer.lua", "router.lua", "certs.lua", "check.lua", "store.lua"} {
		t.Run(name, func(t *testing.T) {
			want, err := fs.ReadFile(lua.FS, "restysync/"+name)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "lua", "restysync", name)
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from the embedded module", path)
			}
			assertMode(t, path, 0o644)
		})
	}
	assertMode(t, filepath.Join(dir, "lua"), 0o755|fs.ModeDir)
	assertMode(t, filepath.Join(dir, "lua", "restysync"), 0o755|fs.ModeDir)

	entries, err := os.ReadDir(filepath.Join(dir, "lua", "restysync"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name()[0] == '.' {
			t.Errorf("temp file %s left behind", e.Name())
		}
	}
}

func assertMode(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode() != want {
		t.Errorf("%s has mode %s, want %s", path, info.Mode(), want)
	}
}
