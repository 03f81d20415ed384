package model

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// wafOf builds one Ingress "default/app" with the annotations (keys
// without prefix, set under prefix) and the agent's ModSecurity g, and
// returns its location's access settings and the problems.
func wafOf(t *testing.T, prefix string, g ModSecurityGlobal, annotations map[string]string) (AccessSettings, []Problem) {
	t.Helper()
	opts := []ingressOption{rule("app.test", prefix2("/", "web", 80))}
	for k, v := range annotations {
		opts = append(opts, annotation(prefix+k, v))
	}
	s := snapshotOf(newIngress("default", "app", opts...))
	s.ModSecurity = g
	m, problems := Build(s)
	if m.Servers.Len() != 1 || len(m.Servers.At(0).Locations) != 1 {
		t.Fatalf("want one server with one location, got %s", dump(m))
	}
	return m.Servers.At(0).Locations[0].AccessSettings(), problems
}

func TestModSecurity(t *testing.T) {
	loaded := ModSecurityGlobal{Loaded: true}
	everywhere := ModSecurityGlobal{Loaded: true, Enabled: true}
	tests := []struct {
		name        string
		global      ModSecurityGlobal
		annotations map[string]string
		want        AccessSettings
		problem     string
	}{
		{name: "none", global: loaded},
		{name: "enabled", global: loaded, annotations: map[string]string{"enable-modsecurity": "true"},
			want: AccessSettings{WAF: ModSecurity{Enabled: true}}},
		{name: "with the core rule set and a transaction id", global: loaded,
			annotations: map[string]string{"enable-modsecurity": "true", "enable-owasp-core-rules": "true",
				"modsecurity-transaction-id": "$request_id-${host}_$req_id"},
			want: AccessSettings{WAF: ModSecurity{Enabled: true, CoreRules: true,
				TransactionID: "${request_id}-${host}_${restysync_request_id}"}}},
		{name: "the Ingress's namespace and name are constants", global: loaded,
			annotations: map[string]string{"enable-modsecurity": "true", "modsecurity-transaction-id": "$namespace-${ingress_name}-$request_id"},
			want:        AccessSettings{WAF: ModSecurity{Enabled: true, TransactionID: "default-app-${request_id}"}}},
		{name: "server_name is the host", global: loaded,
			annotations: map[string]string{"enable-modsecurity": "true", "modsecurity-transaction-id": "$server_name-$request_id"},
			want:        AccessSettings{WAF: ModSecurity{Enabled: true, TransactionID: "${host}-${request_id}"}}},
		{name: "the core rule set alone does nothing, as in ingress-nginx", global: loaded,
			annotations: map[string]string{"enable-owasp-core-rules": "true", "modsecurity-transaction-id": "$request_id"}},
		{name: "the ConfigMap turns it on for every Ingress", global: everywhere,
			want: AccessSettings{WAF: ModSecurity{Enabled: true}}},
		{name: "an Ingress turns the ConfigMap's off", global: everywhere,
			annotations: map[string]string{"enable-modsecurity": "false", "enable-owasp-core-rules": "true"}},
		{name: "the ConfigMap's rule set", global: ModSecurityGlobal{Loaded: true, Enabled: true, CoreRules: true},
			want: AccessSettings{WAF: ModSecurity{Enabled: true, CoreRules: true}}},
		{name: "false cannot take away the ConfigMap's rule set", global: ModSecurityGlobal{Loaded: true, CoreRules: true},
			annotations: map[string]string{"enable-modsecurity": "true", "enable-owasp-core-rules": "false"},
			want:        AccessSettings{WAF: ModSecurity{Enabled: true, CoreRules: true}}},
		{name: "no module fails closed", annotations: map[string]string{"enable-modsecurity": "true"},
			want:    AccessSettings{Denied: "ModSecurity is not loaded"},
			problem: "enable-modsecurity \"true\": nginx has no ModSecurity module: the agent runs without --load-module of ngx_http_modsecurity_module.so"},
		{name: "no module with the ConfigMap's fails closed", global: ModSecurityGlobal{Enabled: true},
			want:    AccessSettings{Denied: "ModSecurity is not loaded"},
			problem: "ModSecurity runs for every Ingress (ConfigMap key enable-modsecurity), but nginx has no ModSecurity module"},
		{name: "no module, off: served", annotations: map[string]string{"enable-modsecurity": "false"}},
		{name: "a bad enable-modsecurity fails closed", global: loaded,
			annotations: map[string]string{"enable-modsecurity": "yes"},
			want:        AccessSettings{Denied: "%senable-modsecurity is invalid"},
			problem:     `enable-modsecurity "yes": is not "true" or "false"; the Ingress's paths answer 503 until it is fixed`},
		{name: "a bad enable-owasp-core-rules fails closed where ModSecurity runs", global: loaded,
			annotations: map[string]string{"enable-modsecurity": "true", "enable-owasp-core-rules": "on"},
			want:        AccessSettings{Denied: "%senable-owasp-core-rules is invalid"},
			problem:     `enable-owasp-core-rules "on": is not "true" or "false"; the Ingress's paths answer 503`},
		{name: "a bad enable-owasp-core-rules without ModSecurity is ignored", global: loaded,
			annotations: map[string]string{"enable-owasp-core-rules": "on"},
			problem:     `is not "true" or "false"; ignored: ModSecurity does not run for this Ingress`},
		{name: "an unknown variable in the transaction id", global: loaded,
			annotations: map[string]string{"enable-modsecurity": "true", "modsecurity-transaction-id": "$http_x_id"},
			want:        AccessSettings{WAF: ModSecurity{Enabled: true}},
			problem:     "uses the variable $http_x_id, which is not allowed here (allowed: $request_id"},
		{name: "quotes in the transaction id", global: loaded,
			annotations: map[string]string{"enable-modsecurity": "true", "modsecurity-transaction-id": `id";modsecurity off;#`},
			want:        AccessSettings{WAF: ModSecurity{Enabled: true}},
			problem:     `may hold only letters, digits, "-", "_" and nginx variables`},
		{name: "a brace alone in the transaction id", global: loaded,
			annotations: map[string]string{"enable-modsecurity": "true", "modsecurity-transaction-id": "a}b"},
			want:        AccessSettings{WAF: ModSecurity{Enabled: true}},
			problem:     `has a '}' outside ${name}`},
		{name: "an empty transaction id is none", global: loaded,
			annotations: map[string]string{"enable-modsecurity": "true", "modsecurity-transaction-id": ""},
			want:        AccessSettings{WAF: ModSecurity{Enabled: true}}},
	}
	for _, prefix := range bothPrefixes {
		for _, tt := range tests {
			t.Run(prefix+tt.name, func(t *testing.T) {
				got, problems := wafOf(t, prefix, tt.global, tt.annotations)
				want := tt.want
				want.Denied = strings.ReplaceAll(want.Denied, "%s", prefix)
				if got != want {
					t.Errorf("access = %+v, want %+v", got, want)
				}
				checkProblem(t, problems, tt.problem)
			})
		}
	}
}

// A location that runs ModSecurity is not plain: it needs a profile.
func TestModSecurityNeedsProfile(t *testing.T) {
	l := Location{Path: "/", PathType: PathPrefix, Access: &AccessSettings{WAF: ModSecurity{Enabled: true}}}
	if l.Plain() {
		t.Error("a location with ModSecurity is plain")
	}
}

func TestModSecuritySnippetRefused(t *testing.T) {
	for _, prefix := range bothPrefixes {
		key := prefix + "modsecurity-snippet"
		if got := AnnotationStatus(key); got != AnnotationRefused {
			t.Errorf("AnnotationStatus(%s) = %q, want refused", key, got)
		}
		_, problems := wafOf(t, prefix, ModSecurityGlobal{Loaded: true}, map[string]string{"modsecurity-snippet": "SecRuleEngine On"})
		checkProblem(t, problems, "annotation "+key+": ModSecurity rules are refused by design")
		for _, name := range []string{"enable-modsecurity", "enable-owasp-core-rules", "modsecurity-transaction-id"} {
			if got := AnnotationStatus(prefix + name); got != AnnotationSupported {
				t.Errorf("AnnotationStatus(%s) = %q, want supported", prefix+name, got)
			}
		}
	}
}

// allowedTransactionIDVariables, which Problems quote, lists exactly the
// variables transactionIDVariables allows.
func TestTransactionIDVariablesListed(t *testing.T) {
	var listed []string
	for _, v := range strings.Split(allowedTransactionIDVariables, ", ") {
		listed = append(listed, strings.TrimPrefix(v, "$"))
	}
	slices.Sort(listed)
	want := slices.Sorted(slices.Values(append(slices.Collect(maps.Keys(transactionIDVariables)), "namespace", "ingress_name")))
	if !slices.Equal(listed, want) {
		t.Errorf("allowedTransactionIDVariables lists %v, want %v", listed, want)
	}
}

// canonicalTransactionID is what parseTransactionID may return: literal
// letters, digits, "-" and "_", and ${name} of nginx's variables.
var canonicalTransactionID = regexp.MustCompile(`^([A-Za-z0-9_.-]|\$\{[a-z_]+\})*$`)

// FuzzTransactionID: whatever a user writes, a transaction id the model
// accepts holds only literal characters nginx reads as they are and
// variables of the allowlist, and is not empty.
func FuzzTransactionID(f *testing.F) {
	for _, seed := range []string{"$request_id", "${host}-$req_id", "$namespace-${ingress_name}-$request_id", "$namespacex", "a}b", `x";`, "$", "${", "${request_id", "$request_idx", "$$", "a-b_c"} {
		f.Add(seed)
	}
	allowed := map[string]bool{}
	for _, v := range transactionIDVariables {
		allowed[v] = true
	}
	variable := regexp.MustCompile(`\$\{([a-z_]+)\}`)
	f.Fuzz(func(t *testing.T, value string) {
		id, reason := parseTransactionID(value, "team-a", "app.v1")
		if reason != "" {
			if id != "" {
				t.Errorf("parseTransactionID(%q) = %q with reason %q", value, id, reason)
			}
			return
		}
		if value != "" && id == "" || !canonicalTransactionID.MatchString(id) || len(id) > 12*maxTransactionID {
			t.Fatalf("parseTransactionID(%q) = %q", value, id)
		}
		for _, m := range variable.FindAllStringSubmatch(id, -1) {
			if !allowed[m[1]] {
				t.Errorf("parseTransactionID(%q) = %q: variable %s is not allowed", value, id, m[1])
			}
		}
	})
}
