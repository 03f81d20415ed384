package model

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
)

// FastCGI backends (backend-protocol: FCGI), as ingress-nginx has them:
// nginx talks FastCGI to the endpoints (fastcgi_pass through the Lua
// balancer), with nginx's standard parameters, fastcgi_index from
// fastcgi-index and the fastcgi_param pairs of the ConfigMap
// fastcgi-params-configmap names, in the Ingress's own namespace.
//
// Names and values are held to ingress-nginx's characters (names
// [A-Za-z0-9._-], values [A-Za-z0-9._/-] and variables), and a value may
// use only the variables of fastCGIVariables: a value can never end its
// quotes in nginx.conf. A params ConfigMap that is missing, in another
// namespace or holds an entry that cannot be used fails the Ingress closed
// (503), as ingress-nginx denies the location: the parameters say which
// script runs.

// FastCGI are the FastCGI settings of one location; the zero value is
// nginx's standard parameters alone. Strings are canonical, so that
// Location stays comparable.
type FastCGI struct {
	// Index is fastcgi_index, the file appended to a URI ending in "/"
	// (fastcgi-index; default none).
	Index string
	// Params are the fastcgi_param pairs of fastcgi-params-configmap, one
	// "NAME value" line each, sorted by name; a value's variables are
	// written "${name}" with nginx's names. They replace nginx's standard
	// parameter of the same name.
	Params string
}

// fastCGIName is a FastCGI parameter name or an index file, as
// ingress-nginx accepts them.
var fastCGIName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)

// fastCGIValueChars are the characters of a parameter value ingress-nginx
// accepts: "$", "{" and "}" only as part of a variable (withVariables).
var fastCGIValueChars = regexp.MustCompile(`^[A-Za-z0-9._/${}-]*$`)

// fastCGIVariables are the nginx variables a parameter value may use, by
// the name a user writes, with the variable nginx.conf uses.
var fastCGIVariables = map[string]string{
	"document_root":       "document_root",
	"fastcgi_script_name": "fastcgi_script_name",
	"document_uri":        "document_uri",
	"uri":                 "uri",
	"request_uri":         "request_uri",
	"args":                "args",
	"query_string":        "query_string",
	"is_args":             "is_args",
	"request_method":      "request_method",
	"content_type":        "content_type",
	"content_length":      "content_length",
	"host":                "host",
	"http_host":           "http_host",
	"server_name":         "host", // one server answers every host here
	"server_port":         "server_port",
	"server_addr":         "server_addr",
	"server_protocol":     "server_protocol",
	"scheme":              "scheme",
	"https":               "https",
	"remote_addr":         "remote_addr",
	"remote_port":         "remote_port",
	"request_id":          "restysync_request_id",
	"nginx_version":       "nginx_version",
}

func fastCGIVariable(name string) (string, bool) {
	v, ok := fastCGIVariables[name]
	return v, ok
}

// maxFastCGIParams bounds the entries of a params ConfigMap.
const maxFastCGIParams = 128

// parseFastCGIParam checks one entry of a params ConfigMap and returns its
// value canonical, or why it cannot be used.
func parseFastCGIParam(name, value string) (string, string) {
	if !fastCGIName.MatchString(name) {
		return "", "is not a parameter name of letters, digits, '.', '_' and '-'"
	}
	if len(value) > maxAuthURL {
		return "", fmt.Sprintf("has a value of %d bytes; at most %d are allowed", len(value), maxAuthURL)
	}
	if !fastCGIValueChars.MatchString(value) {
		return "", "has a value with characters other than letters, digits, '.', '_', '/', '-' and variables"
	}
	canonical, reason := withVariables(value, fastCGIVariable)
	if reason != "" {
		return "", "has a value that " + reason
	}
	return canonical, ""
}

// fastCGIParamsRef returns the ConfigMap fastcgi-params-configmap names
// (NAME or NAMESPACE/NAME), when ing's backend-protocol is FCGI.
func fastCGIParamsRef(ing *networkingv1.Ingress) (ref, key string, ok bool) {
	if p, _, found := lookupAnnotation(ing, keyBackendProtocol); !found || !strings.EqualFold(p, ProtocolFCGI) {
		return "", "", false
	}
	value, key, ok := lookupAnnotation(ing, "fastcgi-params-configmap")
	if !ok || strings.TrimSpace(value) == "" {
		return "", "", false // ingress-nginx: empty is none
	}
	return value, key, true
}

// readFastCGI reads fastcgi-index and fastcgi-params-configmap of an FCGI
// Ingress. It returns the settings and why the locations must fail closed
// ("" when they need not).
func (b *builder) readFastCGI(ing *networkingv1.Ingress) (FastCGI, string) {
	var f FastCGI
	if value, key, ok := lookupAnnotation(ing, "fastcgi-index"); ok {
		if reason := checkFastCGIIndex(value); reason == "" {
			f.Index = strings.TrimSpace(value)
		} else {
			b.annotationProblem(ing, key, value, reason+"; no fastcgi_index")
		}
	}
	value, key, ok := fastCGIParamsRef(ing)
	if !ok {
		return f, ""
	}
	cm, ref, denied := b.ingressConfigMap(ing, key, value, maxFastCGIParams, "parameters")
	if denied != "" {
		return f, denied
	}
	lines := make([]string, 0, len(cm.Data))
	for _, name := range slices.Sorted(maps.Keys(cm.Data)) {
		v, reason := parseFastCGIParam(name, cm.Data[name])
		if reason != "" {
			return f, b.entryProblem(ing, key, value, ref, fmt.Sprintf("parameter %q", clip(name)), reason)
		}
		lines = append(lines, name+" "+v)
	}
	f.Params = strings.Join(lines, "\n")
	return f, ""
}

// checkFastCGIIndex checks fastcgi-index (spaces around it do not count).
func checkFastCGIIndex(value string) string {
	if fastCGIName.MatchString(strings.TrimSpace(value)) {
		return ""
	}
	return `is not a file name of letters, digits, '.', '_' and '-' (such as "index.php")`
}
