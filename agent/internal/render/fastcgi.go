package render

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/restysync/restysync/agent/internal/model"
)

// FastCGI backends of a location's profile (model.ProxySettings.FastCGI;
// model/fastcgi.go reads them).
//
// The profile passes with fastcgi_pass to the same Lua-balanced
// upstream block as proxy_pass does, with nginx's standard parameters
// (fastcgiStandardParams: what nginx's fastcgi_params file holds, written
// out, as the shared dir has no such file) and the Ingress's own, which
// replace the standard one of their name.

// Names of nginx modules that talk to a backend: their directives are
// "<module>_connect_timeout" and so on.
const (
	moduleProxy   = "proxy"
	moduleGRPC    = "grpc"
	moduleFastCGI = "fastcgi"
)

// fastCGIParamView is one fastcgi_param; Value may hold ${vars}.
type fastCGIParamView struct {
	Name       string
	Value      string
	IfNotEmpty bool
}

// fastcgiStandardParams are nginx's fastcgi_params, with SERVER_NAME the
// request's host (one server answers every host here), and the
// X-Forwarded-* and X-Request-ID headers as every other backend gets
// them, which replace a client's (see the template's "proxy-headers");
// HTTP_PROXY is empty (httpoxy).
var fastcgiStandardParams = []fastCGIParamView{
	{Name: "QUERY_STRING", Value: "${query_string}"},
	{Name: "REQUEST_METHOD", Value: "${request_method}"},
	{Name: "CONTENT_TYPE", Value: "${content_type}"},
	{Name: "CONTENT_LENGTH", Value: "${content_length}"},
	{Name: "SCRIPT_NAME", Value: "${fastcgi_script_name}"},
	{Name: "REQUEST_URI", Value: "${request_uri}"},
	{Name: "DOCUMENT_URI", Value: "${document_uri}"},
	{Name: "DOCUMENT_ROOT", Value: "${document_root}"},
	{Name: "SERVER_PROTOCOL", Value: "${server_protocol}"},
	{Name: "REQUEST_SCHEME", Value: "${scheme}"},
	{Name: "HTTPS", Value: "${https}", IfNotEmpty: true},
	{Name: "GATEWAY_INTERFACE", Value: "CGI/1.1"},
	{Name: "SERVER_SOFTWARE", Value: "nginx"},
	{Name: "REMOTE_ADDR", Value: "${remote_addr}"},
	{Name: "REMOTE_PORT", Value: "${remote_port}"},
	{Name: "SERVER_ADDR", Value: "${server_addr}"},
	{Name: "SERVER_PORT", Value: "${server_port}"},
	{Name: "SERVER_NAME", Value: "${host}"},
	{Name: "REDIRECT_STATUS", Value: "200"},
	{Name: "HTTP_X_REAL_IP", Value: "${remote_addr}"},
	{Name: "HTTP_X_FORWARDED_FOR", Value: "${restysync_forwarded_for}"},
	{Name: "HTTP_X_FORWARDED_PROTO", Value: "${restysync_forwarded_proto}"},
	{Name: "HTTP_X_FORWARDED_HOST", Value: "${restysync_forwarded_host}"},
	{Name: "HTTP_X_FORWARDED_PORT", Value: "${restysync_forwarded_port}"},
	{Name: "HTTP_X_REQUEST_ID", Value: "${restysync_request_id}"},
	{Name: "HTTP_PROXY", Value: ""},
}

// fastCGIParamName is the name of a FastCGI parameter, as the model
// checks it.
var fastCGIParamName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)

// backendModule returns the nginx module that talks to a backend of
// protocol.
func backendModule(protocol string) string {
	switch protocol {
	case model.ProtocolGRPC, model.ProtocolGRPCS:
		return moduleGRPC
	case model.ProtocolFCGI:
		return moduleFastCGI
	}
	return moduleProxy
}

// addFastCGI derives the FastCGI part of v from p, for a location of
// protocol.
func addFastCGI(v *proxyView, p model.ProxySettings, protocol string) error {
	v.Module = backendModule(protocol)
	if v.Module == moduleFastCGI {
		params, err := fastCGIParams(p.FastCGI)
		if err != nil {
			return err
		}
		v.FastCGIParams = params
		if p.FastCGI.Index != "" && !fastCGIParamName.MatchString(p.FastCGI.Index) {
			return fmt.Errorf("fastcgi index %q", p.FastCGI.Index)
		}
		// fastcgi_next_upstream has no http_502 or http_504.
		if len(v.NextUpstream) > 0 {
			kept := slices.DeleteFunc(slices.Clone(v.NextUpstream), func(t string) bool { return t == "http_502" || t == "http_504" })
			if len(kept) == 0 {
				kept = []string{"off"}
			}
			v.NextUpstream = kept
		}
	}
	return nil
}

// fastCGIParams returns nginx's standard parameters, but those the
// Ingress sets, then the Ingress's.
func fastCGIParams(f model.FastCGI) ([]fastCGIParamView, error) {
	var own []fastCGIParamView
	names := map[string]bool{}
	if f.Params != "" {
		for _, line := range strings.Split(f.Params, "\n") {
			name, value, _ := strings.Cut(line, " ")
			if !fastCGIParamName.MatchString(name) {
				return nil, fmt.Errorf("fastcgi param %q", line)
			}
			if _, err := QuoteWithVariables(value); err != nil {
				return nil, fmt.Errorf("fastcgi param %s: %w", name, err)
			}
			names[strings.ToUpper(name)] = true
			own = append(own, fastCGIParamView{Name: name, Value: value})
		}
	}
	out := make([]fastCGIParamView, 0, len(fastcgiStandardParams)+len(own))
	for _, p := range fastcgiStandardParams {
		if !names[p.Name] {
			out = append(out, p)
		}
	}
	return append(out, own...), nil
}
