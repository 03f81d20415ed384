package model

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
)

// The annotations of this family that other files name (model/annotationtable.go has their rows).
const (
	keyCustomHeaders = "custom-headers"
)

// Custom response headers (custom-headers): the ConfigMap the annotation
// names, in the Ingress's own namespace, holds headers added to every
// response of the Ingress's locations (errors included), replacing a
// backend's header of the same name, as ingress-nginx's more_set_headers
// does. Names are letters, digits, '-' and '_' (ingress-nginx's rule);
// values are printable ASCII, taken literally: a "$" is not a variable.
// A ConfigMap that is missing or holds a header that cannot be used fails
// the Ingress closed (503), as ingress-nginx denies the location.
//
// ingress-nginx also requires each name to be listed in its ConfigMap key
// global-allowed-response-headers; restysync does not read that key yet,
// so every valid name is allowed.

const (
	maxCustomHeaders     = 64
	maxCustomHeaderValue = 4096
	// dollarVariable is the nginx variable that holds a literal "$"
	// (render writes a geo block for it).
	dollarVariable = "${restysync_dollar}"
)

// refusedResponseHeaders are names (lower case) whose header would break
// the response's framing or the connection if added a second time.
var refusedResponseHeaders = setOf("content-length", "transfer-encoding", "connection", "keep-alive",
	"upgrade", "te", "trailer", "proxy-connection")

// parseCustomHeader checks one header of a custom-headers ConfigMap and
// returns its value canonical ("$" written dollarVariable), or why it
// cannot be used.
func parseCustomHeader(name, value string) (string, string) {
	if !isVariableHeaderName(name) {
		return "", "is not a header name of letters, digits, '-' and '_'"
	}
	if refusedResponseHeaders[strings.ToLower(name)] {
		return "", "is a header of the connection or the message framing, which nginx sets itself"
	}
	if value == "" || len(value) > maxCustomHeaderValue {
		return "", fmt.Sprintf("has an empty value or one longer than %d bytes", maxCustomHeaderValue)
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; c < ' ' || c > '~' {
			return "", fmt.Sprintf("has %q in its value; want printable ASCII", c)
		}
	}
	return strings.ReplaceAll(value, "$", dollarVariable), ""
}

// readCustomHeaders reads custom-headers. It returns the headers, "Name:
// value" lines sorted by name, and why the locations must fail closed (""
// when they need not).
func (b *builder) readCustomHeaders(ing *networkingv1.Ingress) (string, string) {
	value, key, ok := lookupAnnotation(ing, keyCustomHeaders)
	if !ok || strings.TrimSpace(value) == "" {
		return "", ""
	}
	cm, ref, denied := b.ingressConfigMap(ing, key, value, maxCustomHeaders, "headers")
	if denied != "" {
		return "", denied
	}
	lines := make([]string, 0, len(cm.Data))
	for _, name := range slices.Sorted(maps.Keys(cm.Data)) {
		v, reason := parseCustomHeader(name, cm.Data[name])
		if reason != "" {
			return "", b.entryProblem(ing, key, value, ref, fmt.Sprintf("header %q", clip(name)), reason)
		}
		lines = append(lines, name+": "+v)
	}
	return strings.Join(lines, "\n"), ""
}

func setOf(names ...string) map[string]bool {
	out := make(map[string]bool, len(names))
	for _, n := range names {
		out[n] = true
	}
	return out
}
