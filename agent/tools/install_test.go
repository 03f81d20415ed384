// Package tools holds the scripts the tasks run to set up a machine (Debian
// packages, the pinned kube-apiserver, fuzzing); its tests check that they
// keep working on a fresh machine where tasks run in parallel.
package tools

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// installed is a package that every Debian machine holds (it is Essential),
// so installing it again changes nothing but takes apt's locks.
const installed = "bash"

func requireRootApt(t *testing.T) {
	t.Helper()
	_, err := exec.LookPath("apt-get")
	if os.Geteuid() == 0 && err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("install-debian.sh needs root and apt-get (CI=true)")
	}
	t.Skip("install-debian.sh needs root and apt-get")
}

func install(ctx context.Context, lock string, pkgs ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "bash", append([]string{"install-debian.sh"}, pkgs...)...)
	cmd.Env = append(os.Environ(), "RESTYSYNC_APT_LOCK="+lock, "RESTYSYNC_APT_ALWAYS=1")
	return cmd
}

// Two installs started at once (as `go tool task test` starts the nginx and
// etcd installs) both succeed: one waits for the other instead of failing on
// apt's lock.
func TestInstallsStartedTogetherBothSucceed(t *testing.T) {
	requireRootApt(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	lock := filepath.Join(t.TempDir(), "apt.lock")
	var wg sync.WaitGroup
	outs := make([]bytes.Buffer, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			cmd := install(ctx, lock, installed)
			cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
			errs[i] = cmd.Run()
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("install %d: %v\n%s", i, err, outs[i].String())
		}
	}
}

// An install waits while another holds the lock, and goes on once it is
// released.
func TestInstallWaitsForTheLock(t *testing.T) {
	requireRootApt(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	lock := filepath.Join(t.TempDir(), "apt.lock")
	f, err := os.Create(lock)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	cmd := install(ctx, lock, installed)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	const held = time.Second
	select {
	case err := <-done:
		t.Fatalf("install finished while the lock was held (err %v):\n%s", err, out.String())
	case <-time.After(held):
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("install after the lock was released: %v\n%s", err, out.String())
		}
	case <-ctx.Done():
		t.Fatal("install did not finish after the lock was released")
	}
}

// Nothing but install-debian.sh runs apt-get: a second caller would race it.
func TestOnlyTheInstallerCallsAptGet(t *testing.T) {
	aptCall := regexp.MustCompile(`(^|[\s;&|(])(apt-get|apt|dpkg)\s+(-\S+\s+)*(install|update|upgrade|remove)\b`)
	var files []string
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && !strings.HasSuffix(path, "_test.go") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../Taskfile.yml")
	for _, path := range files {
		if path == "install-debian.sh" {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			if aptCall.MatchString(line) {
				t.Errorf("%s:%d calls apt directly; use agent/tools/install-debian.sh: %s", path, n+1, strings.TrimSpace(line))
			}
		}
	}
	// The checker itself must see a direct call.
	if !aptCall.MatchString("  apt-get -y install etcd-server") || !aptCall.MatchString("x; apt-get update") {
		t.Fatal("the apt-get pattern misses direct calls")
	}
}
