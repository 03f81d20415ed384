package model

import (
	"encoding/json"
	"strings"
	"testing"
)

// policyOf builds one Ingress with annotations (under ingress-nginx's
// prefix) on a.test/ → web:80 and returns the Policy of its backend and
// the Problems.
func policyOf(t *testing.T, annotations map[string]string) (Policy, []Problem) {
	t.Helper()
	opts := []ingressOption{rule("a.test", prefix("/", "web", 80))}
	for k, v := range annotations {
		opts = append(opts, annotation("nginx.ingress.kubernetes.io/"+k, v))
	}
	m, problems := Build(snapshotOf(newIngress("default", "web", opts...)))
	if m.Servers.Len() != 1 || len(m.Servers.At(0).Locations) != 1 {
		t.Fatalf("the Ingress is not served: %s", dump(m.Servers))
	}
	name := m.Servers.At(0).Locations[0].Backend
	for _, b := range m.Backends.Slice() {
		if b.Name == name {
			return b.PolicyValue(), problems
		}
	}
	t.Fatalf("no backend %s in %s", name, dump(m.Backends))
	return Policy{}, nil
}

// The balancing keys, good, bad and hostile values: a bad one is a Problem
// naming the key, and that setting keeps its default.
func TestBalancingKeys(t *testing.T) {
	hash := map[string]string{"upstream-hash-by": "$arg_predictorid"}
	sticky := map[string]string{"affinity": "cookie"}
	with := func(base map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	cookie := func(p Policy) Policy {
		p.Affinity, p.CookieName, p.CookiePath = "cookie", "INGRESSCOOKIE", "/"
		return p
	}
	hashed := func(subset int) Policy {
		return Policy{Algorithm: AlgorithmHash, HashBy: "arg_predictorid", HashSubset: subset}
	}
	tests := []struct {
		name        string
		annotations map[string]string
		want        Policy
		problem     string // a fragment of the one Problem, "" for none
	}{
		// upstream-hash-by-subset and -subset-size (ingress-nginx's
		// chashsubset example: size 3).
		{"subset of 3", with(hash, "upstream-hash-by-subset", "true", "upstream-hash-by-subset-size", "3"), hashed(3), ""},
		{"subset, default size", with(hash, "upstream-hash-by-subset", "true"), hashed(DefaultHashSubset), ""},
		{"subset, size 0 is the default", with(hash, "upstream-hash-by-subset", "true", "upstream-hash-by-subset-size", "0"), hashed(DefaultHashSubset), ""},
		{"subset of 1000", with(hash, "upstream-hash-by-subset", "true", "upstream-hash-by-subset-size", "1000"), hashed(1000), ""},
		{"subset false", with(hash, "upstream-hash-by-subset", "false", "upstream-hash-by-subset-size", "5"), hashed(0), ""},
		{"size without subset", with(hash, "upstream-hash-by-subset-size", "5"), hashed(0), ""},
		{"subset without upstream-hash-by", map[string]string{"upstream-hash-by-subset": "true"}, Policy{}, ""},
		{"subset not a boolean", with(hash, "upstream-hash-by-subset", "yes"), hashed(0),
			`annotation nginx.ingress.kubernetes.io/upstream-hash-by-subset "yes": is not true or false; false is used`},
		{"subset size negative", with(hash, "upstream-hash-by-subset", "true", "upstream-hash-by-subset-size", "-1"), hashed(DefaultHashSubset),
			`annotation nginx.ingress.kubernetes.io/upstream-hash-by-subset-size "-1": is not an integer from 0 to 1000`},
		{"subset size too large", with(hash, "upstream-hash-by-subset", "true", "upstream-hash-by-subset-size", "1001"), hashed(DefaultHashSubset),
			`upstream-hash-by-subset-size "1001"`},
		{"subset size hostile", with(hash, "upstream-hash-by-subset", "true", "upstream-hash-by-subset-size", "3\n}; evil"), hashed(DefaultHashSubset),
			`upstream-hash-by-subset-size "3\n}; evil"`},
		{"subset with a bad upstream-hash-by", map[string]string{"upstream-hash-by": "request_uri", "upstream-hash-by-subset": "true"}, Policy{},
			"consistent hashing is off"},

		// affinity-mode
		{"affinity, balanced by default", sticky, cookie(Policy{}), ""},
		{"affinity-mode balanced", with(sticky, "affinity-mode", "balanced"), cookie(Policy{}), ""},
		{"affinity-mode persistent", with(sticky, "affinity-mode", "persistent"), cookie(Policy{AffinityMode: AffinityPersistent}), ""},
		{"affinity-mode without affinity", map[string]string{"affinity-mode": "persistent"}, Policy{}, ""},
		{"affinity-mode in capitals", with(sticky, "affinity-mode", "Persistent"), cookie(Policy{}),
			`annotation nginx.ingress.kubernetes.io/affinity-mode "Persistent": is not "balanced" or "persistent"; balanced is used`},
		{"affinity-mode hostile", with(sticky, "affinity-mode", "persistent;\x00"), cookie(Policy{}), `affinity-mode "persistent;\x00"`},

		// session-cookie-conditional-samesite-none
		{"conditional SameSite=None", with(sticky, "session-cookie-samesite", "None", "session-cookie-conditional-samesite-none", "true"),
			cookie(Policy{CookieSameSite: "None", CookieConditionalSameSiteNone: true}), ""},
		{"conditional, SameSite Lax: nothing to leave out", with(sticky, "session-cookie-samesite", "Lax", "session-cookie-conditional-samesite-none", "true"),
			cookie(Policy{CookieSameSite: "Lax"}), ""},
		{"conditional false", with(sticky, "session-cookie-samesite", "None", "session-cookie-conditional-samesite-none", "false"),
			cookie(Policy{CookieSameSite: "None"}), ""},
		{"conditional not a boolean", with(sticky, "session-cookie-samesite", "None", "session-cookie-conditional-samesite-none", "on"),
			cookie(Policy{CookieSameSite: "None"}),
			`annotation nginx.ingress.kubernetes.io/session-cookie-conditional-samesite-none "on": is not true or false; false is used`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, problems := policyOf(t, tc.annotations)
			if got != tc.want {
				t.Errorf("policy\n got %+v\nwant %+v", got, tc.want)
			}
			switch {
			case tc.problem == "" && len(problems) != 0:
				t.Errorf("problems %v, want none", problems)
			case tc.problem != "" && (len(problems) != 1 || !strings.Contains(problems[0].Reason, tc.problem)):
				t.Errorf("problems %v, want one with %q", problems, tc.problem)
			}
			// The Policy travels to Lua as JSON: the new fields under
			// the names policy.lua checks, and nothing at its default.
			raw, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			var back Policy
			if err := json.Unmarshal(raw, &back); err != nil || back != got {
				t.Errorf("JSON %s does not round-trip: %+v %v", raw, back, err)
			}
			for field, set := range map[string]bool{
				`"hash_subset"`: got.HashSubset != 0, `"affinity_mode"`: got.AffinityMode != "",
				`"cookie_conditional_samesite_none"`: got.CookieConditionalSameSiteNone,
			} {
				if strings.Contains(string(raw), field) != set {
					t.Errorf("JSON %s: field %s present %v, want %v", raw, field, !set, set)
				}
			}
		})
	}
}

// canaryBackends builds a primary and a canary Ingress on a.test/ and
// returns the split backend (the primary location's) and the canary's.
func canaryBackends(t *testing.T, primary, canary map[string]string) (split, canaryBackend Backend, problems []Problem) {
	t.Helper()
	opts := func(annotations map[string]string) []ingressOption {
		var out []ingressOption
		for k, v := range annotations {
			out = append(out, annotation("nginx.ingress.kubernetes.io/"+k, v))
		}
		return out
	}
	main := newIngress("default", "main", append(opts(primary), rule("a.test", prefix("/", "web", 80)))...)
	canaryOpts := append(opts(canary), createdAt(1), annotation("nginx.ingress.kubernetes.io/canary", "true"),
		rule("a.test", prefix("/", "web", "http")))
	m, problems := Build(snapshotOf(main, newIngress("default", "main-canary", canaryOpts...)))
	byName := map[string]Backend{}
	for _, b := range m.Backends.Slice() {
		byName[b.Name] = b
	}
	if m.Servers.Len() != 1 || len(m.Servers.At(0).Locations) != 1 {
		t.Fatalf("servers %s", dump(m.Servers))
	}
	split = byName[m.Servers.At(0).Locations[0].Backend]
	canaryBackend, ok := byName[split.PolicyValue().Canary]
	if !ok {
		t.Fatalf("no canary backend %q among %s", split.PolicyValue().Canary, dump(m.Backends))
	}
	return split, canaryBackend, problems
}

// affinity-canary-behavior: sticky (default) gives the canary's backend the
// primary's session affinity, as ingress-nginx copies it; legacy keeps the
// canary Ingress's own, and tells Lua to ignore the cookie in the split.
func TestCanaryAffinityBehavior(t *testing.T) {
	primaryAffinity := map[string]string{"affinity": "cookie", "session-cookie-name": "route", "affinity-mode": "persistent",
		"session-cookie-samesite": "None", "session-cookie-conditional-samesite-none": "true", "session-cookie-max-age": "60"}
	wantAffinity := Policy{Affinity: "cookie", AffinityMode: AffinityPersistent, CookieName: "route", CookiePath: "/",
		CookieSameSite: "None", CookieConditionalSameSiteNone: true, CookieMaxAge: 60}

	t.Run("sticky by default: the canary carries the primary's affinity", func(t *testing.T) {
		split, canary, problems := canaryBackends(t, primaryAffinity, map[string]string{"canary-weight": "20", "load-balance": "ewma"})
		if len(problems) != 0 {
			t.Fatalf("problems: %v", problems)
		}
		if split.Name != "default/web:80@default/main+default/main-canary" || split.PolicyValue().CanaryAffinityLegacy {
			t.Errorf("split %s %+v", split.Name, split.PolicyValue())
		}
		want := wantAffinity
		want.Algorithm = AlgorithmEWMA // the canary Ingress's own load-balance stays
		if canary.Name != "default/web:http@default/main-canary+default/main" || canary.PolicyValue() != want {
			t.Errorf("canary backend %s %+v, want default/web:http@default/main-canary+default/main %+v", canary.Name, canary.PolicyValue(), want)
		}
	})
	t.Run("sticky, written out", func(t *testing.T) {
		_, canary, problems := canaryBackends(t, primaryAffinity, map[string]string{"affinity-canary-behavior": "sticky"})
		if len(problems) != 0 || canary.PolicyValue() != wantAffinity {
			t.Errorf("canary backend %s %+v, problems %v", canary.Name, canary.PolicyValue(), problems)
		}
	})
	t.Run("sticky replaces the canary Ingress's own affinity", func(t *testing.T) {
		_, canary, _ := canaryBackends(t, primaryAffinity, map[string]string{"affinity": "cookie", "session-cookie-name": "mine"})
		if canary.PolicyValue() != wantAffinity {
			t.Errorf("canary backend %+v, want the primary's affinity %+v", canary.PolicyValue(), wantAffinity)
		}
		// A primary without affinity: none on the canary either, and the
		// canary backend is the Service's own.
		_, canary, _ = canaryBackends(t, nil, map[string]string{"affinity": "cookie"})
		if canary.Name != "default/web:http" || canary.PolicyValue() != (Policy{}) {
			t.Errorf("canary backend %s %+v, want default/web:http with no policy", canary.Name, canary.PolicyValue())
		}
	})
	t.Run("legacy: the canary's own affinity, and the split says so", func(t *testing.T) {
		split, canary, problems := canaryBackends(t, primaryAffinity, map[string]string{"affinity-canary-behavior": "legacy"})
		if len(problems) != 0 {
			t.Fatalf("problems: %v", problems)
		}
		if !split.PolicyValue().CanaryAffinityLegacy {
			t.Errorf("split %+v: want canary_affinity_legacy", split.PolicyValue())
		}
		if canary.Name != "default/web:http" || canary.PolicyValue() != (Policy{}) {
			t.Errorf("canary backend %s %+v, want the plain Service backend", canary.Name, canary.PolicyValue())
		}
		_, canary, _ = canaryBackends(t, primaryAffinity, map[string]string{"affinity-canary-behavior": "legacy", "affinity": "cookie", "session-cookie-name": "mine"})
		if canary.Name != "default/web:http@default/main-canary" || canary.PolicyValue().CookieName != "mine" {
			t.Errorf("canary backend %s %+v, want its own affinity", canary.Name, canary.PolicyValue())
		}
	})
	t.Run("a bad value is a Problem and sticky is used", func(t *testing.T) {
		for _, value := range []string{"Legacy", "none", "sticky\n", strings.Repeat("l", 70)} {
			split, canary, problems := canaryBackends(t, primaryAffinity, map[string]string{"affinity-canary-behavior": value})
			if split.PolicyValue().CanaryAffinityLegacy || canary.PolicyValue() != wantAffinity {
				t.Errorf("%q: split %+v, canary %+v: want sticky", value, split.PolicyValue(), canary.PolicyValue())
			}
			if len(problems) != 1 || !strings.Contains(problems[0].Reason, "annotation nginx.ingress.kubernetes.io/affinity-canary-behavior ") ||
				!strings.Contains(problems[0].Reason, `is not "sticky" or "legacy"; sticky is used`) || problems[0].Name != "main-canary" {
				t.Errorf("%q: problems %v", value, problems)
			}
		}
	})
}

// One canary Ingress splitting the paths of two Ingresses with different
// affinity gets one canary backend for each: their policies never clash.
func TestCanaryStickyBackendPerPrimary(t *testing.T) {
	one := newIngress("default", "one", annotation("nginx.ingress.kubernetes.io/affinity", "cookie"),
		annotation("nginx.ingress.kubernetes.io/session-cookie-name", "one"), rule("a.test", prefix("/", "web", 80)))
	two := newIngress("default", "two", annotation("nginx.ingress.kubernetes.io/affinity", "cookie"),
		annotation("nginx.ingress.kubernetes.io/session-cookie-name", "two"), rule("b.test", prefix("/", "web", 80)))
	canary := newIngress("default", "canary", createdAt(1), annotation("nginx.ingress.kubernetes.io/canary", "true"),
		rule("a.test", prefix("/", "web", "http")), rule("b.test", prefix("/", "web", "http")))
	m, problems := Build(snapshotOf(one, two, canary))
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	cookies := map[string]string{}
	for _, b := range m.Backends.Slice() {
		if strings.HasPrefix(b.Name, "default/web:http@") {
			cookies[b.Name] = b.PolicyValue().CookieName
		}
	}
	want := map[string]string{"default/web:http@default/canary+default/one": "one", "default/web:http@default/canary+default/two": "two"}
	if len(cookies) != 2 || cookies["default/web:http@default/canary+default/one"] != "one" || cookies["default/web:http@default/canary+default/two"] != "two" {
		t.Errorf("canary backends %v, want %v", cookies, want)
	}
}
