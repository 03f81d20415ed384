package snippet

import (
	"fmt"
	"strings"

	"github.com/restysync/restysync/agent/internal/chars"
)

// Values of accepted directives (a header's value, a return's body or
// URL) may use only the nginx variables below. Each stays a variable in
// nginx.conf, written "${name}" through render's quoting function, or,
// for what ingress-nginx knew per location at build time, is replaced by
// its value when the model is built.

// Variable is a variable a snippet value uses.
type Variable struct {
	// Name is the variable as written, lower case, without "$".
	Name string
	// Nginx is the variable nginx.conf reads for it: the same name, or
	// restysync's own for ingress-nginx's ($req_id is
	// $restysync_request_id). "" when PerLocation is set.
	Nginx string
	// PerLocation is one of the Location* names below: a value the model
	// knows for each location and writes as text.
	PerLocation string
}

// Per-location variables: ingress-nginx set these in each location of an
// Ingress; restysync knows them when it builds the model.
const (
	LocationServiceName = "service_name" // the backend Service
	LocationNamespace   = "namespace"    // the Ingress's namespace
	LocationIngressName = "ingress_name" // the Ingress's name
	LocationServicePort = "service_port" // the backend port as the Ingress writes it
	LocationServerName  = "server_name"  // the host of the location's server ("_" for the default one)
)

// RoutedHTTPHost is the variable a redirect's $http_host reads: the host
// the router matched with the Host header's port when that header names
// the same host (nginx.conf's map), never a Host header that disagrees
// with an absolute request line.
const RoutedHTTPHost = "restysync_http_host"

// plainVariables are nginx's variables a value may use as they are.
var plainVariables = map[string]bool{
	"host": true, "http_host": true, "remote_addr": true, "remote_port": true, "scheme": true,
	"request_uri": true, "uri": true, "args": true, "request_method": true, "request_id": true,
	"server_port": true, "proxy_add_x_forwarded_for": true,
}

// aliasVariables are ingress-nginx's own variables, read as restysync's
// (see the template's maps).
var aliasVariables = map[string]string{
	"req_id":             "restysync_request_id",
	"best_http_host":     "restysync_forwarded_host",
	"pass_access_scheme": "restysync_forwarded_proto",
}

var perLocationVariables = map[string]bool{
	LocationServiceName: true, LocationNamespace: true, LocationIngressName: true,
	LocationServicePort: true, LocationServerName: true,
}

// AuthSetPrefix and a number name the variables auth_request_set sets
// ($restysync_set_1 for the first name an auth-snippet sets, and so on):
// nginx's variables are global to its config, so a snippet must not name
// one the config relies on ($host, $restysync_backend), and names of the
// users' choosing would grow nginx's variables hash past its bounds.
// MaxAuthSets bounds the names one auth-snippet sets.
const (
	AuthSetPrefix = "restysync_set_"
	MaxAuthSets   = 16
)

// maxVariableName bounds the name of a variable.
const maxVariableName = 64

// AllowedVariables lists the variables for messages and the README.
const AllowedVariables = "$host, $http_host, $remote_addr, $remote_port, $scheme, $request_uri, $uri, $args, " +
	"$request_method, $request_id, $server_name, $server_port, $proxy_add_x_forwarded_for, $http_NAME, " +
	"$cookie_NAME, $arg_NAME, $upstream_http_NAME (add_header and more_set_headers only), $req_id, " +
	"$best_http_host, $pass_access_scheme, $service_name, $namespace, $ingress_name, $service_port, " +
	"and the variables the Ingress's auth-snippet sets with auth_request_set"

// varScope says which variables a value may use besides the plain ones.
type varScope struct {
	upstream bool              // $upstream_http_NAME: response headers only
	authSets map[string]string // names auth_request_set defines, and their nginx variables
	// routedHTTPHost reads $http_host as RoutedHTTPHost: a URL a client
	// is redirected to.
	routedHTTPHost bool
}

// lookup returns the variable name (as written, without "$") stands for.
func (s varScope) lookup(name string) (Variable, string) {
	lower := strings.ToLower(name)
	if !isVarName(lower) || len(lower) > maxVariableName {
		return Variable{}, fmt.Sprintf("uses $%s, which is not a variable name of letters, digits and \"_\"", clip(name))
	}
	switch {
	case lower == "http_host" && s.routedHTTPHost:
		return Variable{Name: lower, Nginx: RoutedHTTPHost}, ""
	case plainVariables[lower]:
		return Variable{Name: lower, Nginx: lower}, ""
	case aliasVariables[lower] != "":
		return Variable{Name: lower, Nginx: aliasVariables[lower]}, ""
	case perLocationVariables[lower]:
		return Variable{Name: lower, PerLocation: lower}, ""
	case s.authSets[lower] != "":
		return Variable{Name: lower, Nginx: s.authSets[lower]}, ""
	}
	for _, prefix := range []string{"http_", "cookie_", "arg_"} {
		if rest, ok := strings.CutPrefix(lower, prefix); ok && rest != "" {
			return Variable{Name: lower, Nginx: lower}, ""
		}
	}
	if rest, ok := strings.CutPrefix(lower, "upstream_http_"); ok && rest != "" {
		if s.upstream {
			return Variable{Name: lower, Nginx: lower}, ""
		}
		return Variable{}, fmt.Sprintf("uses $%s, which only a response header (add_header, more_set_headers) may use", clip(name))
	}
	return Variable{}, fmt.Sprintf("uses $%s, which is not on the allowlist of snippet variables", clip(name))
}

func isVarName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return s != ""
}

// Part is a piece of a Value: literal Text, or a variable when Var.Name
// is not "".
type Part struct {
	Text string
	Var  Variable
}

// Value is a directive's argument cut into text and variables.
type Value []Part

// Literal is the value's text when it holds no variable.
func (v Value) Literal() (string, bool) {
	var b strings.Builder
	for _, p := range v {
		if p.Var.Name != "" {
			return "", false
		}
		b.WriteString(p.Text)
	}
	return b.String(), true
}

// maxValue bounds a header value, a URL or a body as written;
// maxRendered bounds it as nginx.conf will hold it, quoted and escaped,
// with each variable at its longest: nginx's config parser reads a word
// of at most 4 KiB ("too long parameter").
const (
	maxValue    = 3 << 10
	maxRendered = 3800
	// maxPerLocation is the longest text a per-location variable stands
	// for (a host name).
	maxPerLocation = 253
)

// renderedLen is an upper bound of v's length in nginx.conf: quoted, with
// '"', '\' and control characters escaped, each variable written
// "${name}" or as its text.
func (v Value) renderedLen() int {
	n := 2
	for _, p := range v {
		switch {
		case p.Var.PerLocation != "":
			n += maxPerLocation
		case p.Var.Name != "":
			n += len(p.Var.Nginx) + 3
		default:
			n += len(p.Text)
			for i := 0; i < len(p.Text); i++ {
				if c := p.Text[i]; c == '"' || c == '\\' || c < 0x20 {
					n++
				}
			}
		}
	}
	return n
}

// parseValue cuts s into text and variables, as nginx reads "$name" and
// "${name}". What package chars refuses is refused; body allows a tab, CR
// and LF (the text of a return).
func parseValue(s string, scope varScope, body bool) (Value, string) {
	if !body && strings.ContainsAny(s, "\r\n") {
		return nil, "holds a CR or LF, which would end the header line (header injection)"
	}
	check := chars.Check
	if body {
		check = chars.CheckText
	}
	if err := check(s); err != nil {
		return nil, err.Error()
	}
	if len(s) > maxValue {
		return nil, fmt.Sprintf("is %d bytes long; at most %d are allowed", len(s), maxValue)
	}
	var v Value
	var text strings.Builder
	flush := func() {
		if text.Len() > 0 {
			v = append(v, Part{Text: text.String()})
			text.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '$':
			var name string
			if i+1 < len(s) && s[i+1] == '{' {
				end := strings.IndexByte(s[i+2:], '}')
				if end < 0 {
					return nil, `has a "${" without "}"`
				}
				name = s[i+2 : i+2+end]
				i += 2 + end
			} else {
				j := i + 1
				for j < len(s) && (s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= '0' && s[j] <= '9' || s[j] == '_') {
					j++
				}
				name = s[i+1 : j]
				i = j - 1
			}
			if name == "" {
				return nil, `has a "$" that starts no variable (nginx has no escape for "$")`
			}
			variable, reason := scope.lookup(name)
			if reason != "" {
				return nil, reason
			}
			flush()
			v = append(v, Part{Var: variable})
		default:
			text.WriteByte(c)
		}
	}
	flush()
	if v.renderedLen() > maxRendered {
		return nil, fmt.Sprintf("would be longer than the %d bytes nginx reads as one word", maxRendered)
	}
	return v, ""
}
