package apply

import (
	"bytes"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/restysync/restysync/agent/internal/model"
)

// AuthDir is the folder of the htpasswd files under the shared dir
// (model.AuthFile.Name starts with it).
const AuthDir = "auth"

// AuthFileMode is the mode of the htpasswd files: the hashes are secrets,
// so only the owner and the group (nginx's workers: the same UID in the
// chart's pod, or the shared dir's fsGroup) read them.
const AuthFileMode = 0o640

// authDirMode lets the group into the folder, and nobody else.
const authDirMode = 0o750

// authFileName is the only shape of name WriteAuthFiles writes: no "/"
// after the folder, no "..", nothing nginx would read differently.
var authFileName = regexp.MustCompile(`^auth/[a-z0-9-]{1,63}_[a-z0-9.-]{1,253}$`)

// WriteAuthFiles makes the htpasswd files (and the CAs and certificates of
// backend TLS) under the shared dir exactly files: each one whose content
// differs is replaced atomically, and every other file in the folder is
// removed, but those named in keep (render.Config.Files: the files of
// profiles kept from an earlier config), which stay as they are. nginx reads them on every request,
// so no reload follows. When the agent runs as root (as in tests), nginx's
// workers run as nobody: the files and folder then belong to nobody's
// group, so that they stay unreadable to anyone else.
func (n *Nginx) WriteAuthFiles(files []model.AuthFile, keep ...string) error {
	dir := filepath.Join(n.SharedDir, AuthDir)
	if len(files) == 0 {
		if _, err := os.Stat(dir); os.IsNotExist(err) {
			return nil
		}
	}
	if err := os.MkdirAll(dir, authDirMode); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	gid := workerGroup()
	if err := setGroup(dir, gid, authDirMode); err != nil {
		return err
	}
	wanted := make(map[string]bool, len(files)+len(keep))
	for _, name := range keep {
		wanted[strings.TrimPrefix(name, AuthDir+"/")] = true
	}
	for _, f := range files {
		base := strings.TrimPrefix(f.Name, AuthDir+"/")
		if !authFileName.MatchString(f.Name) || strings.Contains(f.Name, "..") || len(base) > model.MaxFileName {
			return fmt.Errorf("htpasswd file %q: not a name under %s/ of at most %d characters", f.Name, AuthDir, model.MaxFileName)
		}
		wanted[base] = true
		path := filepath.Join(dir, base)
		if current, err := os.ReadFile(path); err == nil && bytes.Equal(current, []byte(f.Content)) {
			continue
		}
		if err := writeAuthFile(path, []byte(f.Content), gid); err != nil {
			return fmt.Errorf("writing htpasswd file: %w", err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("reading %s: %w", dir, err)
	}
	for _, e := range entries {
		if !wanted[e.Name()] {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("removing stale htpasswd file: %w", err)
			}
		}
	}
	return nil
}

// workerGroup is the group nginx's workers read the files as when the
// agent runs as root: nobody's (nginx's default user). -1 keeps the group.
func workerGroup() int {
	if os.Geteuid() != 0 {
		return -1
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		return -1
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return -1
	}
	return gid
}

// setGroup gives path the group gid (unless -1) and mode.
func setGroup(path string, gid int, mode os.FileMode) error {
	if gid >= 0 {
		if err := os.Chown(path, -1, gid); err != nil {
			return fmt.Errorf("setting the group of %s: %w", path, err)
		}
	}
	if err := os.Chmod(path, mode); err != nil {
		return fmt.Errorf("setting the mode of %s: %w", path, err)
	}
	return nil
}

// writeAuthFile is WriteFileAtomic that also sets the group before the
// rename, so that nginx never meets the file with a group it cannot read.
func writeAuthFile(path string, data []byte, gid int) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	_, err = tmp.Write(data)
	if err == nil {
		err = setGroup(tmp.Name(), gid, AuthFileMode)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// AuthFileRecord is what WriteAuthFiles last made the shared dir hold: an
// unchanged set is not written (nor read) again, which the fast path of
// every endpoint change would otherwise do.
type AuthFileRecord struct {
	written []model.AuthFile // nil: nothing known written
	kept    []string
}

// Write makes n's shared dir hold files, and keep the kept ones
// (WriteAuthFiles), unless the record says it already does.
func (r *AuthFileRecord) Write(n *Nginx, files []model.AuthFile, kept []string) error {
	if r.written != nil && slices.Equal(files, r.written) && slices.Equal(kept, r.kept) {
		return nil
	}
	if err := n.WriteAuthFiles(files, kept...); err != nil {
		r.written = nil
		return err
	}
	r.written, r.kept = slices.Clip(append([]model.AuthFile{}, files...)), kept
	return nil
}
