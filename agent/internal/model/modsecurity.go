package model

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
)

// The annotations of this family that other files name (model/annotationtable.go has their rows).
const (
	KeyEnableModSecurity = "enable-modsecurity"
)

// ModSecurity, the web application firewall ingress-nginx bundles
// (annotations enable-modsecurity, enable-owasp-core-rules,
// modsecurity-transaction-id; ConfigMap keys enable-modsecurity and
// enable-owasp-modsecurity-crs). nginx runs it only where its module is
// loaded (Debian's libnginx-mod-http-modsecurity; OpenResty's image has
// none), which the agent's flags say (ModSecurityGlobal.Loaded).
//
// A WAF that silently does nothing is worse than none: it is trusted. So
// a location asked to run ModSecurity that cannot (no module, or an
// enable-modsecurity or enable-owasp-core-rules value that does not read)
// fails closed, as an unusable access-control setting does: every request
// answers 503 and a Problem says why (AccessSettings.Denied).
//
// ModSecurity's own rules (modsecurity-snippet) are refused, as every
// snippet is: restysync cannot check what a rule does (SecRuleEngine Off
// turns the WAF off, @pmFromFile reads files, ctl: rewrites the engine's
// settings per request).

// ModSecurity is the web application firewall of one Location. The zero
// value runs none.
type ModSecurity struct {
	// Enabled runs ModSecurity on the location's requests, with the
	// agent's recommended rules file (annotation enable-modsecurity, or
	// the ConfigMap's enable-modsecurity unless the annotation says
	// "false"; default false).
	Enabled bool
	// CoreRules adds the OWASP Core Rule Set to the location's rules
	// (annotation enable-owasp-core-rules, or the ConfigMap's
	// enable-owasp-modsecurity-crs; default false). Only with Enabled.
	CoreRules bool
	// TransactionID is the id ModSecurity logs the request's transaction
	// under (annotation modsecurity-transaction-id; default "": one
	// ModSecurity makes). Literal text, and the variables of
	// transactionIDVariables written "${name}" with nginx's names (the
	// Ingress's namespace and name stand for $namespace and
	// $ingress_name). Only with Enabled.
	TransactionID string
}

// ModSecurityGlobal is what Build needs to know of the agent's
// ModSecurity (Snapshot.ModSecurity). The zero value has no module.
type ModSecurityGlobal struct {
	// Loaded says nginx has the ModSecurity module: the agent loads it
	// (--load-module .../ngx_http_modsecurity_module.so) or it is built in
	// (--modsecurity-built-in).
	Loaded bool
	// Enabled runs ModSecurity on every location whose Ingress does not
	// set enable-modsecurity "false" (ConfigMap enable-modsecurity).
	Enabled bool
	// CoreRules adds the OWASP Core Rule Set wherever ModSecurity runs
	// (ConfigMap enable-owasp-modsecurity-crs).
	CoreRules bool
}

// modSecurityMissing says why nginx cannot run ModSecurity, and how to
// give it the module.
const modSecurityMissing = "nginx has no ModSecurity module: the agent runs without --load-module of " +
	"ngx_http_modsecurity_module.so and without --modsecurity-built-in (Debian: install libnginx-mod-http-modsecurity " +
	"and modsecurity-crs, and add --load-module /usr/share/nginx/modules/ngx_http_modsecurity_module.so; " +
	"the openresty/openresty image the Helm chart runs has no ModSecurity module)"

// maxTransactionID bounds modsecurity-transaction-id.
const maxTransactionID = 256

// transactionIDChars are the characters ingress-nginx lets through in
// modsecurity-transaction-id (its NGINXVariable check).
var transactionIDChars = regexp.MustCompile(`^[A-Za-z0-9_${}-]*$`)

// transactionIDVariables are the nginx variables a transaction id may
// use, by the name a user writes, with the variable nginx.conf uses.
// $request_id is nginx's own per request (unique, as a transaction id
// should be); $req_id is ingress-nginx's name for the X-Request-ID sent to
// the backend (the client's, else nginx's). $server_name is the Ingress's
// host in ingress-nginx, whose servers are per host; here every host is
// served by one server, so it stands for $host.
var transactionIDVariables = map[string]string{
	"request_id":          "request_id",
	"req_id":              "restysync_request_id",
	"host":                "host",
	"server_name":         "host",
	"remote_addr":         "remote_addr",
	"remote_port":         "remote_port",
	"server_port":         "server_port",
	"connection":          "connection",
	"connection_requests": "connection_requests",
	"msec":                "msec",
	"pid":                 "pid",
	"hostname":            "hostname",
}

// readModSecurity reads the ModSecurity annotations of ing against the
// agent's (b.modSecurity). It returns the settings, and why the location
// must fail closed ("" when it need not).
func (b *builder) readModSecurity(ing *networkingv1.Ingress) (ModSecurity, string) {
	g := b.modSecurity
	var m ModSecurity
	const closed = "; the Ingress's paths answer 503 until it is fixed (a WAF that cannot run as asked fails closed)"

	enabled := g.Enabled
	enableValue, enableKey, fromAnnotation := lookupAnnotation(ing, KeyEnableModSecurity)
	if fromAnnotation {
		if reason := checkTrueFalse(enableValue); reason != "" {
			b.annotationProblem(ing, enableKey, enableValue, reason+closed)
			return ModSecurity{}, enableKey + " is invalid"
		}
		enabled, _ = strconv.ParseBool(enableValue)
	}
	coreRules := g.CoreRules
	value, coreKey, coreSet := lookupAnnotation(ing, "enable-owasp-core-rules")
	if coreSet {
		v, _ := strconv.ParseBool(value)
		reason := checkTrueFalse(value)
		switch {
		case reason != "" && enabled:
			b.annotationProblem(ing, coreKey, value, reason+closed)
			return ModSecurity{}, coreKey + " is invalid"
		case reason != "":
			b.annotationProblem(ing, coreKey, value, reason+"; ignored: ModSecurity does not run for this Ingress")
		default:
			// "false" cannot take away the ConfigMap's rule set, as in
			// ingress-nginx, which loads that one for every location.
			coreRules = coreRules || v
		}
	}
	transactionID := b.readTransactionID(ing)
	if !enabled {
		// As ingress-nginx: the rule set and the transaction id mean
		// something only where ModSecurity runs.
		return ModSecurity{}, ""
	}
	if !g.Loaded {
		if fromAnnotation {
			b.annotationProblem(ing, enableKey, enableValue, modSecurityMissing+closed)
			return ModSecurity{}, "ModSecurity is not loaded"
		}
		b.ingressProblem(ing, "ModSecurity runs for every Ingress (ConfigMap key enable-modsecurity), but "+modSecurityMissing+
			`; the Ingress's paths answer 503 until the module is loaded or the Ingress sets enable-modsecurity "false"`)
		return ModSecurity{}, "ModSecurity is not loaded"
	}
	m.Enabled, m.CoreRules, m.TransactionID = true, coreRules, transactionID
	return m, ""
}

// readTransactionID reads modsecurity-transaction-id: "" when absent or
// unusable (a Problem; ModSecurity then makes its own ids).
func (b *builder) readTransactionID(ing *networkingv1.Ingress) string {
	value, key, ok := lookupAnnotation(ing, "modsecurity-transaction-id")
	if !ok || value == "" {
		return ""
	}
	id, reason := parseTransactionID(value, ing.Namespace, ing.Name)
	if reason != "" {
		b.annotationProblem(ing, key, value, reason+"; ModSecurity makes its own transaction ids")
	}
	return id
}

// parseTransactionID checks a modsecurity-transaction-id value of the
// Ingress namespace/name: letters, digits, "-", "_" and variables ($name
// or ${name}): those of transactionIDVariables, written "${name}" with
// nginx's names, and ingress-nginx's $namespace and $ingress_name, written
// as the Ingress's (they are constants of its locations there). It returns
// the value so written, or why it cannot be used.
func parseTransactionID(value, namespace, name string) (string, string) {
	if len(value) > maxTransactionID {
		return "", fmt.Sprintf("is %d bytes; at most %d are allowed", len(value), maxTransactionID)
	}
	if !transactionIDChars.MatchString(value) {
		return "", `may hold only letters, digits, "-", "_" and nginx variables ($request_id, ${host})`
	}
	var out strings.Builder
	for i := 0; i < len(value); i++ {
		c := value[i]
		if c == '{' || c == '}' {
			return "", fmt.Sprintf("has a %q outside ${name}", c)
		}
		if c != '$' {
			out.WriteByte(c)
			continue
		}
		var v string
		if i+1 < len(value) && value[i+1] == '{' {
			end := strings.IndexByte(value[i+2:], '}')
			if end < 0 {
				return "", "has an unclosed ${"
			}
			v, i = value[i+2:i+2+end], i+2+end
		} else {
			j := i + 1
			for j < len(value) && (value[j] >= 'a' && value[j] <= 'z' || value[j] >= '0' && value[j] <= '9' || value[j] == '_') {
				j++
			}
			v, i = value[i+1:j], j-1
		}
		switch v {
		case "namespace":
			out.WriteString(namespace)
		case "ingress_name":
			out.WriteString(name)
		default:
			nginx, ok := transactionIDVariables[v]
			if !ok {
				return "", fmt.Sprintf("uses the variable $%s, which is not allowed here (allowed: %s)", clip(v), allowedTransactionIDVariables)
			}
			out.WriteString("${" + nginx + "}")
		}
	}
	return out.String(), ""
}

// allowedTransactionIDVariables lists the variables a transaction id may
// use, for Problems: transactionIDVariables and the Ingress's own.
const allowedTransactionIDVariables = "$request_id, $req_id, $host, $server_name, $remote_addr, $remote_port, " +
	"$server_port, $connection, $connection_requests, $msec, $pid, $hostname, $namespace, $ingress_name"

// checkTrueFalse checks a "true" or "false" value, as enable-modsecurity
// and enable-owasp-core-rules take it.
func checkTrueFalse(value string) string {
	if _, err := strconv.ParseBool(value); err != nil {
		return `is not "true" or "false"`
	}
	return ""
}

// checkTransactionID checks modsecurity-transaction-id's shape, for an
// Ingress named example in namespace default.
func checkTransactionID(value string) string {
	_, reason := parseTransactionID(value, "default", "example")
	return reason
}
