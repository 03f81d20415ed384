// Package lua holds the data plane's Lua modules, which apply, the last
// stage of the pipeline (source → model → render → plan → apply), drives: the agent pushes
// backends, routes and certificates to them over the config API; they balance every request and pick the certificate of every
// TLS handshake.
//
// The modules are embedded in the agent binary and written into the shared
// dir at start, so the stock OpenResty image needs nothing but the volume.
// nginx finds them through lua_package_path "<shared dir>/lua/?.lua".
package lua

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// FS holds the modules under restysync/ (require "restysync",
// "restysync.api", "restysync.balancer", "restysync.certs", and their
// helpers "restysync.check" and "restysync.store").
//
//go:embed restysync
var FS embed.FS

// WriteTo writes every module under dir/lua/ with writeFile, in 0644
// files and 0755 folders: nginx workers run as nobody and must read them.
// The agent passes apply.WriteFileAtomic, so that nginx never reads half a
// module; a test may pass os.WriteFile.
func WriteTo(dir string, writeFile func(path string, data []byte, perm fs.FileMode) error) error {
	root := filepath.Join(dir, "lua")
	return fs.WalkDir(FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("reading embedded %s: %w", path, err)
		}
		target := filepath.Join(root, filepath.FromSlash(path))
		if d.IsDir() {
			return makeDir(target)
		}
		data, err := FS.ReadFile(path)
		if err != nil {
			return fmt.Errorf("reading embedded %s: %w", path, err)
		}
		return writeFile(target, data, 0o644)
	})
}

// makeDir creates dir if needed and sets its mode, which MkdirAll leaves to
// the umask and never changes on an existing folder.
func makeDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return fmt.Errorf("setting mode of %s: %w", dir, err)
	}
	return nil
}
