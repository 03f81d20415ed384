package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/apply"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// The backends of the cold-start tests, one per host.
const ipColdPlain, ipColdSecure, ipColdProfiled = "127.0.0.211", "127.0.0.212", "127.0.0.213"

const (
	coldSecureHost   = "secure.cold.test"
	coldProfiledHost = "profiled.cold.test"
	coldPlainHost    = "plain.cold.test"
	bufferSize       = "nginx.ingress.kubernetes.io/proxy-buffer-size"
)

// coldStack runs three hosts: a plain one, an HTTPS one whose certificate
// comes from a Secret, and one whose location has a profile (a named
// location of nginx.conf: proxy-buffer-size).
func coldStack(t *testing.T) *stack {
	b := startBackends(t, ipColdPlain, ipColdSecure, ipColdProfiled)
	pair := newTLSKeyPair(t, 2701, coldSecureHost)
	s := newStack(t, map[string]string{
		"classes.yaml":  ingressClasses,
		"plain.yaml":    service("plain", b.port, ep(ipColdPlain)),
		"secure.yaml":   service("secure", b.port, ep(ipColdSecure)),
		"profiled.yaml": service("profiled", b.port, ep(ipColdProfiled)),
		"secret.yaml":   tlsSecret("cold-tls", pair.cert, pair.key),
		"ing-plain.yaml": ingress("plain", ingressOpts{class: "restysync", host: coldPlainHost,
			paths: []path{prefix("/", "plain")}}),
		"ing-secure.yaml": ingress("secure", ingressOpts{class: "restysync", host: coldSecureHost,
			paths: []path{prefix("/", "secure")}, tls: []ingressTLS{{secret: "cold-tls", hosts: []string{coldSecureHost}}}}),
		"ing-profiled.yaml": profiledIngress("4k"),
	})
	port := stackHTTPSPort(t, s)
	s.eventually("every host served", func() error {
		for host, want := range map[string]string{coldPlainHost: ipColdPlain, coldProfiledHost: ipColdProfiled} {
			if err := s.expect(host, "/", want); err != nil {
				return err
			}
		}
		serial, body, err := httpsGet(httpsClient(port), coldSecureHost)
		if err != nil || serial != "2701" || body != ipColdSecure {
			return fmt.Errorf("https://%s/: certificate %s, body %q, %v", coldSecureHost, serial, body, err)
		}
		return nil
	})
	if profiles := profilesOf(t, s); len(profiles) == 0 {
		t.Fatal("nginx.conf has no profile: the profiled host proves nothing")
	}
	return s
}

func profiledIngress(buffer string) string {
	return ingress("profiled", ingressOpts{class: "restysync", host: coldProfiledHost,
		paths: []path{prefix("/", "profiled")}, annotations: map[string]string{bufferSize: buffer}})
}

var profileLocation = regexp.MustCompile(`location (@restysync_p_[0-9a-f]{32}) \{`)

// profilesOf returns the profiles of the nginx.conf in the shared dir.
func profilesOf(t *testing.T, s *stack) map[string]bool {
	t.Helper()
	conf, err := os.ReadFile(filepath.Join(s.shared, "nginx.conf"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range profileLocation.FindAllSubmatch(conf, -1) {
		out[string(m[1])] = true
	}
	return out
}

// hostLoad sends requests to every host of coldStack, each from its own
// goroutine, until stopped, and counts those that failed: an error (a TLS
// failure too), a status other than 200, or another backend's answer.
// Errors before nginx's first answer (it is not listening yet) are not
// requests: counting starts with the first answer of any host.
type hostLoad struct {
	answered           atomic.Bool
	requests, failures atomic.Int64
	mu                 sync.Mutex
	first              []string // the first failures, for the log
	stopCh, done       chan struct{}
	wg                 sync.WaitGroup
}

func startHostLoad(s *stack, httpsPort int) *hostLoad {
	l := &hostLoad{stopCh: make(chan struct{}), done: make(chan struct{})}
	plain := clientTo(s.port)
	plain.Timeout = 2 * time.Second
	secure := httpsClient(httpsPort)
	secure.Timeout = 2 * time.Second
	send := map[string]func() (string, error){
		coldPlainHost:    func() (string, error) { return answer(plain, "http://"+coldPlainHost+"/") },
		coldProfiledHost: func() (string, error) { return answer(plain, "http://"+coldProfiledHost+"/") },
		coldSecureHost:   func() (string, error) { return answer(secure, "https://"+coldSecureHost+"/") },
	}
	want := map[string]string{coldPlainHost: ipColdPlain, coldProfiledHost: ipColdProfiled, coldSecureHost: ipColdSecure}
	for host, get := range send {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stopCh:
					return
				default:
				}
				got, err := get()
				if err != nil && !l.answered.Load() {
					time.Sleep(time.Millisecond)
					continue // nginx is not up yet
				}
				l.answered.Store(true)
				l.requests.Add(1)
				if err != nil || got != want[host] {
					l.failures.Add(1)
					l.mu.Lock()
					if len(l.first) < 10 {
						l.first = append(l.first, fmt.Sprintf("%s: got %q, %v", host, got, err))
					}
					l.mu.Unlock()
				}
			}
		}()
	}
	return l
}

// answer returns the body of a 200, or the status.
func answer(c *http.Client, url string) (string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	buf := make([]byte, 256)
	n, _ := resp.Body.Read(buf)
	if resp.StatusCode != http.StatusOK {
		return resp.Status, nil
	}
	return strings.TrimSpace(string(buf[:n])), nil
}

// stop ends the load and fails t unless it sent requests and none failed.
func (l *hostLoad) stop(t *testing.T, what string) {
	t.Helper()
	close(l.stopCh)
	l.wg.Wait()
	requests, failures := l.requests.Load(), l.failures.Load()
	t.Logf("%s: %d requests, %d failed", what, requests, failures)
	if requests == 0 || failures != 0 {
		t.Errorf("%s: %d of %d requests failed; first: %s", what, failures, requests, strings.Join(l.first, "; "))
	}
}

// luaStatus asks nginx's config API for its status.
func luaStatus(s *stack) (bool, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := apply.NewLuaClient(filepath.Join(s.shared, "restysync.sock")).Status(ctx)
	return st.Restored, st.BootID, err
}

// A cold-started nginx serves the last good state from its first answer,
// with the agent stopped: it loads the state the agent saved (every host,
// the HTTPS host's certificate, the profiled host's route). Started again,
// the agent reads it back and pushes nothing, since nothing changed; under
// load throughout, no request fails.
func TestNginxColdRestartUnderLoad(t *testing.T) {
	s := coldStack(t)
	port := stackHTTPSPort(t, s)
	if _, err := os.Stat(filepath.Join(s.shared, apply.StateName)); err != nil {
		t.Fatalf("the agent saved no state: %v", err)
	}
	info, _ := os.Stat(filepath.Join(s.shared, apply.StateName))
	if info.Mode().Perm() != 0o600 {
		t.Errorf("state file mode %v, want 0600", info.Mode().Perm())
	}
	chunks := filepath.Join(s.shared, apply.StateChunks)
	if info, err := os.Stat(chunks); err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("the state's chunk folder: %v, %v; want mode 0700", info, err)
	}
	entries, _ := os.ReadDir(chunks)
	for _, e := range entries {
		if info, err := e.Info(); err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("chunk %s: %v, %v; want mode 0600 (the certificates' keys)", e.Name(), info, err)
		}
	}
	if len(entries) == 0 {
		t.Error("the saved state has no chunk")
	}
	s.agent.stop(t)
	s.nginx.Stop(t)

	l := startHostLoad(s, port)
	s.nginx = nginxproc.Start(t, s.shared) // the agent is stopped: only the file can help
	s.eventually("nginx answers", func() error {
		if !l.answered.Load() {
			return fmt.Errorf("no answer yet")
		}
		return nil
	})
	time.Sleep(time.Second)
	restored, _, err := luaStatus(s)
	if err != nil || !restored {
		t.Errorf("nginx's status: restored %v, %v; want it started from the saved state", restored, err)
	}

	s.agent = startAgent(t, s.agentArgs...)
	s.eventually("the agent is ready again", func() error { return s.expectAdmin("/readyz", http.StatusOK) })
	time.Sleep(500 * time.Millisecond)
	l.stop(t, "from nginx's first answer, across the agent's start")

	m, err := s.scrape()
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"backends", "certificates", "routes"} {
		if v := m[`restysync_lua_pushes_total{kind="`+kind+`"}`]; v != 0 {
			t.Errorf("the agent pushed %s %v times to an nginx that holds them already", kind, v)
		}
	}
	if !strings.Contains(s.nginx.Logs(), "serving the saved state") {
		t.Error("nginx's log does not say it serves the saved state")
	}
}

// A saved state nginx cannot read (cut short) is logged and left out: nginx
// starts, empty, and the agent pushes everything.
func TestNginxColdRestartWithCorruptState(t *testing.T) {
	s := coldStack(t)
	path := filepath.Join(s.shared, apply.StateName)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s.nginx.Stop(t)
	if err := os.WriteFile(path, data[:len(data)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	s.nginx = nginxproc.Start(t, s.shared)
	restored, _, err := luaStatus(s)
	if err != nil || restored {
		t.Errorf("nginx's status: restored %v, %v; want a start without the corrupt state", restored, err)
	}
	s.eventually("the agent pushes again", func() error { return s.expect(coldProfiledHost, "/", ipColdProfiled) })
	if !strings.Contains(s.nginx.Logs(), "is not valid JSON") {
		t.Errorf("nginx's log does not name the corrupt state:\n%s", s.nginx.Logs())
	}
}

// A saved state one of whose chunks nginx cannot read (cut short) is
// refused whole: nginx starts empty, not with the other kinds and part of
// a kind, and the agent pushes everything.
func TestNginxColdRestartWithCorruptChunk(t *testing.T) {
	s := coldStack(t)
	chunks := filepath.Join(s.shared, apply.StateChunks)
	s.agent.stop(t) // no save replaces the state meanwhile
	s.nginx.Stop(t)
	// Cut the certificates' chunk short: a state refused in part would
	// still serve the plain host from the backends' and routes' chunks.
	var m struct {
		Certificates struct{ Chunks []string } `json:"certificates"`
	}
	data, err := os.ReadFile(filepath.Join(s.shared, apply.StateName))
	if err != nil || json.Unmarshal(data, &m) != nil || len(m.Certificates.Chunks) == 0 {
		t.Fatalf("the saved state's manifest names no certificate chunk: %v: %s", err, data)
	}
	path := filepath.Join(chunks, m.Certificates.Chunks[0])
	if data, err = os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data[:len(data)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	s.nginx = nginxproc.Start(t, s.shared)
	restored, _, err := luaStatus(s)
	if err != nil || restored {
		t.Errorf("nginx's status: restored %v, %v; want a start without the corrupt state", restored, err)
	}
	if err := s.expect(coldPlainHost, "/", ipColdPlain); err == nil {
		t.Error("nginx serves a host of a state it should have refused")
	}
	if logs := s.nginx.Logs(); !strings.Contains(logs, "is not valid JSON") || !strings.Contains(logs, "chunk ") ||
		!strings.Contains(logs, "ignored, serving nothing") {
		t.Errorf("nginx's log does not name the corrupt chunk:\n%s", s.nginx.Logs())
	}
	s.agent = startAgent(t, s.agentArgs...)
	s.eventually("the agent pushes again", func() error { return s.expect(coldProfiledHost, "/", ipColdProfiled) })
}

// An agent killed and started again while the profiled host's settings
// change reads back the profiles of the config nginx runs, keeps the one
// Lua's route still jumps to for one more config, and drops it only after
// the route left it: under load, no request meets a missing named location.
func TestAgentRestartDropsAProfileUnderLoad(t *testing.T) {
	s := coldStack(t)
	port := stackHTTPSPort(t, s)
	before := profilesOf(t, s)
	l := startHostLoad(s, port)
	s.eventually("load answered", func() error {
		if l.requests.Load() < 10 {
			return fmt.Errorf("%d requests so far", l.requests.Load())
		}
		return nil
	})

	syscall.Kill(-s.agent.cmd.Process.Pid, syscall.SIGKILL)
	<-s.agent.done
	s.writeFile("ing-profiled.yaml", profiledIngress("8k")) // a new profile; the old one goes
	s.agent = startAgent(t, s.agentArgs...)
	s.eventually("the old profile is gone from nginx.conf", func() error {
		after := profilesOf(t, s)
		for p := range before {
			if after[p] {
				return fmt.Errorf("%s still in nginx.conf", p)
			}
		}
		if len(after) == 0 {
			return fmt.Errorf("no profile in nginx.conf")
		}
		return nil
	})
	s.eventually("the agent is ready", func() error { return s.expectAdmin("/readyz", http.StatusOK) })
	time.Sleep(300 * time.Millisecond)
	l.stop(t, "across the agent's restart and the profile's change")
	if !strings.Contains(s.agent.log.String(), "read back the config nginx runs") {
		t.Error("the agent did not log reading back the config nginx runs")
	}
}
