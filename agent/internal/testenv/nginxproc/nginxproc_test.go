package nginxproc

import (
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"
)

func TestChildren(t *testing.T) {
	if ppid, ok := parentOf(os.Getpid()); !ok || ppid != os.Getppid() {
		t.Fatalf("parentOf(self) = %d, %v; want %d", ppid, ok, os.Getppid())
	}
	cmd := exec.Command("sleep", "10")
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting sleep: %v", err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Contains(children(os.Getpid()), cmd.Process.Pid) {
		if time.Now().After(deadline) {
			t.Fatalf("children(self) = %v, lacks %d", children(os.Getpid()), cmd.Process.Pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
