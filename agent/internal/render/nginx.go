package render

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// Which nginx a config is rendered for (Settings.Nginx).
//
// The agent learns it from the Lua status API (ngx.config.nginx_version,
// ngx.config.ngx_lua_version, ngx.config.nginx_configure()), not from
// `nginx -V`: in the chart's sidecar the nginx binary is in another
// container. Before nginx first answers, nothing is known, and the zero
// Nginx renders the forms every version takes (listen ... http2, response
// headers emulated with proxy_hide_header and add_header); once nginx
// reports, the agent renders for what it found, which on the chart's image
// is one reload at the first start.

// Nginx is the nginx a config is rendered for: what the running binary
// reported of itself. The zero value is an nginx not detected yet.
type Nginx struct {
	// Version is nginx's version, "1.27.1"; "" when not detected.
	Version string
	// LuaVersion is lua-nginx-module's, "0.10.28".
	LuaVersion string
	// BuiltIn are the modules compiled into the binary, as its configure
	// arguments name them (BuiltInModules): "http_v2", "stream",
	// "headers-more-nginx-module", ... Modules built as dynamic ones
	// (--with-stream=dynamic) are not built in.
	BuiltIn []string
}

// headersMoreModule is the file name of headers-more as a dynamic module
// (Debian's libnginx-mod-http-headers-more-filter), and headersMoreBuiltIn
// its name in the configure arguments of a binary that has it built in
// (OpenResty: --add-module=../headers-more-nginx-module-0.37).
const (
	headersMoreModule  = "ngx_http_headers_more_filter_module.so"
	headersMoreBuiltIn = "headers-more-nginx-module"
)

// http2DirectiveVersion is the first nginx with the http2 directive; from
// it on, "listen ... http2" is deprecated (a warning at every start and
// reload), and before it "http2 on" is an unknown directive.
var http2DirectiveVersion = [3]int{1, 25, 1}

// NginxFromStatus is the Nginx of what the Lua status API reports:
// ngx.config.nginx_version (1027001 for 1.27.1), ngx.config.ngx_lua_version
// (10028 for 0.10.28) and ngx.config.nginx_configure(). A version of 0 is
// an nginx that did not say (an older Lua): not detected.
func NginxFromStatus(version, luaVersion int, configure string) Nginx {
	if version <= 0 {
		return Nginx{}
	}
	n := Nginx{Version: fmt.Sprintf("%d.%d.%d", version/1000000, version/1000%1000, version%1000), BuiltIn: BuiltInModules(configure)}
	if luaVersion > 0 {
		n.LuaVersion = fmt.Sprintf("%d.%d.%d", luaVersion/1000000, luaVersion/1000%1000, luaVersion%1000)
	}
	return n
}

// Detected says the nginx reported itself.
func (n Nginx) Detected() bool { return n.Version != "" }

// String names the nginx for logs: "nginx 1.27.1 (lua-nginx-module
// 0.10.28)", or "nginx not detected".
func (n Nginx) String() string {
	if !n.Detected() {
		return "nginx not detected"
	}
	if n.LuaVersion == "" {
		return "nginx " + n.Version
	}
	return "nginx " + n.Version + " (lua-nginx-module " + n.LuaVersion + ")"
}

// HTTP2Directive says HTTP/2 is turned on with "http2 on;" (nginx 1.25.1
// and later) rather than "listen ... http2" (every version, deprecated
// since).
func (n Nginx) HTTP2Directive() bool {
	return n.Detected() && !versionBefore(n.Version, http2DirectiveVersion)
}

// HTTP2Form is how a config for n turns HTTP/2 on: "http2 on" or
// "listen ... http2".
func HTTP2Form(n Nginx) string {
	if n.HTTP2Directive() {
		return "http2 on"
	}
	return "listen ... http2"
}

// HeadersMoreForm is how a config of s writes snippets' more_set_headers
// and more_clear_headers: "native" (the headers-more module) or
// "emulated" (proxy_hide_header and add_header).
func HeadersMoreForm(s Settings) string {
	if s.HeadersMore() {
		return "native"
	}
	return "emulated"
}

// Has says the module name (as BuiltIn has it) is built in.
func (n Nginx) Has(name string) bool { return slices.Contains(n.BuiltIn, name) }

// HeadersMore says the detected nginx has the headers-more module: built
// in, or loaded by one of modules (the load_module paths). Not detected,
// it does not: the emulation works on every nginx.
func (n Nginx) HeadersMore(modules []string) bool {
	if !n.Detected() {
		return false
	}
	if n.Has(headersMoreBuiltIn) {
		return true
	}
	return slices.ContainsFunc(modules, func(m string) bool { return filepath.Base(m) == headersMoreModule })
}

// HeadersMore says the nginx of s has the headers-more module
// (Nginx.HeadersMore with the load_module lines of s).
func (s Settings) HeadersMore() bool { return s.Nginx.HeadersMore(s.LoadModules) }

// builtInByFile are the dynamic modules' file names with the names their
// modules have in the configure arguments of a binary that has them built
// in. A load_module of a module built in makes nginx fail to start
// ("module ... is already loaded").
var builtInByFile = map[string]string{
	"ngx_stream_module.so":            "stream",
	"ngx_mail_module.so":              "mail",
	"ndk_http_module.so":              "ngx_devel_kit",
	"ngx_http_lua_module.so":          "ngx_lua",
	"ngx_stream_lua_module.so":        "ngx_stream_lua",
	headersMoreModule:                 headersMoreBuiltIn,
	"ngx_http_geoip_module.so":        "http_geoip",
	"ngx_http_image_filter_module.so": "http_image_filter",
	"ngx_http_xslt_filter_module.so":  "http_xslt",
	"ngx_stream_geoip_module.so":      "stream_geoip",
	"ngx_http_modsecurity_module.so":  "ModSecurity-nginx",
	"ngx_http_perl_module.so":         "http_perl",
}

// LoadsBuiltIn returns those of modules (load_module paths) whose module
// the detected nginx has built in: render leaves their load_module line
// out.
func (n Nginx) LoadsBuiltIn(modules []string) []string {
	var out []string
	for _, m := range modules {
		if name, ok := builtInByFile[filepath.Base(m)]; ok && n.Has(name) {
			out = append(out, m)
		}
	}
	return out
}

// LoadModuleLines are the modules of the load_module lines of s: its
// LoadModules with the ModSecurity module last (modSecurityLast), without
// those the nginx has built in.
func LoadModuleLines(s Settings) []string {
	built := s.Nginx.LoadsBuiltIn(s.LoadModules)
	return slices.DeleteFunc(modSecurityLast(s.LoadModules), func(m string) bool { return slices.Contains(built, m) })
}

// BuiltInModules returns the modules configure (nginx's configure
// arguments, as `nginx -V` and ngx.config.nginx_configure() give them)
// builds in, in order: "--with-NAME_module" and "--with-NAME" give NAME
// ("--with-http_v2_module" is "http_v2", "--with-stream" is "stream"),
// unless "=dynamic" follows; "--add-module=PATH" gives PATH's last element
// without its version ("../headers-more-nginx-module-0.37" is
// "headers-more-nginx-module"). Options with a value (--with-cc-opt=...)
// and library paths (--with-openssl=...) are no modules.
//
// ngx.config.nginx_configure() gives the arguments lua-nginx-module was
// built with: the binary's when it is built in (OpenResty), but those of
// the module's own build when it is a dynamic module (Debian's
// libnginx-mod-http-lua: "--add-dynamic-module=.../libnginx-mod-http-lua-
// 0.10.23/. --add-module=/usr/share/nginx-ndk/src"). Its --add-module
// lines then name what that build compiled against, not what the binary
// has built in, and are left out; its --with-* options are the binary's
// (a dynamic module must be built with them to load).
func BuiltInModules(configure string) []string {
	args := configureArgs(configure)
	luaBuild := slices.ContainsFunc(args, func(a string) bool {
		path, ok := strings.CutPrefix(a, "--add-dynamic-module=")
		return ok && strings.Contains(path, "lua")
	})
	var out []string
	for _, arg := range args {
		name, value, hasValue := strings.Cut(arg, "=")
		switch {
		case name == "--add-module" && hasValue && luaBuild:
		case name == "--add-module" && hasValue:
			out = append(out, withoutVersion(filepath.Base(strings.TrimRight(value, "/"))))
		case strings.HasPrefix(name, "--with-") && !hasValue:
			mod := strings.TrimPrefix(name, "--with-")
			if strings.HasSuffix(mod, "_module") {
				out = append(out, strings.TrimSuffix(mod, "_module"))
			} else if mod == "stream" || mod == "mail" {
				out = append(out, mod)
			}
		}
	}
	return out
}

// configureArgs splits configure arguments at spaces outside quotes,
// without the quotes: --with-cc-opt='-g -O2' is one argument.
func configureArgs(s string) []string {
	var out []string
	var cur strings.Builder
	var quote byte
	inArg := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			cur.WriteByte(c)
		case c == '\'' || c == '"':
			quote, inArg = c, true
		case c == ' ' || c == '\t' || c == '\n':
			if inArg {
				out = append(out, cur.String())
				cur.Reset()
				inArg = false
			}
		default:
			cur.WriteByte(c)
			inArg = true
		}
	}
	if inArg {
		out = append(out, cur.String())
	}
	return out
}

// withoutVersion drops a trailing "-1.2.3" (digits and dots, or a "v"
// and those) from a module folder's name.
func withoutVersion(dir string) string {
	i := strings.LastIndexByte(dir, '-')
	if i <= 0 {
		return dir
	}
	v := strings.TrimPrefix(dir[i+1:], "v")
	if v == "" || strings.Trim(v, "0123456789.") != "" || v[0] < '0' || v[0] > '9' {
		return dir
	}
	return dir[:i]
}

// versionBefore says version ("1.22.1") is before want; a version that
// does not parse is not.
func versionBefore(version string, want [3]int) bool {
	var got [3]int
	if _, err := fmt.Sscanf(version, "%d.%d.%d", &got[0], &got[1], &got[2]); err != nil {
		return false
	}
	return slices.Compare(got[:], want[:]) < 0
}
