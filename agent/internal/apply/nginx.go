// Package apply is the last stage of the pipeline (source → model → render → plan → apply):
// it carries out a plan on nginx.
//
// It runs a plan's steps (LuaState.Execute): it pushes certificates,
// backends and routes to Lua over the unix socket, keeping the record of
// what Lua holds, one pusher per resource; and it writes nginx.conf
// atomically into the shared dir, signals the nginx master, and confirms
// through the Lua status API that the new config is the one running. A
// reload is only "done" when nginx reports the new hash, because
// `kill -HUP` succeeds even when nginx rejects the new config; nginx
// refusing it (ErrRejected) and nginx not done yet (ErrNotConfirmed) are
// different outcomes.
//
// apply also owns the record of what nginx runs and Lua holds, which the
// plan starts from: LuaState for Lua, ConfigRecord for nginx.conf (which
// config nginx confirmed, rejected or has yet to confirm, and which one it
// should start with while it does not answer). Keeping both where the
// verdicts arrive leaves the syncer only the loop: Stage is what it calls
// once per sync (status, Held, the reload hold, plan.Compute, Execute).
// Stage lives here, not in plan, because plan is the pure diff that apply
// imports (plan.Held, plan.Plan); the Stage needs both and nginx.
package apply

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/restysync/restysync/agent/internal/luaapi"
	"github.com/restysync/restysync/agent/internal/render"
)

// WriteFileAtomic writes data to path through a temp file in the same folder
// and a rename, so nginx never reads half a file, and syncs it to disk
// before the rename.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	return writeFileAtomic(path, data, perm, true)
}

// writeFileAtomic is WriteFileAtomic; durable syncs the file to disk
// before the rename.
func writeFileAtomic(path string, data []byte, perm os.FileMode, durable bool) error {
	return writeFileAtomicFrom(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	}, perm, durable)
}

// writeFileAtomicFrom is writeFileAtomic with the content written by write.
func writeFileAtomicFrom(path string, write func(io.Writer) error, perm os.FileMode, durable bool) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("creating temp file in %s: %w", dir, err)
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if err := write(tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", tmp.Name(), err)
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return fmt.Errorf("setting mode of %s: %w", tmp.Name(), err)
	}
	if durable {
		if err := tmp.Sync(); err != nil {
			tmp.Close()
			return fmt.Errorf("syncing %s: %w", tmp.Name(), err)
		}
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("renaming into %s: %w", path, err)
	}
	return nil
}

// Nginx is the nginx that shares the dir with the agent.
type Nginx struct {
	SharedDir string
	Lua       *LuaClient
	// ConfirmTimeout bounds how long a reload may take to show its hash.
	ConfirmTimeout time.Duration
}

// ConfigPath is where nginx reads its config.
func (n *Nginx) ConfigPath() string { return filepath.Join(n.SharedDir, render.ConfigName) }

// SocketPath is the config API's unix socket in the shared dir.
func (n *Nginx) SocketPath() string { return filepath.Join(n.SharedDir, render.SocketName) }

// ReadConfig returns the nginx.conf now in the shared dir (nil if none).
func (n *Nginx) ReadConfig() ([]byte, error) {
	data, err := os.ReadFile(n.ConfigPath())
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading nginx.conf: %w", err)
	}
	return data, nil
}

// SocketMode is the widest mode the config socket may have: nginx creates
// unix sockets world-writable (0666), and anyone who can write to it can
// change what nginx serves.
const SocketMode = 0o660

// TightenSocket makes the config socket no wider than SocketMode. nginx
// creates the socket afresh at every cold start, so the syncer calls this
// whenever it meets a new nginx boot.
func (n *Nginx) TightenSocket() error {
	path := n.SocketPath()
	info, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("config socket: %w", err)
	}
	if mode := info.Mode().Perm(); mode&^SocketMode != 0 {
		if err := os.Chmod(path, mode&SocketMode); err != nil {
			return fmt.Errorf("config socket %s has mode %#o; tightening it to %#o: %w", path, mode, mode&SocketMode, err)
		}
	}
	return nil
}

// WriteConfig replaces nginx.conf unless it already holds exactly data.
func (n *Nginx) WriteConfig(data []byte) error {
	current, err := n.ReadConfig()
	if err != nil {
		return err
	}
	if bytes.Equal(current, data) {
		return nil
	}
	return WriteFileAtomic(n.ConfigPath(), data, 0o644)
}

// MasterPID reads the nginx master's pid from the pid file in the shared dir.
func (n *Nginx) MasterPID() (int, error) {
	raw, err := os.ReadFile(filepath.Join(n.SharedDir, render.PIDName))
	if err != nil {
		return 0, fmt.Errorf("reading nginx pid file: %w", err)
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(raw)))
	if err != nil || pid <= 1 {
		return 0, fmt.Errorf("nginx pid file holds %q, not a pid", bytes.TrimSpace(raw))
	}
	return pid, nil
}

// Reload signals the master with SIGHUP and waits until Lua reports
// wantHash. When nginx refuses the config the error wraps ErrRejected and
// carries nginx's own reason: the [emerg], [alert] and [error] lines it
// wrote to its error log after the signal. When it neither takes nor
// refuses it within ConfirmTimeout, the error wraps ErrNotConfirmed.
func (n *Nginx) Reload(ctx context.Context, wantHash string) error {
	pid, err := n.MasterPID()
	if err != nil {
		return err
	}
	logPath := filepath.Join(n.SharedDir, render.ErrorLogName)
	offset := fileSize(logPath)
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		return fmt.Errorf("signalling nginx master %d: %w", pid, err)
	}
	// nginx logs [emerg] (or an init_by_lua error) as soon as it rejects
	// the new config and keeps the old one: that ends the wait at once
	// instead of at the timeout.
	rejected := func() bool { return fileSize(logPath) > offset && nginxRejected(logPath, offset) }
	err = n.waitForHash(ctx, wantHash, rejected)
	if err != nil && errors.Is(err, ErrRejected) {
		if reason := nginxErrors(logPath, offset); reason != "" {
			err = fmt.Errorf("%w; nginx said: %s", err, reason)
		}
	}
	return err
}

// MaxErrorLogSize is how large nginx's error log file (render.ErrorLogName)
// may grow before TrimErrorLog empties it: the file is in the shared dir,
// an emptyDir with a size limit, and nginx never rotates it. It holds
// error lines only; the full log is nginx's stderr.
const MaxErrorLogSize = 4 << 20

// TrimErrorLog empties nginx's error log file once it holds more than
// limit bytes, and says whether it did. nginx opens the file with
// O_APPEND, so each later line lands at the new end, not at the old
// offset. Call it only while no Reload reads the file for a verdict (the
// syncer calls it between syncs).
func (n *Nginx) TrimErrorLog(limit int64) (bool, error) {
	path := filepath.Join(n.SharedDir, render.ErrorLogName)
	if fileSize(path) <= limit {
		return false, nil
	}
	if err := os.Truncate(path, 0); err != nil {
		return false, fmt.Errorf("emptying nginx's error log: %w", err)
	}
	return true, nil
}

// nginxRejected reports whether nginx logged, after offset, that it keeps
// the old config: an [emerg] line, or init_by_lua failing (which nginx
// logs as [error] only).
func nginxRejected(path string, offset int64) bool {
	errs := nginxErrors(path, offset)
	return strings.Contains(errs, "[emerg]") || strings.Contains(errs, "init_by_lua error")
}

func fileSize(path string) int64 {
	info, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return info.Size()
}

// nginxErrors returns the error lines nginx logged after offset, joined,
// at most 2 KiB of them.
func nginxErrors(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	data, _ := io.ReadAll(io.LimitReader(f, 1<<20))
	var lines []string
	size := 0
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.Contains(line, "[emerg]") && !strings.Contains(line, "[alert]") && !strings.Contains(line, "[error]") {
			continue
		}
		if size += len(line); size > 2048 {
			break
		}
		lines = append(lines, strings.TrimSpace(line))
	}
	return strings.Join(lines, " | ")
}

// WaitForHash polls the status API until the running config hash is wantHash,
// for at most ConfirmTimeout.
func (n *Nginx) WaitForHash(ctx context.Context, wantHash string) error {
	return n.waitForHash(ctx, wantHash, func() bool { return false })
}

// waitForHash is WaitForHash that also ends, with ErrRejected, once
// rejected says nginx refused the config.
func (n *Nginx) waitForHash(ctx context.Context, wantHash string, rejected func() bool) error {
	timeout := n.ConfirmTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// A steady short poll: the answer comes over a local socket, and every
	// millisecond here is a millisecond before a new Ingress is served.
	const poll = 5 * time.Millisecond
	var last luaapi.Status
	var lastErr error
	for {
		last, lastErr = n.Lua.Status(ctx)
		if lastErr == nil && last.ConfigHash == wantHash {
			return nil
		}
		if rejected() {
			return fmt.Errorf("%w: it runs %s", ErrRejected, short(last.ConfigHash))
		}
		select {
		case <-ctx.Done():
			if rejected() {
				return fmt.Errorf("%w: it runs %s", ErrRejected, short(last.ConfigHash))
			}
			if lastErr != nil {
				return fmt.Errorf("%w within %s: %v", ErrNotConfirmed, timeout, lastErr)
			}
			return fmt.Errorf("%w within %s: still running %s", ErrNotConfirmed, timeout, short(last.ConfigHash))
		case <-time.After(poll):
		}
	}
}

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}
