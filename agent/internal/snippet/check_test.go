package snippet

import (
	"reflect"
	"strings"
	"testing"
)

func v(parts ...Part) Value { return Value(parts) }
func lit(s string) Part     { return Part{Text: s} }
func nv(name string) Part   { return Part{Var: Variable{Name: name, Nginx: name}} }

func TestCheckAccepts(t *testing.T) {
	tests := []struct {
		name string
		ctx  Context
		text string
		want Result
	}{
		{"empty auth-snippet (corpus 029)", Auth, "\n", Result{}},
		{"more_set_headers with ingress-nginx's $req_id (corpus 006)", Configuration, `more_set_headers "Request-Id: $req_id";`, Result{
			ResponseHeaders: []Header{{Name: "Request-Id", Value: v(Part{Var: Variable{Name: "req_id", Nginx: "restysync_request_id"}}), Always: true, Directive: "more_set_headers", Line: 1}},
			HideHeaders:     []string{"Request-Id"},
		}},
		{"linkerd (corpus 019)", Configuration, "proxy_set_header Origin \"\";\nproxy_hide_header l5d-remote-ip;\nproxy_hide_header l5d-server-id;\n", Result{
			RequestHeaders: []Header{{Name: "Origin", Directive: "proxy_set_header", Line: 1}},
			HideHeaders:    []string{"l5d-remote-ip", "l5d-server-id"},
		}},
		{"per-location variables (corpus 042)", Configuration, "proxy_set_header l5d-dst-override $service_name.$namespace.svc.cluster.local:9898;", Result{
			RequestHeaders: []Header{{Name: "l5d-dst-override", Value: v(
				Part{Var: Variable{Name: "service_name", PerLocation: "service_name"}}, lit("."),
				Part{Var: Variable{Name: "namespace", PerLocation: "namespace"}}, lit(".svc.cluster.local:9898")), Directive: "proxy_set_header", Line: 1}},
		}},
		{"proxy settings and websocket headers (corpus 028)", Server, "proxy_http_version 1.1;\nproxy_set_header Upgrade \"websocket\";\nproxy_read_timeout 90;\nproxy_ssl_verify off;\nclient_max_body_size 0;", Result{
			RequestHeaders: []Header{{Name: "Upgrade", Value: v(lit("websocket")), Directive: "proxy_set_header", Line: 2}},
			Settings: []Setting{{"proxy_http_version", "1.1", 1}, {"proxy_read_timeout", "90", 3}, {"proxy_ssl_verify", "off", 4},
				{"client_max_body_size", "0", 5}},
		}},
		{"server_tokens and a blocked regex (corpus 050)", Server, "server_tokens off;\nlocation ~ ^/(ping|ready|prometheus) {\n  deny all;\n  return 404;\n}\n", Result{
			ServerTokensOff: true,
			Locations:       []Location{{Modifier: "~", Path: "^/(ping|ready|prometheus)", Line: 2, Code: 404, Rules: []string{"deny all"}}},
		}},
		{"robots.txt (corpus 066)", Server, "location /robots.txt {\n  add_header Content-Type \"text/plain\";\n  return 200 \"User-agent: *\\nDisallow: /\";\n}", Result{
			Locations: []Location{{Path: "/robots.txt", Line: 1, Code: 200, Text: v(lit("User-agent: *\nDisallow: /")),
				Headers: []Header{{Name: "Content-Type", Value: v(lit("text/plain")), Directive: "add_header", Line: 2}}}},
		}},
		{"redirect with variables", Server, "location = /old { return 301 https://$host/new?$args; }", Result{
			Locations: []Location{{Modifier: "=", Path: "/old", Line: 1, Code: 301, Text: v(lit("https://"), nv("host"), lit("/new?"), nv("args"))}},
		}},
		// A redirect's $http_host is the host the router matched; a body's
		// is the Host header, as nginx has it.
		{"redirect to $http_host", Server, "location = /old { return 302 https://$http_host/new; }\nlocation = /echo { return 200 $http_host; }", Result{
			Locations: []Location{
				{Modifier: "=", Path: "/old", Line: 1, Code: 302, Text: v(lit("https://"), Part{Var: Variable{Name: "http_host", Nginx: RoutedHTTPHost}}, lit("/new"))},
				{Modifier: "=", Path: "/echo", Line: 2, Code: 200, Text: v(nv("http_host"))},
			},
		}},
		{"vouch (corpus 039)", Auth, "# comment\nauth_request_set $auth_resp_jwt $upstream_http_x_vouch_jwt;\nauth_request_set $auth_status $upstream_status;", Result{
			AuthSets: []AuthSet{{Var: "auth_resp_jwt", Nginx: "restysync_set_1", Upstream: "upstream_http_x_vouch_jwt", Line: 2},
				{Var: "auth_status", Nginx: "restysync_set_2", Upstream: "upstream_status", Line: 3}},
		}},
		{"clear headers", Global, "more_clear_headers X-Powered-By;\nmore_clear_input_headers X-Debug;", Result{
			HideHeaders: []string{"X-Powered-By"}, ClearHeaders: []string{"X-Powered-By"},
			RequestHeaders: []Header{{Name: "X-Debug", Directive: "more_clear_input_headers", Line: 2}},
		}},
		{"upstream header in add_header", Configuration, "add_header X-Up $upstream_http_x_a always;", Result{
			ResponseHeaders: []Header{{Name: "X-Up", Value: v(nv("upstream_http_x_a")), Always: true, Directive: "add_header", Line: 1}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, refusal := Parse(tt.ctx, tt.text, Options{})
			if refusal != nil {
				t.Fatalf("refused: %v", refusal)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

func TestCheckRefuses(t *testing.T) {
	tests := []struct {
		name      string
		ctx       Context
		text      string
		directive string
		line      int
		reason    string
	}{
		{"CRLF in a header value (corpus 022)", Server,
			"add_header X-Safe-Header \"Safe Content\";\nadd_header X-Vuln-Header \"Benign\\r\nHTTP/1.1 200 OK\n--------\";\nreturn 200 \"Original Content\";",
			"add_header", 2, "CR or LF"},
		{"alias (corpus 041, CVE-2021-25742)", Server, "location ^~ \"/test\" {\n  default_type 'text/plain';\n  alias /var/run;\n}", "alias", 3, "CVE-2021-25742"},
		{"root", Configuration, "root /etc;", "root", 1, "files"},
		{"lua", Configuration, "access_by_lua_block { ngx.say(1) }", "access_by_lua_block", 1, "runs code"},
		{"lua in a location", Server, "location /x { content_by_lua_block { ngx.say(1) } }", "content_by_lua_block", 1, "runs code"},
		{"lua that parses", Server, "location /x { content_by_lua_block { ngx.say(1); } }", "content_by_lua_block", 1, "blocks inside"},
		{"is_args", Server, "location = /old { return 301 https://$host/new$is_args$args; }", "return", 1, "$is_args"},
		{"include", Server, "include /etc/passwd;", "include", 1, "any file"},
		{"load_module", Configuration, "load_module x.so;", "load_module", 1, "loads code"},
		{"proxy_pass", Configuration, "proxy_pass http://10.0.0.1;", "proxy_pass", 1, "any address"},
		{"set", Configuration, "set $restysync_backend x;", "set", 1, "variables"},
		{"if", Configuration, "if ($host) { return 403; }", "if", 1, "conditions"},
		{"rewrite", Configuration, "rewrite ^ /x break;", "rewrite", 1, "rewrite-target"},
		{"a closing brace escape", Configuration, `add_header X "a"} ssl_certificate_key /x;`, "", 1, "does not parse"},
		{"a quote and semicolon escape", Configuration, `add_header X "a\";" always; root /;`, "root", 1, "files"},
		{"a variable not allowed", Configuration, "proxy_set_header X $ssl_client_raw_cert;", "proxy_set_header", 1, "not on the allowlist"},
		{"upstream variable in a request header", Configuration, "proxy_set_header X $upstream_http_x;", "proxy_set_header", 1, "only a response header"},
		{"a bare dollar", Configuration, `add_header X "a$";`, "add_header", 1, `"$"`},
		{"huge", Configuration, "add_header X \"" + strings.Repeat("a", MaxBytes) + "\";", "", 0, "bytes long"},
		// Characters no value may hold (package chars), wherever they are.
		{"C1 NEL in add_header (issue 25)", Configuration, "add_header X-A \"a\u0085b\";", "add_header", 1, "argument 2 contains the C1 control character U+0085"},
		{"C1 in proxy_set_header", Configuration, "proxy_set_header X-A a\u009bb;", "proxy_set_header", 1, "C1 control character U+009B"},
		{"C1 in return text", Server, "location /x { return 200 \"a\u0080\"; }", "return", 1, "C1 control character U+0080"},
		{"line separator in more_set_headers", Configuration, "more_set_headers \"X: a\u2028b\";", "more_set_headers", 1, "line separator U+2028"},
		{"paragraph separator in a return URL", Server, "location /x { return 301 https://x/\u2029; }", "return", 1, "paragraph separator U+2029"},
		{"bidi override in a header value", Configuration, "add_header X \"\u202eabc\";", "add_header", 1, "bidirectional control U+202E"},
		{"bidi isolate in a location path", Server, "location /a\u2066b { return 404; }", "location", 1, "bidirectional control U+2066"},
		{"zero-width space in a header name", Configuration, "add_header X\u200bA b;", "add_header", 1, "format character U+200B"},
		{"invalid UTF-8 in a value", Configuration, "add_header X \"a\xffb\";", "add_header", 1, "not valid UTF-8"},
		{"encoded surrogate in a value", Configuration, "add_header X \"a\xed\xa0\x80\";", "add_header", 1, "not valid UTF-8"},
		{"escape in a header value", Configuration, "add_header X \"a\x1bb\";", "add_header", 1, "control character U+001B"},
		{"tab in a header value", Configuration, "add_header X \"a\\tb\";", "add_header", 1, "control character U+0009"},
		{"C1 in a name", Configuration, "add_header\u0085 X y;", "add_header\u0085", 1, "the name contains the C1 control character U+0085"},
		{"headers-more option", Configuration, `more_set_headers -s 404 "X: y";`, "more_set_headers", 1, "option -s"},
		{"Server cannot be replaced", Configuration, `more_set_headers "Server: x";`, "more_set_headers", 1, "headers-more"},
		{"framing header", Configuration, `add_header Content-Length 0;`, "add_header", 1, "frames"},
		{"request framing header", Configuration, `proxy_set_header Transfer-Encoding chunked;`, "proxy_set_header", 1, "frames"},
		{"server_tokens on", Server, "server_tokens on;", "server_tokens", 1, "only server_tokens off"},
		{"location outside server-snippet", Configuration, "location /x { return 200; }", "location", 1, "server-snippet annotation only"},
		{"named location", Server, "location @x { return 200; }", "location", 1, "named"},
		{"proxy setting in the ConfigMap", Global, "proxy_read_timeout 5;", "proxy_read_timeout", 1, "ConfigMap key"},
		{"auth-snippet holds only auth_request_set", Auth, "proxy_set_header X y;", "proxy_set_header", 1, "only auth_request_set"},
		{"auth_request_set of anything", Auth, "auth_request_set $x $host;", "auth_request_set", 1, "upstream_http_NAME"},
		{"bad timeout", Configuration, "proxy_read_timeout 1m;", "proxy_read_timeout", 1, "seconds"},
		{"buffers not supported yet", Configuration, "proxy_buffers 4 8k;", "proxy_buffers", 1, "not supported yet"},
		{"two returns", Server, "location /x { return 200; return 404; }", "return", 1, "one return"},
		{"bad cidr", Server, "location /x { allow 10.0.0.300; return 200; }", "allow", 1, "not an IP address"},
		{"return at top level", Server, "return 301 https://x/;", "return", 1, "before its checks"},
		{"bad status", Server, "location /x { return 999; }", "return", 1, "status code"},
		{"control character in a body", Server, "location /x { return 200 \"a\x01b\"; }", "return", 1, "control character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, refusal := Parse(tt.ctx, tt.text, Options{})
			if refusal == nil {
				t.Fatal("accepted")
			}
			if refusal.Directive != tt.directive || refusal.Line != tt.line || !strings.Contains(refusal.Reason, tt.reason) {
				t.Errorf("got %q (line %d) %q, want %q (line %d) with %q", refusal.Directive, refusal.Line, refusal.Reason, tt.directive, tt.line, tt.reason)
			}
		})
	}
}

func TestAuthVariablesInOtherSnippets(t *testing.T) {
	auth, refusal := Parse(Auth, "auth_request_set $a $upstream_http_x_a;\nauth_request_set $auth_user $upstream_http_x_user;\n"+
		"auth_request_set $a $upstream_status;", Options{})
	if refusal != nil {
		t.Fatal(refusal)
	}
	vars := AuthVariables(auth.AuthSets)
	if len(vars) != 2 || vars["a"] != "restysync_set_1" || auth.AuthSets[2].Nginx != "restysync_set_1" {
		t.Fatalf("variables %v, sets %+v", vars, auth.AuthSets)
	}
	res, refusal := Parse(Configuration, "proxy_set_header X-User $auth_user;", Options{AuthVariables: vars})
	if refusal != nil {
		t.Fatal(refusal)
	}
	want := Variable{Name: "auth_user", Nginx: "restysync_set_2"}
	if got := res.RequestHeaders[0].Value[0].Var; got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if _, refusal := Parse(Configuration, "proxy_set_header X-User $auth_user;", Options{}); refusal == nil {
		t.Error("a variable no auth_request_set defines was accepted")
	}
}

func TestSplitMoreHeader(t *testing.T) {
	for arg, want := range map[string][2]string{
		"X-A: b":                                {"X-A", "b"},
		"X-A:b":                                 {"X-A", "b"},
		"X-Forwarded-For $http_x_forwarded_for": {"X-Forwarded-For", "$http_x_forwarded_for"},
		"  X-A ::  b c ":                        {"X-A", "b c"},
		"X-A":                                   {"X-A", ""},
		"X-A:":                                  {"X-A", ""},
	} {
		name, value := splitMoreHeader(arg)
		if name != want[0] || value != want[1] {
			t.Errorf("splitMoreHeader(%q) = %q, %q; want %q, %q", arg, name, value, want[0], want[1])
		}
	}
}

// Server, Date and Content-Type are nginx's own: more_set_headers and
// more_clear_headers may name them only with the headers-more module;
// the framing headers never.
func TestNginxOwnHeadersNeedHeadersMore(t *testing.T) {
	for _, text := range []string{`more_set_headers "Server: edge";`, `more_clear_headers Date;`, `more_set_headers "Content-Type: text/x";`} {
		if _, r := Parse(Configuration, text, Options{}); r == nil || !strings.Contains(r.Reason, "headers-more") {
			t.Errorf("%s without headers-more: %v, want refused naming headers-more", text, r)
		}
		res, r := Parse(Configuration, text, Options{HeadersMore: true})
		if r != nil {
			t.Errorf("%s with headers-more: refused: %v", text, r)
		}
		if len(res.ResponseHeaders)+len(res.ClearHeaders) != 1 {
			t.Errorf("%s with headers-more: %+v", text, res)
		}
	}
	for _, text := range []string{`more_set_headers "Content-Length: 1";`, `more_clear_headers Transfer-Encoding;`, `more_set_headers "Connection: close";`} {
		if _, r := Parse(Configuration, text, Options{HeadersMore: true}); r == nil || !strings.Contains(r.Reason, "frames the response") {
			t.Errorf("%s with headers-more: %v, want refused as framing", text, r)
		}
	}
}
