//go:build linux

package podnet

import (
	"io"
	"net/http"
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
	// The address may still route somewhere (this machine's default
	// gateway answers anything), but never to the pod.
	if resp, err := client.Get("http://" + a.IP + ":" + strconv.Itoa(Port) + "/"); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.TrimSpace(string(body)) == a.Name {
			t.Errorf("a removed pod still answers: %s %q", resp.Status, body)
		}
	}
}
