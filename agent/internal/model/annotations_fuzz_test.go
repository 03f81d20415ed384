package model

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/restysync/restysync/agent/internal/chars"
)

// policyAnnotations are the keys FuzzAnnotations sets, each under one of the
// two prefixes.
var policyAnnotations = []string{
	"use-regex", "load-balance", "upstream-hash-by", "affinity", "session-cookie-name",
	"session-cookie-path", "session-cookie-max-age", "session-cookie-samesite", "session-cookie-secure",
	"session-cookie-change-on-failure", "session-cookie-domain", "session-cookie-expires",
	"proxy-next-upstream-tries", "max-fails", "fail-timeout",
	"canary", "canary-weight", "canary-weight-total", "canary-by-header", "canary-by-header-value",
	"canary-by-header-pattern", "canary-by-cookie",
	"upstream-hash-by-subset", "upstream-hash-by-subset-size", "affinity-mode", "affinity-canary-behavior",
	"session-cookie-conditional-samesite-none",
}

// luaAccepts mirrors the field checks of lua/restysync/policy.lua: a Policy
// Build emits must pass them, or Lua would refuse the whole push.
var luaAccepts = map[string]*regexp.Regexp{
	"hash_by":               regexp.MustCompile(`^[a-z_][a-z0-9_]*( [a-z_][a-z0-9_]*){0,3}$`),
	"cookie_name":           regexp.MustCompile("^[A-Za-z0-9!#$%&'*+\\-.^_`|~]+$"),
	"cookie_path":           regexp.MustCompile(`^/[!-:<-~]*$`),
	"canary_header":         regexp.MustCompile(`^[A-Za-z0-9_-]+$`),
	"canary_header_value":   regexp.MustCompile(`^[ -~]*$`),
	"canary_cookie":         regexp.MustCompile("^[A-Za-z0-9!#$%&'*+\\-.^_`|~]+$"),
	"cookie_domain":         regexp.MustCompile(`^\.?[a-z0-9][a-z0-9.-]*$`),
	"canary_header_pattern": regexp.MustCompile(`^[ -~]+$`),
}

// FuzzAnnotations sets every annotation Build reads to fuzzed values on a
// main and a canary Ingress. Build must not panic, must name the Ingress in
// every Problem it raises, and every Policy it emits must be one Lua takes.
func FuzzAnnotations(f *testing.F) {
	f.Add("true", "ewma", "$request_uri", "cookie", "30", "X-Canary", uint32(0))
	f.Add("yes", "weighted", "$host$uri", "ip", "-1", "X Canary", uint32(0xffffffff))
	f.Add("false", "round_robin", "$cookie_id", "cookie", "1000001", "a;b", uint32(0x5555))
	f.Add("", "", "", "", "", "", uint32(1))
	// Characters no value may hold (package chars): C1, U+2028/2029,
	// bidi and format characters, invalid UTF-8, encoded surrogates.
	f.Add("tr\u0085ue", "ewma\u2028", "$request_uri\u202e", "cookie\u2066", "3\u200b0", "X-Ca\xed\xa0\x80nary", uint32(0x1234))
	f.Add("true", "round_robin", "$host\u2029", "\u009bcookie", "\xff", "X-\ufeffCanary", uint32(7))
	f.Fuzz(func(t *testing.T, a, b, c, d, e, g string, prefixes uint32) {
		values := []string{a, b, c, d, e, g}
		annotate := func(shift int) ingressOption {
			return func(ing *networkingv1.Ingress) {
				ing.Annotations = map[string]string{}
				for i, key := range policyAnnotations {
					prefix := annotationPrefixes[(prefixes>>uint((i+shift)%32))&1]
					ing.Annotations[prefix+key] = values[(i+shift)%len(values)]
				}
			}
		}
		main := newIngress("default", "main", annotate(0), rule("a.test", httpPath(implType, "/", backend("web", 80))))
		main.Annotations["restysync.io/canary"] = "false"
		canary := newIngress("default", "canary", createdAt(1), annotate(3), rule("a.test", httpPath(implType, "/", backend("web", "http"))))
		canary.Annotations["restysync.io/canary"] = "true"
		m, problems := Build(snapshotOf(main, canary))
		// A value with a character no value may hold is named by a Problem.
		for _, ing := range []*networkingv1.Ingress{main, canary} {
			for key, value := range ing.Annotations {
				if chars.CheckText(value) != nil && !slices.ContainsFunc(problems, func(p Problem) bool {
					return p.Name == ing.Name && strings.HasPrefix(p.Reason, "annotation "+key+" ")
				}) {
					t.Fatalf("%s: annotation %s %q: no problem names it", ing.Name, key, value)
				}
			}
		}
		for _, p := range problems {
			if p.Kind != "Ingress" || (p.Name != "main" && p.Name != "canary") || p.Reason == "" {
				t.Fatalf("problem names no Ingress: %+v", p)
			}
			if len(p.Reason) > 4096 {
				t.Fatalf("problem reason of %d bytes", len(p.Reason))
			}
		}
		for _, backend := range m.Backends.Slice() {
			raw, err := json.Marshal(backend.PolicyValue())
			if err != nil {
				t.Fatal(err)
			}
			var fields map[string]any
			if err := json.Unmarshal(raw, &fields); err != nil {
				t.Fatal(err)
			}
			for field, re := range luaAccepts {
				if v, ok := fields[field].(string); ok && (!re.MatchString(v) || len(v) > 512) {
					t.Fatalf("backend %s: policy field %s %q is one Lua refuses", backend.Name, field, v)
				}
			}
			p := backend.PolicyValue()
			if p.Algorithm == AlgorithmHash && p.HashBy == "" {
				t.Fatalf("backend %s: hash without hash_by", backend.Name)
			}
			// policy.lua: hash_subset 1..1000 and only with hash;
			// affinity_mode balanced or persistent.
			if p.HashSubset != 0 && (p.Algorithm != AlgorithmHash || p.HashSubset < 1 || p.HashSubset > MaxHashSubset) {
				t.Fatalf("backend %s: hash_subset %d with algorithm %q", backend.Name, p.HashSubset, p.Algorithm)
			}
			if p.AffinityMode != "" && p.AffinityMode != AffinityPersistent {
				t.Fatalf("backend %s: affinity_mode %q", backend.Name, p.AffinityMode)
			}
			if p.CanaryAffinityLegacy && p.Canary == "" {
				t.Fatalf("backend %s: canary_affinity_legacy without a canary", backend.Name)
			}
			if p.CanaryWeight > max(p.CanaryWeightTotal, 100) {
				t.Fatalf("backend %s: canary weight %d over total %d", backend.Name, p.CanaryWeight, p.CanaryWeightTotal)
			}
			if strings.Contains(backend.Name, "\n") {
				t.Fatalf("backend name %q", backend.Name)
			}
		}
	})
}
