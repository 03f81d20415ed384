package apply_test

import (
	"bytes"
	"context"
	"fmt"
	"github.com/restysync/restysync/agent/internal/testenv/agentnginx"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/apply"
	"github.com/restysync/restysync/agent/internal/luaapi"
	"github.com/restysync/restysync/agent/internal/render"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// takeover is the body of the traffic takeover of issue 25: tenant A's
// backend pointed at tenant B's pod.
const takeover = `{"upserts":[{"name":"tenant-a/app-a:80","endpoints":[{"address":"127.0.0.66","port":9000}]}]}`

// attackServer is a server block a hostile tenant's nginx.conf would get
// if its URLs could name the config API's socket: a mirror, an auth
// request and a plain proxy into it, with the headers the template's
// mirror and auth locations set (the auth one with a tenant's
// auth-proxy-set-headers that try to blank them), and one with none.
const attackServer = `
    server {
        listen 127.0.0.1:%[1]d;
        location = /mirror {
            mirror /_mirror;
            mirror_request_body on;
            proxy_pass http://127.0.0.1:%[2]d;
        }
        location = /_mirror {
            internal;
            proxy_set_header X-Request-ID $request_id;
            proxy_set_header X-Restysync-Proxied 1;
            proxy_pass http://unix:%[3]s:/backends;
        }
        location = /auth {
            auth_request /_auth;
            proxy_pass http://127.0.0.1:%[2]d;
        }
        location = /_auth {
            internal;
            proxy_set_header X-Request-ID $request_id;
            proxy_set_header X-Restysync-Proxied 1;
            proxy_set_header X-Request-ID "";
            proxy_set_header X-Restysync-Proxied "";
            proxy_pass http://unix:%[3]s:/backends;
        }
        location = /bare {
            proxy_pass http://unix:%[3]s:/backends;
        }
    }
`

// startWithAttacker starts nginx with the config of an empty model and
// attackServer in its http block; it returns the apply.Nginx that drives
// it, the nginx, and the attacker's port.
func startWithAttacker(t *testing.T) (*apply.Nginx, *nginxproc.Nginx, int) {
	t.Helper()
	nginxproc.Binary(t)
	prefix := nginxproc.TempPrefix(t)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, "backend of the attacker")
	}))
	t.Cleanup(backend.Close)
	backendPort := backend.Listener.Addr().(*net.TCPAddr).Port
	attackPort := nginxproc.FreePort(t)
	socket := filepath.Join(prefix, render.SocketName)
	n, nginx, _, _ := agentnginx.StartEdited(t, prefix, func(conf []byte) []byte {
		return bytes.Replace(conf, []byte("\nhttp {\n"), []byte("\nhttp {\n"+fmt.Sprintf(attackServer, attackPort, backendPort, socket)), 1)
	})
	return n, nginx, attackPort
}

// send sends method path with body and the given secret header (none when
// secret is nil) to url, and returns the status.
func send(t *testing.T, client *http.Client, method, url string, secret *string, body string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if secret != nil {
		req.Header[luaapi.SecretHeader] = []string{*secret}
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// denied returns the config API's count of refused requests.
func denied(t *testing.T, n *apply.Nginx) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	m, err := n.Lua.Metrics(ctx)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	return m.APIDenied
}

// waitDenied waits, up to 10 s, until the count of refused requests is
// want (a mirror's subrequest ends after its request).
func waitDenied(t *testing.T, n *apply.Nginx, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := denied(t, n)
		if got == want {
			return
		}
		if got > want || time.Now().After(deadline) {
			t.Fatalf("config API refused %d requests, want %d", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func assertNoTakeover(t *testing.T, n *apply.Nginx) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	held, err := n.Lua.Backends(ctx)
	if err != nil {
		t.Fatalf("GET /backends: %v", err)
	}
	if len(held) != 0 {
		t.Fatalf("Lua holds %v after the attack; want nothing", held)
	}
}

// The traffic takeover of issue 25 fails: nginx's own workers, sent into
// the config API's socket by a mirror, an auth request or a plain proxy,
// are refused with 403 whatever secret the client put in its headers (the
// real one included: it travels with a mirror), and so is a client on the
// socket without the secret; each refusal is counted and Lua's store is
// unchanged. The agent's client, with the secret, is answered.
func TestConfigAPIAnswersOnlyTheAgent(t *testing.T) {
	n, proc, attackPort := startWithAttacker(t)
	secret, err := luaapi.ReadSecret(n.SharedDir)
	if err != nil {
		t.Fatal(err)
	}
	wrong := strings.Repeat("0", 64)
	empty := ""
	guessed := "restysync"
	client := &http.Client{Timeout: 10 * time.Second}
	attacker := fmt.Sprintf("http://127.0.0.1:%d", attackPort)
	var want int64

	t.Run("from inside nginx", func(t *testing.T) {
		for _, s := range []*string{nil, &wrong, &empty, &guessed, &secret} {
			label := "no secret"
			if s != nil {
				label = fmt.Sprintf("secret %q", (*s)[:min(len(*s), 9)])
			}
			if code := send(t, client, http.MethodPost, attacker+"/mirror", s, takeover); code != http.StatusOK {
				t.Errorf("mirror, %s: the tenant's own request answered %d", label, code)
			}
			want++
			waitDenied(t, n, want)
			if code := send(t, client, http.MethodPost, attacker+"/auth", s, takeover); code != http.StatusForbidden {
				t.Errorf("auth request, %s: answered %d, want the API's 403", label, code)
			}
			want++
			waitDenied(t, n, want)
			assertNoTakeover(t, n)
		}
	})

	t.Run("a proxy that sets no header of nginx's", func(t *testing.T) {
		for _, s := range []*string{nil, &wrong, &empty, &guessed} {
			if code := send(t, client, http.MethodPost, attacker+"/bare", s, takeover); code != http.StatusForbidden {
				t.Errorf("answered %d, want 403", code)
			}
			want++
			waitDenied(t, n, want)
		}
		assertNoTakeover(t, n)
	})

	t.Run("on the socket", func(t *testing.T) {
		socket := unixClient(filepath.Join(n.SharedDir, render.SocketName))
		for _, path := range []string{"/backends", "/routes", "/certificates", "/access"} {
			for _, s := range []*string{nil, &wrong, &empty, &guessed} {
				if code := send(t, socket, http.MethodPost, "http://restysync"+path, s, takeover); code != http.StatusForbidden {
					t.Errorf("POST %s answered %d, want 403", path, code)
				}
				want++
			}
		}
		for _, path := range []string{"/backends", "/routes", "/certificates", "/metrics"} {
			if code := send(t, socket, http.MethodGet, "http://restysync"+path, nil, ""); code != http.StatusForbidden {
				t.Errorf("GET %s answered %d, want 403", path, code)
			}
			want++
		}
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			if code := send(t, socket, method, "http://restysync/status", nil, ""); code != http.StatusOK {
				t.Errorf("%s /status without the secret answered %d, want 200", method, code)
			}
		}
		waitDenied(t, n, want)
		assertNoTakeover(t, n)
		if code := send(t, socket, http.MethodPost, "http://restysync/backends", &secret, `{"upserts":[],"removes":[]}`); code != http.StatusOK {
			t.Errorf("POST /backends with the secret answered %d, want 200", code)
		}
	})

	t.Run("no secret file: fail closed", func(t *testing.T) {
		path := filepath.Join(n.SharedDir, luaapi.SecretName)
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		proc.Reload(t)
		socket := unixClient(filepath.Join(n.SharedDir, render.SocketName))
		if code := send(t, socket, http.MethodPost, "http://restysync/backends", &secret, takeover); code != http.StatusForbidden {
			t.Errorf("POST /backends with the old secret answered %d, want 403", code)
		}
		if code := send(t, socket, http.MethodGet, "http://restysync/status", nil, ""); code != http.StatusOK {
			t.Errorf("GET /status answered %d, want 200", code)
		}
		if logs := proc.Logs(); !strings.Contains(logs, "no config API secret") {
			t.Errorf("the error log does not say the secret is missing:\n%s", logs)
		}
		// The agent puts it back (an agent restart); the next reload reads it.
		if err := os.WriteFile(path, []byte(secret), 0o600); err != nil {
			t.Fatal(err)
		}
		proc.Reload(t)
		assertNoTakeover(t, n)
	})
}

// unixClient is a client of the socket at path that adds no header.
func unixClient(path string) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		DisableKeepAlives: true,
	}}
}
