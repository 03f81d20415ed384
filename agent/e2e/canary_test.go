package e2e

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// A canary Ingress splits the traffic of another Ingress's path: by header,
// then cookie, then weight; changing the weight is a push, not a reload.
func TestCanary(t *testing.T) {
	const ipMain, ipCanary = "127.0.0.71", "127.0.0.72"
	b := startBackends(t, ipMain, ipCanary)
	canary := func(weight string, more ...string) string {
		annotations := map[string]string{
			"nginx.ingress.kubernetes.io/canary":           "true",
			"nginx.ingress.kubernetes.io/canary-weight":    weight,
			"nginx.ingress.kubernetes.io/canary-by-header": "X-Canary",
			"restysync.io/canary-by-cookie":                "use_canary",
		}
		for i := 0; i+1 < len(more); i += 2 {
			annotations[more[i]] = more[i+1]
		}
		return ingress("web-canary", ingressOpts{class: "restysync", host: "canary.test", paths: []path{prefix("/", "canary")},
			annotations: annotations})
	}
	s := newStack(t, map[string]string{
		"classes.yaml":  ingressClasses,
		"services.yaml": service("main", b.port, ep(ipMain)) + "---\n" + service("canary", b.port, ep(ipCanary)),
		"main.yaml":     ingress("web", ingressOpts{class: "restysync", host: "canary.test", paths: []path{prefix("/", "main")}}),
		"canary.yaml":   canary("20"),
	})
	s.eventually("the canary takes part of the traffic", func() error {
		if got := s.canaryShare(t, 100, nil); got == 0 {
			return fmt.Errorf("no request reached the canary")
		}
		return nil
	})
	s.settle()
	workers := s.steadyWorkers()

	const n = 2000
	checkShare := func(what string, weight float64, header http.Header) {
		t.Helper()
		share := s.canaryShare(t, n, header)
		// Five standard deviations of a binomial share: a false alarm
		// about once in 1.7 million runs.
		bound := 5 * math.Sqrt(weight*(1-weight)/n)
		t.Logf("%s: %.3f of %d requests reached the canary (weight %.2f, bound ±%.3f)", what, share, n, weight, bound)
		if math.Abs(share-weight) > bound {
			t.Errorf("%s: canary share %.3f, want %.2f ± %.3f", what, share, weight, bound)
		}
	}
	checkShare("weight 20", 0.20, nil)
	checkShare("header always", 1, http.Header{"X-Canary": {"always"}})
	checkShare("header never", 0, http.Header{"X-Canary": {"never"}})
	checkShare("cookie always", 1, http.Header{"Cookie": {"use_canary=always"}})
	checkShare("header never beats cookie always", 0, http.Header{"X-Canary": {"never"}, "Cookie": {"use_canary=always"}})
	checkShare("another header value falls through to the weight", 0.20, http.Header{"X-Canary": {"maybe"}})

	s.writeFile("canary.yaml", canary("75"))
	s.eventually("the new weight applies", func() error {
		if share := s.canaryShare(t, 400, nil); share < 0.6 {
			return fmt.Errorf("canary share %.2f, want about 0.75", share)
		}
		return nil
	})
	checkShare("weight 75", 0.75, nil)

	// canary-weight-total sets the scale; with canary-by-header-value only
	// that value routes by header, and "always" is one more value that falls
	// through to the weight.
	s.writeFile("canary.yaml", canary("250",
		"nginx.ingress.kubernetes.io/canary-weight-total", "1000",
		"nginx.ingress.kubernetes.io/canary-by-header-value", "blue"))
	s.eventually("the weight of 250 out of 1000 applies", func() error {
		if share := s.canaryShare(t, 400, nil); share > 0.4 {
			return fmt.Errorf("canary share %.2f, want about 0.25", share)
		}
		return nil
	})
	checkShare("weight 250 of 1000", 0.25, nil)
	checkShare("header value blue", 1, http.Header{"X-Canary": {"blue"}})
	checkShare("header always is not the configured value", 0.25, http.Header{"X-Canary": {"always"}})

	// canary-by-header-pattern: a value the PCRE pattern matches chooses
	// the canary, any other falls through.
	s.writeFile("canary.yaml", canary("0", "nginx.ingress.kubernetes.io/canary-by-header-pattern", "^(blue|gr[e]+n)$"))
	s.eventually("the header pattern applies", func() error {
		if share := s.canaryShare(t, 20, http.Header{"X-Canary": {"green"}}); share != 1 {
			return fmt.Errorf("canary share %.2f for a matching header, want 1", share)
		}
		return nil
	})
	checkShare("header matching the pattern", 1, http.Header{"X-Canary": {"greeen"}})
	checkShare("header not matching the pattern", 0, http.Header{"X-Canary": {"red"}})
	// With a pattern (as with a value) "never" is one more value that does
	// not match: the cookie decides.
	checkShare("header never with a pattern falls through to the cookie", 1, http.Header{"X-Canary": {"never"}, "Cookie": {"use_canary=always"}})
	if now := s.nginx.WorkerPIDs(); !slices.Equal(now, workers) {
		t.Errorf("nginx workers changed from %v to %v: a weight change reloaded", workers, now)
	}

	s.removeFile("canary.yaml")
	s.eventually("without the canary everything goes to main", func() error {
		if share := s.canaryShare(t, 200, nil); share != 0 {
			return fmt.Errorf("canary share %.2f after the canary Ingress is gone", share)
		}
		return nil
	})
}

// canaryShare sends n requests to canary.test with header and returns the
// share the canary backend (127.0.0.72) answered.
func (s *stack) canaryShare(t *testing.T, n int, header http.Header) float64 {
	t.Helper()
	canary := 0
	for range n {
		req, err := http.NewRequest(http.MethodGet, "http://canary.test/", nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := s.client.Do(req)
		if err != nil {
			t.Fatalf("GET canary.test: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET canary.test: %d %s", resp.StatusCode, body)
		}
		if strings.TrimSpace(string(body)) == "127.0.0.72" {
			canary++
		}
	}
	return float64(canary) / float64(n)
}
