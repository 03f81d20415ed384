package e2e

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// Backend addresses: one per Service, so the answer names the Service that
// served the request.
const (
	ipFoo       = "127.0.0.21"
	ipOther     = "127.0.0.22"
	ipExact     = "127.0.0.23"
	ipBar       = "127.0.0.24"
	ipWild      = "127.0.0.25"
	ipHostless  = "127.0.0.26"
	ipDefault   = "127.0.0.27"
	ipLegacy    = "127.0.0.28"
	ipClassless = "127.0.0.29"
	ipOtherCls  = "127.0.0.30"
	ipNotReady  = "127.0.0.31"
	ipRR1       = "127.0.0.41"
	ipRR2       = "127.0.0.42"
	ipRR3       = "127.0.0.43"
	ipRR4       = "127.0.0.44"
	ipRR5       = "127.0.0.45"
)

// routingFiles is a folder of manifests that exercises every routing rule
// of Ingress v1, with every backend on port.
func routingFiles(port int) map[string]string {
	return map[string]string{
		"classes.yaml": ingressClasses,
		"services.yaml": strings.Join([]string{
			service("foo", port, ep(ipFoo), notReady(ipNotReady)),
			service("other", port, ep(ipOther)),
			service("exact", port, readyTrue(ipExact)),
			service("bar", port, ep(ipBar)),
			service("wild", port, ep(ipWild)),
			service("hostless", port, ep(ipHostless)),
			service("default-backend", port, ep(ipDefault)),
			service("legacy", port, ep(ipLegacy)),
			service("classless", port, ep(ipClassless)),
			service("otherclass", port, ep(ipOtherCls)),
			service("empty", port),
		}, "---\n"),
		"rr.yaml": service("rr", port, ep(ipRR1), ep(ipRR2), ep(ipRR3)),
		// a is older than b, so a keeps /foo when b asks for it too.
		"a.yaml": ingress("a", ingressOpts{class: "restysync", created: "2020-01-01T00:00:00Z", host: "a.test", paths: []path{
			prefix("/foo", "foo"),
			exact("/exact", "exact"),
			prefix("/empty", "empty"),
			prefix("/missing", "no-such-service"),
			prefix("/foo/deep", "bar"),                      // longer than /foo
			implementationSpecific("/impl", "bar"),          // as Prefix
			prefix("/slash/", "exact"),                      // the trailing slash is ignored
			prefix("/both", "foo"), exact("/both", "exact"), // Exact beats Prefix
		}}),
		// Created at the same time: the namespace/name decides, c before d.
		"c.yaml": ingress("c", ingressOpts{class: "restysync", created: "2022-01-01T00:00:00Z", host: "tie.test", paths: []path{prefix("/", "foo")}}),
		"d.yaml": ingress("d", ingressOpts{class: "restysync", created: "2022-01-01T00:00:00Z", host: "tie.test", paths: []path{prefix("/", "other")}}),
		"b.yaml": ingress("b", ingressOpts{class: "restysync", created: "2021-01-01T00:00:00Z", host: "a.test", paths: []path{
			prefix("/foo", "other"),
			prefix("/bar", "bar"),
		}}),
		"wild.yaml":       ingress("wild", ingressOpts{class: "restysync", host: "*.wild.test", paths: []path{prefix("/", "wild")}}),
		"hostless.yaml":   ingress("hostless", ingressOpts{class: "restysync", paths: []path{prefix("/hostless", "hostless")}}),
		"legacy.yaml":     ingress("legacy", ingressOpts{legacyClass: "restysync", host: "legacy.test", paths: []path{prefix("/", "legacy")}}),
		"classless.yaml":  ingress("classless", ingressOpts{host: "classless.test", paths: []path{prefix("/", "classless")}}),
		"otherclass.yaml": ingress("otherclass", ingressOpts{class: "other", host: "otherclass.test", paths: []path{prefix("/", "otherclass")}}),
		"rr-ingress.yaml": ingress("rr", ingressOpts{class: "restysync", host: "rr.test", paths: []path{prefix("/", "rr")}}),
	}
}

// TestPipeline runs the agent on a folder of manifests with a real nginx
// and real backends, and checks over HTTP that every change to the folder
// reaches traffic the way it should: structure through a reload, endpoints
// without one.
func TestPipeline(t *testing.T) {
	b := startBackends(t, ipFoo, ipOther, ipExact, ipBar, ipWild, ipHostless, ipDefault, ipLegacy,
		ipClassless, ipOtherCls, ipNotReady, ipRR1, ipRR2, ipRR3, ipRR4, ipRR5)
	s := newStack(t, routingFiles(b.port))
	s.eventually("the first config is served", func() error { return s.expect("a.test", "/foo", ipFoo) })

	t.Run("routing", func(t *testing.T) {
		cases := []struct{ host, path, want string }{
			// Prefix matches element-wise.
			{"a.test", "/foo", ipFoo},
			{"a.test", "/foo/", ipFoo},
			{"a.test", "/foo/x/y", ipFoo},
			{"a.test", "/foobar", "404"},
			{"a.test", "/FOO", "404"},
			{"A.TEST", "/foo", ipFoo}, // host names are case-insensitive
			// Exact matches only itself; the port is named in the Ingress.
			{"a.test", "/exact", ipExact},
			{"a.test", "/exact/", "404"},
			{"a.test", "/exact/x", "404"},
			// The longest match wins; ImplementationSpecific is Prefix; a
			// trailing slash in the rule is ignored; Exact beats Prefix.
			{"a.test", "/foo/deep", ipBar},
			{"a.test", "/foo/deep/x", ipBar},
			{"a.test", "/foo/deeper", ipFoo},
			{"a.test", "/impl", ipBar},
			{"a.test", "/impl/x", ipBar},
			{"a.test", "/implx", "404"},
			{"a.test", "/slash", ipExact},
			{"a.test", "/slash/x", ipExact},
			{"a.test", "/both", ipExact},
			{"a.test", "/both/x", ipFoo},
			// Same creationTimestamp: namespace/name breaks the tie.
			{"tie.test", "/", ipFoo},
			// b merges into a.test; a, older, keeps /foo.
			{"a.test", "/bar", ipBar},
			{"a.test", "/nope", "404"},
			// No ready endpoint, or no Service: 503.
			{"a.test", "/empty", "503"},
			{"a.test", "/missing", "503"},
			// A wildcard matches one label.
			{"x.wild.test", "/", ipWild},
			{"y.wild.test", "/p/q", ipWild},
			{"a.b.wild.test", "/", "404"},
			{"wild.test", "/", "404"},
			// Host-less rules serve hosts no server names.
			{"unknown.test", "/hostless", ipHostless},
			{"unknown.test", "/hostless/x", ipHostless},
			{"a.test", "/hostless", "404"},
			{"unknown.test", "/", "404"},
			// Class: the legacy annotation, the default class, and another class.
			{"legacy.test", "/", ipLegacy},
			{"classless.test", "/", ipClassless},
			{"otherclass.test", "/", "404"},
		}
		for _, c := range cases {
			if err := s.expect(c.host, c.path, c.want); err != nil {
				t.Error(err)
			}
		}
	})

	t.Run("ready endpoints only", func(t *testing.T) {
		for range 20 {
			if err := s.expect("a.test", "/foo", ipFoo); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("round robin", func(t *testing.T) {
		counts := map[string]int{}
		const rounds = 30
		for range rounds {
			_, body, err := s.get("rr.test", "/")
			if err != nil {
				t.Fatal(err)
			}
			counts[body]++
		}
		// Each of the two workers takes its own turns, so an endpoint is at
		// most one request per worker off its fair share.
		for _, ip := range []string{ipRR1, ipRR2, ipRR3} {
			if n := counts[ip]; n < rounds/3-2 || n > rounds/3+2 {
				t.Errorf("%s served %d of %d requests, want %d±2: %v", ip, n, rounds, rounds/3, counts)
			}
		}
		if len(counts) != 3 {
			t.Errorf("answers from %v, want only the three endpoints", counts)
		}
	})

	t.Run("endpoint change without reload", func(t *testing.T) {
		workers := s.steadyWorkers()
		s.writeFile("rr.yaml", service("rr", b.port, ep(ipRR2), ep(ipRR3), ep(ipRR4)))
		s.eventually("the new endpoint serves", func() error { return seen(s, "rr.test", ipRR4, 6) })
		for range 12 {
			if _, body, err := s.get("rr.test", "/"); err != nil || body == ipRR1 {
				t.Fatalf("after the change: %q, %v; %s is gone", body, err, ipRR1)
			}
		}
		if now := s.nginx.WorkerPIDs(); !slices.Equal(workers, now) {
			t.Errorf("nginx reloaded on an endpoint change: workers %v, now %v", workers, now)
		}
	})

	t.Run("default backend through a routes push", func(t *testing.T) {
		workers := s.steadyWorkers()
		s.writeFile("default.yaml", ingress("default", ingressOpts{class: "restysync", defaultSvc: "default-backend"}))
		s.eventually("the default backend serves unknown hosts", func() error { return s.expect("unknown.test", "/", ipDefault) })
		if err := s.expect("unknown.test", "/hostless", ipHostless); err != nil {
			t.Error(err) // a rule's path still beats the default backend
		}
		// Every host, the default server's "_" included, is routed in Lua:
		// a default backend is a push, not a reload.
		if now := s.nginx.WorkerPIDs(); !slices.Equal(now, workers) {
			t.Errorf("nginx replaced its workers %v with %v: a reload", workers, now)
		}
	})

	t.Run("ingress class change", func(t *testing.T) {
		s.writeFile("classes.yaml", strings.Replace(ingressClasses,
			"  annotations:\n    ingressclass.kubernetes.io/is-default-class: \"true\"\n", "", 1))
		s.eventually("a class-less Ingress is no longer ours", func() error { return s.expect("classless.test", "/", ipDefault) })
		if err := s.expect("legacy.test", "/", ipLegacy); err != nil {
			t.Error(err)
		}
	})

	t.Run("ingress removed", func(t *testing.T) {
		s.removeFile("b.yaml")
		s.eventually("b's path is gone", func() error { return s.expect("a.test", "/bar", "404") })
		if err := s.expect("a.test", "/foo", ipFoo); err != nil {
			t.Error(err)
		}
	})

	t.Run("bad manifest is reported and others keep updating", func(t *testing.T) {
		s.writeFile("broken.yaml", "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: [not, a, map\n")
		s.writeFile("unknown-field.yaml", ingress("typo", ingressOpts{class: "restysync", host: "typo.test",
			paths: []path{prefix("/", "foo")}})+"  rulez: []\n")
		s.eventually("the agent reports both files", func() error {
			log := s.agent.log.String()
			for _, name := range []string{"broken.yaml", "unknown-field.yaml"} {
				if !strings.Contains(log, name) {
					return errorf("agent log does not name %s", name)
				}
			}
			return nil
		})
		if !strings.Contains(s.agent.log.String(), "rulez") {
			t.Errorf("the report on unknown-field.yaml does not name the field:\n%s", s.agent.log.String())
		}
		s.writeFile("rr.yaml", service("rr", b.port, ep(ipRR5)))
		s.eventually("an endpoint change still lands", func() error { return s.expect("rr.test", "/", ipRR5) })
		if err := s.expect("a.test", "/foo", ipFoo); err != nil {
			t.Error(err)
		}
		if err := s.expect("typo.test", "/", ipDefault); err != nil {
			t.Error(err) // the bad document is left out
		}
	})

	t.Run("bad JSON on the socket changes nothing", func(t *testing.T) {
		api := s.nginx.API()
		before := getBody(t, api, "http://restysync/backends")
		for _, body := range []string{
			`{not json`,
			`{"upserts":[{"name":"default/rr:80","endpoints":[{"address":"127.0.0.41","port":99999}]}]}`,
			`{"upserts":[{"name":"default/rr:80","endpoints":"none"}]}`,
			`{"removes":[42]}`,
			`[]`,
		} {
			resp, err := api.Post("http://restysync/backends", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			reason, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || len(bytes.TrimSpace(reason)) == 0 {
				t.Errorf("POST %s: %d %q, want 400 with a reason", body, resp.StatusCode, reason)
			}
		}
		if after := getBody(t, api, "http://restysync/backends"); after != before {
			t.Errorf("backends changed:\nbefore %s\nafter  %s", before, after)
		}
		if err := s.expect("rr.test", "/", ipRR5); err != nil {
			t.Error(err)
		}
	})
}

// seen says whether want answered host within n requests.
func seen(s *stack, host, want string, n int) error {
	var got []string
	for range n {
		_, body, err := s.get(host, "/")
		if err != nil {
			return err
		}
		if body == want {
			return nil
		}
		got = append(got, body)
	}
	return errorf("%s not among %v", want, got)
}

func getBody(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return string(body)
}
