package model

import (
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
)

// Limits are the platform's maxima, which no Ingress may exceed (the
// agent's flags --max-proxy-body-size, --max-client-body-buffer-size and
// --max-regex-paths-per-host, and the ConfigMap keys of the same names).
// A value over one is a Problem naming the Ingress and the key; the
// zero value sets no maximum.
type Limits struct {
	// MaxProxyBodySize bounds proxy-body-size (and a snippet's
	// client_max_body_size), in bytes; then "0" (no limit) is over it.
	MaxProxyBodySize int64
	// MaxClientBodyBufferSize bounds client-body-buffer-size (and a
	// snippet's client_body_buffer_size), in bytes: what one request may
	// make a worker hold in memory before its body goes to a file.
	MaxClientBodyBufferSize int64
	// MaxRegexPathsPerHost bounds the use-regex paths of one host, which
	// Lua tries in turn for every request to it (restysync.routes); the
	// paths of the oldest Ingresses are kept.
	MaxRegexPathsPerHost int
}

// DefaultLimits are the defaults of the flags. proxy-body-size has no
// maximum: Ingresses migrated from ingress-nginx often set "0" or
// gigabytes, and each location's limit holds for its own requests only.
// A client body buffer of 1m is six times the largest seen in those
// Ingresses (160k); nginx's default is 16k.
func DefaultLimits() Limits {
	return Limits{MaxClientBodyBufferSize: 1 << 20, MaxRegexPathsPerHost: 100}
}

// capProxyLimits holds the body sizes of ing's proxy settings (annotations
// and snippets) to the platform's maxima: one over is a Problem and the
// default is used. It runs after the snippets are read.
func (b *builder) capProxyLimits(ing *networkingv1.Ingress, id string) {
	p, ok := b.proxySettings[id]
	if !ok {
		return
	}
	for _, c := range []struct {
		annotation, flag string
		field            *string
		max              int64
	}{
		{KeyProxyBodySize, "max-proxy-body-size", &p.BodySize, b.limits.MaxProxyBodySize},
		{KeyClientBodyBufferSize, "max-client-body-buffer-size", &p.ClientBodyBufferSize, b.limits.MaxClientBodyBufferSize},
	} {
		if c.max == 0 || *c.field == "" {
			continue
		}
		if n, ok := SizeBytes(*c.field); ok && n != 0 && n <= c.max {
			continue
		}
		key := "snippet " + annotationRows[c.annotation].Directive
		if _, k, found := lookupAnnotation(ing, c.annotation); found {
			key = k
		}
		b.annotationProblem(ing, key, *c.field, fmt.Sprintf("is over the platform's maximum of %d bytes (--%s); the default is used",
			c.max, c.flag))
		*c.field = ""
	}
	b.proxySettings[id] = p
}

// regexPathAllowed counts a use-regex path of host and says whether it is
// within MaxRegexPathsPerHost; when not, it is a Problem on ing.
func (b *builder) regexPathAllowed(ing *networkingv1.Ingress, host, field, path string) bool {
	max := b.limits.MaxRegexPathsPerHost
	if max == 0 {
		return true
	}
	if b.regexPaths == nil {
		b.regexPaths = map[string]int{}
	}
	if b.regexPaths[host] >= max {
		reason := fmt.Sprintf("%s.path %q: %s already has %d regex paths, the most one host may have (--max-regex-paths-per-host); path left out",
			field, clip(path), describeHost(host), max)
		// The annotation that made the path a regex names it, so that
		// restysync check reports it; a path made one by another
		// Ingress's use-regex on the host has neither.
		for _, name := range []string{keyUseRegex, keyRewriteTarget} {
			if value, key, ok := lookupAnnotation(ing, name); ok {
				b.annotationProblem(ing, key, value, reason)
				return false
			}
		}
		b.ingressProblem(ing, reason)
		return false
	}
	b.regexPaths[host]++
	return true
}
