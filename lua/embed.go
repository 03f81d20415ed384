// Package lua holds the data plane's Lua modules, the last hop of the
// pipeline: the agent pushes backends and certificates to them over the
// config API; they balance every request and pick the certificate of every
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

// WriteTo writes every module under dir/lua/, replacing each file through a
// temp file and a rename so that nginx never reads half a module. Files are
// 0644 and folders 0755: nginx workers run as nobody and must read them.
func WriteTo(dir string) error {
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
		return writeFile(target, data)
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

func writeFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("creating temp file for %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", tmp.Name(), err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("setting mode of %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("syncing %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("renaming %s to %s: %w", tmp.Name(), path, err)
	}
	return nil
}
