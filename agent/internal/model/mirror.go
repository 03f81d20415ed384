package model

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Request mirroring (mirror-target, mirror-host, mirror-request-body), as
// ingress-nginx has it: nginx's mirror module sends a copy of each request
// of the Ingress's locations to the target URL, through an internal
// location; the mirror's answer is ignored and the client gets the
// backend's. The target is an absolute http(s) URL that may use the
// variables of mirrorVariables (ingress-nginx's documentation writes
// "https://test.env.com$request_uri"), checked as auth-url is, so that a
// value can never end its quotes in nginx.conf. A target that cannot be
// used is a Problem and the Ingress is served without a mirror.

// Mirror are the mirror settings of one location; the zero value mirrors
// nothing.
type Mirror struct {
	// Target is the URL each request is copied to, its variables written
	// "${name}" with nginx's names (mirror-target; default none). Without
	// a path the mirror gets the internal location's URI: write
	// $request_uri to keep the client's, as ingress-nginx's docs do.
	Target string
	// Host is the Host header of the mirrored request (mirror-host), by
	// default the target's host name without the port; "" when the
	// target's host is a variable: nginx's own ($proxy_host).
	Host string
	// NoBody leaves the request body out of the copy (mirror-request-body
	// "off"; default "on").
	NoBody bool
}

// mirrorVariables are the nginx variables mirror-target may use, by the
// name a user writes, with the variable nginx.conf uses. They are read in
// the client's request, before the copy is made.
var mirrorVariables = map[string]string{
	"host":               "host",
	"http_host":          "http_host",
	"best_http_host":     "restysync_forwarded_host",
	"scheme":             "scheme",
	"pass_access_scheme": "restysync_forwarded_proto",
	"request_uri":        "request_uri",
	"uri":                "uri",
	"args":               "args",
	"is_args":            "is_args",
	"query_string":       "query_string",
	"remote_addr":        "remote_addr",
	"request_id":         "restysync_request_id",
}

func mirrorVariable(name string) (string, bool) {
	v, ok := mirrorVariables[name]
	return v, ok
}

// mirrorTarget checks a mirror-target value. It returns the URL canonical
// and the default Host header: the literal host name before any variable,
// or "" when the host itself is a variable.
func mirrorTarget(value string) (target, host, reason string) {
	if len(value) > maxAuthURL {
		return "", "", fmt.Sprintf("is %d bytes; at most %d are allowed", len(value), maxAuthURL)
	}
	canonical, reason := withVariables(value, mirrorVariable)
	if reason != "" {
		return "", "", reason
	}
	// Parse it with each variable as a plain word, for its shape.
	plain := canonical
	for _, v := range mirrorVariables {
		plain = strings.ReplaceAll(plain, "${"+v+"}", "x")
	}
	u, err := url.Parse(plain)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Fragment != "" {
		return "", "", "is not an absolute http or https URL with a host"
	}
	// The host: what follows "://" up to the path, the query or a
	// variable that starts a path. A literal one must be a DNS name or an
	// IP address; one that holds a variable gives no default Host.
	_, rest, _ := strings.Cut(canonical, "://")
	end := len(rest)
	for _, stop := range []string{"/", "?", "${request_uri}", "${uri}"} {
		if i := strings.Index(rest, stop); i >= 0 && i < end {
			end = i
		}
	}
	if authority := rest[:end]; !strings.Contains(authority, "${") {
		lu, err := url.Parse("http://" + authority)
		if err != nil || lu.Hostname() == "" {
			return "", "", "is not an absolute http or https URL with a host"
		}
		name := strings.ToLower(lu.Hostname())
		if net.ParseIP(name) == nil && len(validation.IsDNS1123Subdomain(name)) > 0 {
			return "", "", fmt.Sprintf("has the host %q, which is neither a DNS name nor an IP address", clip(name))
		}
		host = name
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
	}
	return canonical, host, ""
}

// readMirror reads mirror-target, mirror-host and mirror-request-body.
func (b *builder) readMirror(ing *networkingv1.Ingress, p *ProxySettings) {
	value, key, ok := lookupAnnotation(ing, "mirror-target")
	if !ok || strings.TrimSpace(value) == "" {
		return
	}
	target, host, reason := mirrorTarget(strings.TrimSpace(value))
	if reason != "" {
		b.annotationProblem(ing, key, value, reason+"; no mirror")
		return
	}
	if reason := b.targets.CheckURL(target, routedByHost(ing)); reason != "" {
		b.targetRefused(ing, key, value, reason, "no mirror")
		return
	}
	m := Mirror{Target: target, Host: host}
	if v, k, ok := lookupAnnotation(ing, "mirror-host"); ok {
		h := strings.ToLower(strings.TrimSpace(v))
		if reason := checkMirrorHost(v); reason != "" {
			b.annotationProblem(ing, k, v, reason+"; the target's host is sent")
		} else {
			m.Host = h
		}
	}
	if v, k, ok := lookupAnnotation(ing, "mirror-request-body"); ok {
		if reason := checkMirrorRequestBody(v); reason != "" {
			b.annotationProblem(ing, k, v, reason+`; "on" is used (the body is mirrored), as ingress-nginx does`)
		} else {
			m.NoBody = strings.TrimSpace(v) == "off"
		}
	}
	p.Mirror = m
}

// checkMirrorTarget checks mirror-target's shape (mirrorTarget); whether
// the agent may send to it (--target-policy) only Build knows.
func checkMirrorTarget(value string) string {
	_, _, reason := mirrorTarget(strings.TrimSpace(value))
	return reason
}

// checkMirrorHost checks mirror-host, in any case, spaces around it aside.
func checkMirrorHost(value string) string {
	return checkHostPort(strings.ToLower(strings.TrimSpace(value)))
}

// checkMirrorRequestBody checks mirror-request-body.
func checkMirrorRequestBody(value string) string {
	return checkOnOff(strings.TrimSpace(value))
}
