package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// More ConfigMap keys over real HTTP: worker-processes, proxy-read-timeout,
// keep-alive-requests, log-format-upstream and forwarded-for-header.
func TestConfigMapMoreKeys(t *testing.T) {
	const ipWeb = "127.0.0.153"
	port := nginxproc.FreePort(t)
	serveConfigMapBackend(t, ipWeb, port, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow":
			time.Sleep(2500 * time.Millisecond)
			io.WriteString(w, "late")
		default:
			io.WriteString(w, "ok")
		}
	})
	s := newConfigMapStack(t, map[string]string{
		"classes.yaml": ingressClasses,
		"web.yaml":     service("web", port, ep(ipWeb)),
		"ingress.yaml": ingress("web", ingressOpts{class: "restysync", host: "keys.test", paths: []path{prefix("/", "web")}}),
		"settings.yaml": configMap(map[string]string{
			"worker-processes":    "3",
			"proxy-read-timeout":  "1",
			"keep-alive-requests": "2",
			"enable-access-log":   "true",
			"access-log-path":     "logs/access.log",
			"log-format-upstream": "restysync-test $request_method $uri $status $restysync_backend",
		}),
	})
	s.eventually("served with the ConfigMap", func() error {
		if n := len(s.nginx.WorkerPIDs()); n != 3 {
			return fmt.Errorf("%d nginx workers, want 3 (worker-processes)", n)
		}
		_, body, err := s.request("GET", "keys.test", "/", nil, nil)
		if err == nil && body != "ok" {
			err = fmt.Errorf("body %q", body)
		}
		return err
	})

	t.Run("proxy-read-timeout", func(t *testing.T) {
		start := time.Now()
		resp, _, err := s.request("GET", "keys.test", "/slow", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusGatewayTimeout {
			t.Errorf("a backend 2.5 s late with proxy-read-timeout 1: %d after %s, want 504", resp.StatusCode, time.Since(start))
		}
	})

	t.Run("keep-alive-requests", func(t *testing.T) {
		// One client, one connection: nginx closes it after the second request.
		c := clientTo(s.port)
		var closed []bool
		for range 2 {
			req, _ := http.NewRequest("GET", fmt.Sprintf("http://keys.test:%d/", s.port), nil)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			closed = append(closed, resp.Close)
		}
		if closed[0] || !closed[1] {
			t.Errorf("connection closed after requests 1, 2: %v; want only after the second", closed)
		}
	})

	t.Run("log-format-upstream", func(t *testing.T) {
		s.eventually("the request logged in the custom format", func() error {
			log, err := os.ReadFile(filepath.Join(s.shared, "logs", "access.log"))
			if err != nil {
				return err
			}
			if !strings.Contains(string(log), "restysync-test GET /slow 504 default/web:80") {
				return fmt.Errorf("access log:\n%s", log)
			}
			return nil
		})
	})
}
