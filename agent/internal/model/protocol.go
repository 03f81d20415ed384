package model

import (
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
)

// The annotations of this family that other files name (model/annotationtable.go has their rows).
const (
	keyBackendProtocol  = "backend-protocol"
	KeySSLRedirect      = "ssl-redirect"
	KeyForceSSLRedirect = "force-ssl-redirect"
)

// Per-location settings of an Ingress that shape the nginx location itself
// rather than the balancing (see Policy): the HTTP → HTTPS redirect and the
// protocol nginx speaks to the backend. They are structure: changing one is
// a reload.

// Backend protocols of Location.Protocol, as the annotation backend-protocol
// names them. The zero value "" is ProtocolHTTP.
const (
	ProtocolHTTP  = ""
	ProtocolHTTPS = "HTTPS"
	ProtocolGRPC  = "GRPC"
	ProtocolGRPCS = "GRPCS"
	// ProtocolFCGI is FastCGI (fastcgi_pass; fastcgi.go).
	ProtocolFCGI = "FCGI"
)

// locationOptions are what an Ingress's annotations say about its locations.
type locationOptions struct {
	// sslRedirect redirects plain HTTP to HTTPS when the host serves
	// HTTPS (annotation ssl-redirect, default true).
	sslRedirect bool
	// forceSSLRedirect redirects even when the host does not (annotation
	// force-ssl-redirect, default false): TLS ends before nginx.
	forceSSLRedirect bool
	protocol         string
	// fastCGI are the FastCGI settings of an FCGI Ingress (fastcgi.go);
	// responseHeaders the custom-headers (responseheaders.go); denied, when
	// not "", why they could not be used and the locations fail closed
	// (readAccess turns it into AccessSettings.Denied).
	fastCGI         FastCGI
	responseHeaders string
	denied          string
}

// readLocationOptions reads the location annotations of ing, whose id is
// "namespace/name", once per Build; a bad value is a Problem on the Ingress
// and leaves that setting at its default.
func (b *builder) readLocationOptions(ing *networkingv1.Ingress, id string) {
	o := locationOptions{
		sslRedirect:      b.boolAnnotation(ing, KeySSLRedirect, true),
		forceSSLRedirect: b.boolAnnotation(ing, KeyForceSSLRedirect, false),
	}
	if value, key, ok := lookupAnnotation(ing, keyBackendProtocol); ok {
		if reason := checkBackendProtocol(value); reason != "" {
			b.annotationProblem(ing, key, value, reason+"; HTTP is used")
		} else if p := strings.ToUpper(value); p != "HTTP" {
			o.protocol = p
		}
	}
	var denied []string
	if o.protocol == ProtocolFCGI {
		var reason string
		if o.fastCGI, reason = b.readFastCGI(ing); reason != "" {
			denied = append(denied, reason)
		}
	}
	var reason string
	if o.responseHeaders, reason = b.readCustomHeaders(ing); reason != "" {
		denied = append(denied, reason)
	}
	o.denied = strings.Join(denied, "; ")
	if o == (locationOptions{sslRedirect: true}) {
		return // the defaults: nothing to remember
	}
	if b.locationOptions == nil {
		b.locationOptions = make(map[string]locationOptions)
	}
	b.locationOptions[id] = o
}

// finishLocation applies the options of the Ingress that owns loc, on a
// server that has TLS of its own (Server.HTTPS) or not, and sets proxy to
// the location's proxy settings.
func (b *builder) finishLocation(loc *Location, proxy *ProxySettings, https bool) {
	o, ok := b.locationOptions[loc.Ingress]
	if !ok {
		o = locationOptions{sslRedirect: true}
	}
	loc.SSLRedirect = o.forceSSLRedirect || (o.sslRedirect && https)
	loc.Protocol = o.protocol
	*proxy = b.proxySettings[loc.Ingress]
	proxy.FastCGI = o.fastCGI
	proxy.ResponseHeaders = o.responseHeaders
	b.finishUpstreamVhost(*loc, proxy)
}

// checkBackendProtocol checks backend-protocol, in any case.
func checkBackendProtocol(value string) string {
	return backendProtocols(strings.ToUpper(value))
}

// backendProtocols is the check of an upper-case backend-protocol.
var backendProtocols = oneOf("HTTP", ProtocolHTTPS, ProtocolGRPC, ProtocolGRPCS, ProtocolFCGI)
