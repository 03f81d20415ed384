package lua

import (
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// init.lua loads every module in the nginx master; a module missing from
// its list would be read by each worker on its first request instead.
func TestInitLoadsEveryModule(t *testing.T) {
	src, err := fs.ReadFile(FS, "restysync/init.lua")
	if err != nil {
		t.Fatal(err)
	}
	list := regexp.MustCompile(`(?s)local MODULES = \{(.*?)\n\}`).FindSubmatch(src)
	if list == nil {
		t.Fatal("init.lua has no MODULES list")
	}
	var listed []string
	for _, m := range regexp.MustCompile(`"([a-z.]+)"`).FindAllSubmatch(list[1], -1) {
		listed = append(listed, string(m[1]))
	}
	var files []string
	err = fs.WalkDir(FS, "restysync", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path == "restysync/init.lua" {
			return err
		}
		files = append(files, strings.ReplaceAll(strings.TrimSuffix(path, ".lua"), "/", "."))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(listed)
	slices.Sort(files)
	if !slices.Equal(listed, files) {
		t.Errorf("init.lua MODULES = %v, want every module: %v", listed, files)
	}
}

// The agent writes FS into nginx's shared dir: modules only, never the
// Lua unit tests beside them (test/) or their harness.
func TestFSHoldsOnlyModules(t *testing.T) {
	err := fs.WalkDir(FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if !strings.HasPrefix(path, "restysync/") || !strings.HasSuffix(path, ".lua") || strings.HasSuffix(path, "_test.lua") {
			t.Errorf("FS holds %s, want only restysync/<module>.lua", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tests, err := filepath.Glob("test/*_test.lua")
	if err != nil {
		t.Fatal(err)
	}
	if len(tests) == 0 {
		t.Error("no Lua unit tests in test/")
	}
}
