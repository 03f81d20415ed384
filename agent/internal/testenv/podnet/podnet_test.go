//go:build linux

package podnet

import (
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestPodsAnswerFromTheirOwnAddress(t *testing.T) {
	a, b := New(t, "pod-a"), New(t, "pod-b")
	if a.IP == b.IP {
		t.Fatalf("two pods share %s", a.IP)
	}
	client := &http.Client{Timeout: 5 * time.Second}
	for _, p := range []*Pod{a, b} {
		resp, err := client.Get("http://" + p.IP + ":" + strconv.Itoa(Port) + "/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.TrimSpace(string(body)) != p.Name {
			t.Errorf("%s answered %q", p.IP, body)
		}
		if p.Hits() != 1 {
			t.Errorf("%s hits %d, want 1", p.Name, p.Hits())
		}
	}
	a.Remove()
	// No request to the removed address: it is no longer ours to send to.
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), a.netns+" ") || strings.HasSuffix(strings.TrimSpace(string(out)), a.netns) {
		t.Errorf("namespace %s is still there:\n%s", a.netns, out)
	}
	if exec.Command("ip", "link", "show", a.hostIf).Run() == nil {
		t.Errorf("link %s is still there", a.hostIf)
	}
}
