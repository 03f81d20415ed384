package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// steerWorld is tenant A (a.test: auth-url, custom-http-errors with its
// own error Service, mirror-target) and tenant B (b.test), whose backend
// answers GET /steer?to=X with "X-Accel-Redirect: X". It counts the
// requests A's auth, error and mirror services get.
type steerWorld struct {
	authHits, errorHits, mirrorHits atomic.Int32
	files                           map[string]string
	// grpcTarget is where B's gRPC backend (grpc.b.test) sends nginx.
	grpcTarget atomic.Value
}

// steeringHealth is a gRPC health service whose answers carry
// X-Accel-Redirect to target.
type steeringHealth struct {
	healthpb.UnimplementedHealthServer
	target *atomic.Value
}

func (h steeringHealth) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	target, _ := h.target.Load().(string)
	grpc.SetHeader(ctx, metadata.Pairs("x-accel-redirect", target))
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func newSteerWorld(t *testing.T) *steerWorld {
	t.Helper()
	const aIP, bIP = "127.0.0.121", "127.0.0.122"
	w := &steerWorld{}
	port := nginxproc.FreePort(t)
	serve(t, aIP, port, func(rw http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/auth":
			w.authHits.Add(1)
			rw.Header().Set("X-Auth-User", "alice-of-a")
			if c, _ := r.Cookie("session"); c == nil || c.Value != "valid" {
				rw.WriteHeader(http.StatusUnauthorized)
			}
			io.WriteString(rw, "auth answer of tenant A\n")
		case "/mirror":
			w.mirrorHits.Add(1)
		default:
			if r.URL.Path == "/missing" {
				http.Error(rw, "A's backend 404", http.StatusNotFound)
				return
			}
			fmt.Fprintf(rw, "app of A for %s\n", r.Header.Get("X-Auth-User"))
		}
	})
	errorsPort := nginxproc.FreePort(t)
	serve(t, aIP, errorsPort, func(rw http.ResponseWriter, r *http.Request) {
		w.errorHits.Add(1)
		rw.WriteHeader(http.StatusNotFound)
		io.WriteString(rw, "error page of tenant A\n")
	})
	serve(t, bIP, port, func(rw http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/steer":
			rw.Header().Set("X-Accel-Redirect", r.URL.Query().Get("to"))
			io.WriteString(rw, "B's backend, not redirected\n")
		case "/own":
			io.WriteString(rw, "B's own page\n")
		default:
			io.WriteString(rw, "B's backend\n")
		}
	})
	w.grpcTarget.Store("/")
	l, err := net.Listen("tcp", net.JoinHostPort(bIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	grpcServer := grpc.NewServer()
	healthpb.RegisterHealthServer(grpcServer, steeringHealth{target: &w.grpcTarget})
	go grpcServer.Serve(l)
	t.Cleanup(grpcServer.Stop)
	pair := newTLSKeyPair(t, 2501, "grpc.b.test")
	w.files = map[string]string{
		"classes.yaml": ingressClasses,
		"secret.yaml":  tlsSecret("tls", pair.cert, pair.key),
		"grpc.yaml": service("grpc-b", l.Addr().(*net.TCPAddr).Port, ep(bIP)) + "---\n" +
			ingress("grpc-b", ingressOpts{class: "restysync", host: "grpc.b.test", paths: []path{prefix("/", "grpc-b")},
				tls:         []ingressTLS{{secret: "tls", hosts: []string{"grpc.b.test"}}},
				annotations: map[string]string{"nginx.ingress.kubernetes.io/backend-protocol": "GRPC"}}),
		"services.yaml": service("app-a", port, ep(aIP)) + "---\n" + service("errors-a", errorsPort, ep(aIP)) + "---\n" + service("app-b", port, ep(bIP)),
		"a.yaml": ingress("a", ingressOpts{class: "restysync", host: "a.test", paths: []path{prefix("/", "app-a")},
			annotations: map[string]string{
				"nginx.ingress.kubernetes.io/auth-url":              fmt.Sprintf("http://%s:%d/auth", aIP, port),
				"nginx.ingress.kubernetes.io/auth-response-headers": "X-Auth-User",
				"nginx.ingress.kubernetes.io/custom-http-errors":    "404",
				"restysync.io/default-backend":                      "errors-a",
				"nginx.ingress.kubernetes.io/mirror-target":         fmt.Sprintf("http://%s:%d/mirror", aIP, port),
			}}),
		// B has a profile of its own, so its requests carry a profile name.
		"b.yaml": ingress("b", ingressOpts{class: "restysync", host: "b.test", paths: []path{prefix("/", "app-b")},
			annotations: map[string]string{"nginx.ingress.kubernetes.io/proxy-read-timeout": "31"}}),
	}
	return w
}

// internalLocations returns A's auth location, its 404 error location, its
// profile and the mirror location, read from the nginx.conf the agent
// wrote. An attacker can compute each from render's code and A's
// annotations; reading them keeps the test apart from how render names
// them.
func internalLocations(t *testing.T, shared string) map[string]string {
	t.Helper()
	conf, err := os.ReadFile(filepath.Join(shared, "nginx.conf"))
	if err != nil {
		t.Fatal(err)
	}
	find := func(what, pattern string) string {
		m := regexp.MustCompile(pattern).FindSubmatch(conf)
		if m == nil {
			t.Fatalf("nginx.conf has no %s (%s)", what, pattern)
		}
		return string(m[1])
	}
	// A's profile is the one that asks the auth service.
	var profile, current string
	for _, line := range strings.Split(string(conf), "\n") {
		if m := regexp.MustCompile(`^\s*location (@restysync_p_[0-9a-f]+) \{`).FindStringSubmatch(line); m != nil {
			current = m[1]
		}
		if current != "" && strings.Contains(line, "auth_request ") {
			profile = current
		}
	}
	if profile == "" {
		t.Fatal("nginx.conf has no profile with auth_request")
	}
	return map[string]string{
		"A's auth location":  find("auth location", `location = "(/_restysync/auth/[0-9a-f]+)"`),
		"A's error location": find("error location", `location (@restysync_error_[0-9a-f]+_404) \{`),
		"A's profile":        profile,
		"the mirror":         find("mirror location", `location = "(/_restysync/mirror)"`),
	}
}

// steer asks B's backend to send b.test's request to target.
func (s *stack) steer(t *testing.T, target string) (int, string) {
	t.Helper()
	resp, body := s.do(t, accessRequest(t, http.MethodGet, "http://b.test/steer?to="+url.QueryEscape(target), nil))
	return resp.StatusCode, body
}

// Backends cannot steer nginx (issue 25, point 6): by default nginx ignores
// X-Accel-Redirect (and every X-Accel-* header) from a backend, so tenant
// B's backend cannot send B's client into tenant A's auth location, error
// location, profile or the mirror location; with --allow-x-accel-redirect
// it can jump to B's own paths, and each of those internal locations
// answers 404 to a request it was not made for. A's own requests still go
// through its auth, error page and mirror.
func TestBackendsCannotSteerNginx(t *testing.T) {
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprintf("allow-x-accel-redirect=%v", allow), func(t *testing.T) {
			w := newSteerWorld(t)
			s := &stack{t: t, manifests: t.TempDir()}
			for name, content := range w.files {
				s.writeFile(name, content)
			}
			args := []string{"--source", "file:" + s.manifests}
			if allow {
				args = append(args, "--allow-x-accel-redirect")
			}
			s.start(args...)
			s.eventually("b.test serves", func() error { return s.expect("b.test", "/", "B's backend") })

			// A's own requests: the guards let them through.
			valid := http.Header{"Cookie": {"session=valid"}}
			if resp, body := s.do(t, accessRequest(t, http.MethodGet, "http://a.test/", valid)); resp.StatusCode != http.StatusOK || body != "app of A for alice-of-a" {
				t.Fatalf("a.test/ with a session: %d %q, want A's app behind A's auth", resp.StatusCode, body)
			}
			if resp, body := s.do(t, accessRequest(t, http.MethodGet, "http://a.test/missing", valid)); resp.StatusCode != http.StatusNotFound || body != "error page of tenant A" {
				t.Fatalf("a.test/missing: %d %q, want A's error page", resp.StatusCode, body)
			}
			s.eventually("A's mirror gets A's requests", func() error {
				if w.mirrorHits.Load() == 0 {
					return fmt.Errorf("no mirrored request yet")
				}
				return nil
			})

			auth, errs := w.authHits.Load(), w.errorHits.Load()
			mirrored := w.mirrorHits.Load()
			for what, target := range internalLocations(t, s.shared) {
				status, body := s.steer(t, target)
				if strings.Contains(body, "tenant A") || strings.Contains(body, "app of A") {
					t.Errorf("%s (%s): B's client got %d %q", what, target, status, body)
				}
				want := http.StatusNotFound
				if !allow {
					want = http.StatusOK // X-Accel-Redirect ignored: B's own answer
				}
				if status != want {
					t.Errorf("%s (%s): B's client got %d %q, want %d", what, target, status, body, want)
				}
			}
			if n := w.authHits.Load(); n != auth {
				t.Errorf("A's auth service was asked %d times for B's requests", n-auth)
			}
			if n := w.errorHits.Load(); n != errs {
				t.Errorf("A's error service was asked %d times for B's requests", n-errs)
			}
			if n := w.mirrorHits.Load(); n != mirrored {
				t.Errorf("A's mirror got %d of B's requests", n-mirrored)
			}

			// A gRPC backend too (grpc_ignore_headers).
			w.grpcTarget.Store(internalLocations(t, s.shared)["A's auth location"])
			_, err := grpcCheck(stackHTTPSPort(t, s), "grpc.b.test")
			if !allow && err != nil {
				t.Errorf("gRPC backend sending X-Accel-Redirect without the flag: %v, want its answer", err)
			}
			if allow && err == nil {
				t.Errorf("gRPC backend sending X-Accel-Redirect to A's auth location: the call succeeded, want nginx's 404")
			}
			if n := w.authHits.Load(); n != auth {
				t.Errorf("A's auth service was asked %d times for B's gRPC call", n-auth)
			}

			status, body := s.steer(t, "/own")
			if allow && (status != http.StatusOK || body != "B's own page") {
				t.Errorf("X-Accel-Redirect to B's own path: %d %q, want B's own page", status, body)
			}
			if !allow && (status != http.StatusOK || body != "B's backend, not redirected") {
				t.Errorf("X-Accel-Redirect without the flag: %d %q, want it ignored", status, body)
			}
		})
	}
}
