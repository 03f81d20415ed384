package render

import (
	"bytes"
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/luaapi"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// openRestyConfigure are the configure arguments of the chart's image,
// openresty/openresty:1.27.1.2-0-alpine, as ngx.config.nginx_configure()
// gives them. Written from docker-openresty's alpine/Dockerfile
// (RESTY_CONFIG_OPTIONS: --with-compat ... --with-http_v2_module ...
// --with-stream --with-stream_ssl_module --with-stream_ssl_preread_module
// --with-threads, geoip, image_filter and xslt =dynamic) and OpenResty's
// util/configure, which puts its bundled modules first as
// --add-module=../NAME-VERSION (auto_complete of the folder in build/) and
// adds --with-stream for stream-lua; the versions are OpenResty
// 1.27.1.2's bundle (headers-more 0.37, lua-nginx-module 0.10.28,
// stream-lua 0.0.16). OpenResty cannot be installed here to print them.
const openRestyConfigure = `--prefix=/usr/local/openresty/nginx --with-cc-opt='-O2 -DNGX_LUA_ABORT_AT_PANIC -I/usr/local/openresty/pcre2/include -I/usr/local/openresty/openssl3/include' ` +
	`--add-module=../ngx_devel_kit-0.3.3 --add-module=../echo-nginx-module-0.63 --add-module=../xss-nginx-module-0.06 ` +
	`--add-module=../ngx_coolkit-0.2 --add-module=../set-misc-nginx-module-0.33 --add-module=../form-input-nginx-module-0.12 ` +
	`--add-module=../encrypted-session-nginx-module-0.09 --add-module=../srcache-nginx-module-0.33 --add-module=../ngx_lua-0.10.28 ` +
	`--add-module=../ngx_lua_upstream-0.07 --add-module=../headers-more-nginx-module-0.37 --add-module=../array-var-nginx-module-0.06 ` +
	`--add-module=../memc-nginx-module-0.20 --add-module=../redis2-nginx-module-0.15 --add-module=../redis-nginx-module-0.3.9 ` +
	`--add-module=../ngx_stream_lua-0.0.16 ` +
	`--with-ld-opt='-Wl,-rpath,/usr/local/openresty/luajit/lib -L/usr/local/openresty/pcre2/lib -L/usr/local/openresty/openssl3/lib -Wl,-rpath,/usr/local/openresty/pcre2/lib:/usr/local/openresty/openssl3/lib' ` +
	`--with-pcre --with-compat --without-mail_pop3_module --without-mail_imap_module --without-mail_smtp_module ` +
	`--with-http_addition_module --with-http_auth_request_module --with-http_dav_module --with-http_flv_module ` +
	`--with-http_geoip_module=dynamic --with-http_gunzip_module --with-http_gzip_static_module ` +
	`--with-http_image_filter_module=dynamic --with-http_mp4_module --with-http_random_index_module ` +
	`--with-http_realip_module --with-http_secure_link_module --with-http_slice_module --with-http_ssl_module ` +
	`--with-http_stub_status_module --with-http_sub_module --with-http_v2_module --with-http_xslt_module=dynamic ` +
	`--with-ipv6 --with-mail --with-mail_ssl_module --with-md5-asm --with-sha1-asm --with-stream ` +
	`--with-stream_ssl_module --with-stream_ssl_preread_module --with-threads --with-pcre-jit --with-stream --with-stream_ssl_preread_module`

// debianConfigure are the configure arguments of Debian 12's nginx 1.22.1
// (`nginx -V` here), cut to the module options.
const debianConfigure = `--with-cc-opt='-g -O2 -ffile-prefix-map=/build/reproducible-path/nginx-1.22.1=. -fstack-protector-strong -Wformat -Werror=format-security -fPIC -Wdate-time -D_FORTIFY_SOURCE=2' ` +
	`--with-ld-opt='-Wl,-z,relro -Wl,-z,now -fPIC' --prefix=/usr/share/nginx --conf-path=/etc/nginx/nginx.conf ` +
	`--modules-path=/usr/lib/nginx/modules --with-compat --with-debug --with-pcre-jit --with-http_ssl_module ` +
	`--with-http_stub_status_module --with-http_realip_module --with-http_auth_request_module --with-http_v2_module ` +
	`--with-http_dav_module --with-http_slice_module --with-threads --with-http_addition_module --with-http_flv_module ` +
	`--with-http_gunzip_module --with-http_gzip_static_module --with-http_mp4_module --with-http_random_index_module ` +
	`--with-http_secure_link_module --with-http_sub_module --with-mail_ssl_module --with-stream_ssl_module ` +
	`--with-stream_ssl_preread_module --with-stream_realip_module --with-http_geoip_module=dynamic ` +
	`--with-http_image_filter_module=dynamic --with-http_perl_module=dynamic --with-http_xslt_module=dynamic ` +
	`--with-mail=dynamic --with-stream=dynamic --with-stream_geoip_module=dynamic`

// debianLuaConfigure is what ngx.config.nginx_configure() reports on
// Debian's nginx 1.22.1 with libnginx-mod-http-lua 0.10.23 (TestDetectNginx
// logs it): the arguments of the Lua module's own build, not the binary's.
const debianLuaConfigure = ` --with-cc-opt='-g -O2 -ffile-prefix-map=/build/reproducible-path/libnginx-mod-http-lua-0.10.23=. -fstack-protector-strong -Wformat -Werror=format-security -DLUA_DEFAULT_PATH="/usr/share/lua/5.1/?.lua;" -fPIC -Wdate-time -D_FORTIFY_SOURCE=2' ` +
	`--with-ld-opt='-Wl,-z,relro -Wl,-z,now -lpcre -fPIC' --prefix=/usr/share/nginx --conf-path=/etc/nginx/nginx.conf ` +
	`--http-log-path=/var/log/nginx/access.log --error-log-path=stderr --lock-path=/var/lock/nginx.lock --pid-path=/run/nginx.pid ` +
	`--modules-path=/usr/lib/nginx/modules --http-client-body-temp-path=/var/lib/nginx/body ` +
	`--http-fastcgi-temp-path=/var/lib/nginx/fastcgi --http-proxy-temp-path=/var/lib/nginx/proxy ` +
	`--http-scgi-temp-path=/var/lib/nginx/scgi --http-uwsgi-temp-path=/var/lib/nginx/uwsgi --with-compat --with-debug ` +
	`--with-pcre-jit --with-http_ssl_module --with-http_stub_status_module --with-http_realip_module ` +
	`--with-http_auth_request_module --with-http_v2_module --with-http_dav_module --with-http_slice_module --with-threads ` +
	`--add-dynamic-module=/build/reproducible-path/libnginx-mod-http-lua-0.10.23/. ` +
	`--builddir=/build/reproducible-path/libnginx-mod-http-lua-0.10.23/obj-x86_64-linux-gnu --add-module=/usr/share/nginx-ndk/src`

var (
	openResty = NginxFromStatus(1027001, 10028, openRestyConfigure)
	debian    = NginxFromStatus(1022001, 10023, debianConfigure)
	debianLua = NginxFromStatus(1022001, 10023, debianLuaConfigure)
)

func TestBuiltInModules(t *testing.T) {
	for _, tc := range []struct {
		name      string
		n         Nginx
		has, lack []string
	}{
		{"openresty 1.27.1.2", openResty,
			[]string{"http_v2", "stream", "stream_ssl_preread", "headers-more-nginx-module", "ngx_lua", "ngx_devel_kit", "ngx_stream_lua", "mail"},
			[]string{"http_geoip", "http_xslt", "ipv6"}},
		{"debian 1.22.1", debian,
			[]string{"http_v2", "http_realip", "stream_ssl_preread"},
			[]string{"stream", "mail", "headers-more-nginx-module", "ngx_lua", "http_perl"}},
		{"debian 1.22.1 as its Lua module reports it", debianLua,
			[]string{"http_v2", "http_realip"},
			[]string{"stream", "src", "ngx_devel_kit", "ngx_lua", "headers-more-nginx-module"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, m := range tc.has {
				if !tc.n.Has(m) {
					t.Errorf("%s is not built in; got %v", m, tc.n.BuiltIn)
				}
			}
			for _, m := range tc.lack {
				if tc.n.Has(m) {
					t.Errorf("%s is built in; got %v", m, tc.n.BuiltIn)
				}
			}
		})
	}
	if got := BuiltInModules(`--add-module=/build/ModSecurity-nginx-v1.0.3/ --with-x='a b' --with-stream=dynamic`); !slices.Equal(got, []string{"ModSecurity-nginx"}) {
		t.Errorf("got %q", got)
	}
}

func TestNginxFromStatus(t *testing.T) {
	if openResty.Version != "1.27.1" || openResty.LuaVersion != "0.10.28" || !openResty.Detected() {
		t.Errorf("openresty: %+v", openResty)
	}
	if debian.Version != "1.22.1" || debian.LuaVersion != "0.10.23" {
		t.Errorf("debian: %+v", debian)
	}
	if n := NginxFromStatus(0, 0, ""); n.Detected() || n.String() != "nginx not detected" {
		t.Errorf("an nginx that did not say: %+v", n)
	}
	for _, tc := range []struct {
		n    Nginx
		http bool
	}{{Nginx{}, false}, {debian, false}, {Nginx{Version: "1.25.0"}, false}, {Nginx{Version: "1.25.1"}, true}, {openResty, true}, {Nginx{Version: "2.0.0"}, true}} {
		if got := tc.n.HTTP2Directive(); got != tc.http {
			t.Errorf("%q: HTTP2Directive %v, want %v", tc.n.Version, got, tc.http)
		}
	}
	modules := []string{"/usr/share/nginx/modules/" + headersMoreModule}
	for _, tc := range []struct {
		name    string
		n       Nginx
		modules []string
		want    bool
	}{
		{"not detected, module loaded", Nginx{}, modules, false},
		{"debian without the module", debian, nil, false},
		{"debian with the module", debian, modules, true},
		{"openresty", openResty, nil, true},
	} {
		if got := tc.n.HeadersMore(tc.modules); got != tc.want {
			t.Errorf("%s: HeadersMore %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestRenderHTTP2Forms renders both version branches: "listen ... ssl
// http2" for an nginx not detected and for 1.22, "http2 on;" in each HTTPS
// server from 1.25.1 (the image's 1.27.1), the listen lines without it.
func TestRenderHTTP2Forms(t *testing.T) {
	m := clientTLSWildcardModel() // the default server and client-TLS servers
	for _, tc := range []struct {
		name      string
		n         Nginx
		directive bool
	}{{"not detected", Nginx{}, false}, {"debian 1.22.1", debian, false}, {"openresty 1.27.1", openResty, true}} {
		t.Run(tc.name, func(t *testing.T) {
			s := goldenSettings
			s.Nginx = tc.n
			cfg, err := Render(m, s)
			if err != nil {
				t.Fatal(err)
			}
			conf := string(cfg.Bytes)
			servers := strings.Count(conf, "listen \"443\" ssl")
			if servers < 2 {
				t.Fatalf("%d HTTPS servers, want the default and client-TLS ones", servers)
			}
			listenHTTP2 := strings.Count(conf, "listen \"443\" ssl http2")
			on := strings.Count(conf, "\n        http2 on;\n")
			if tc.directive && (listenHTTP2 != 0 || on != servers) {
				t.Errorf("%d listen ... http2 and %d http2 on for %d HTTPS servers; want 0 and %d", listenHTTP2, on, servers, servers)
			}
			if !tc.directive && (listenHTTP2 != servers || on != 0) {
				t.Errorf("%d listen ... http2 and %d http2 on for %d HTTPS servers; want %d and 0", listenHTTP2, on, servers, servers)
			}
		})
	}
	// The form every version takes is what 1.22 gets: the same bytes.
	undetected, err := Render(m, goldenSettings)
	if err != nil {
		t.Fatal(err)
	}
	s := goldenSettings
	s.Nginx = debian
	old, err := Render(m, s)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(undetected.Bytes, old.Bytes) {
		t.Errorf("nginx 1.22.1 gets other bytes than an nginx not detected:\n%s", lineDiff(string(undetected.Bytes), string(old.Bytes)))
	}
}

// TestRenderLeavesOutBuiltInModules: a load_module of a module the nginx
// has built in stops it at start, so render leaves it out.
func TestRenderLeavesOutBuiltInModules(t *testing.T) {
	modules := []string{"/usr/share/nginx/modules/ndk_http_module.so", "/usr/share/nginx/modules/ngx_http_lua_module.so",
		"/usr/share/nginx/modules/ngx_stream_module.so", "/usr/share/nginx/modules/" + headersMoreModule}
	for _, tc := range []struct {
		name string
		n    Nginx
		want []string
	}{{"not detected", Nginx{}, modules}, {"debian", debian, modules}, {"openresty", openResty, nil}} {
		t.Run(tc.name, func(t *testing.T) {
			s := goldenSettings
			s.Nginx, s.LoadModules = tc.n, modules
			cfg, err := Render(model.Model{}, s)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, line := range strings.Split(string(cfg.Bytes), "\n") {
				if path, ok := strings.CutPrefix(line, "load_module "); ok {
					got = append(got, strings.Trim(path, `";`))
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("load_module lines %q, want %q", got, tc.want)
			}
		})
	}
	if got := openResty.LoadsBuiltIn(modules); !slices.Equal(got, modules) {
		t.Errorf("LoadsBuiltIn %q", got)
	}
}

// TestDetectNginx reads what the Lua status API reports of the nginx here
// (Debian's 1.22.1 with lua-nginx-module 0.10.23, or openresty) and checks
// it against `nginx -V`.
func TestDetectNginx(t *testing.T) {
	binary := nginxproc.Binary(t)
	prefix := nginxproc.TempPrefix(t)
	s := goldenSettings
	s.SharedDir, s.HTTPPort, s.HTTPSPort, s.ListenAddress = prefix, nginxproc.FreePort(t), nginxproc.FreePort(t), "127.0.0.1"
	s.LoadModules, s.WorkerProcesses = nginxproc.DebianLoadModules(), "1"
	writePrefix(t, prefix, model.Model{}, s)
	n := nginxproc.Start(t, prefix)
	resp, err := n.API().Get("http://restysync/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var st luaapi.Status
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("GET /status answered %s: %v", body, err)
	}
	found := NginxFromStatus(st.NginxVersion, st.LuaVersion, st.Configure)
	t.Logf("%s, built in: %v; configure: %s", found, found.BuiltIn, st.Configure)
	v := nginxVersionOutput(t, binary)
	if !found.Detected() || !strings.Contains(v, "nginx/"+found.Version+"\n") && !strings.Contains(v, "openresty/") {
		t.Errorf("detected %s; %s -V says %s", found, binary, v)
	}
	if found.LuaVersion == "" || !strings.HasPrefix(found.LuaVersion, "0.10.") {
		t.Errorf("lua-nginx-module %q, want 0.10.x", found.LuaVersion)
	}
	// Each module the report says is built in is one `nginx -V` says is
	// (the report of a dynamic Lua module may name fewer).
	fromBinary := BuiltInModules(v[strings.Index(v, "configure arguments:")+len("configure arguments:"):])
	for _, m := range found.BuiltIn {
		if !slices.Contains(fromBinary, m) {
			t.Errorf("%s: reported built in, not in %s -V (%v)", m, binary, fromBinary)
		}
	}
	if !found.Has("http_v2") {
		t.Errorf("http_v2 is not built in: %v", found.BuiltIn)
	}
}

// nginxVersionOutput is what `binary -V` prints.
func nginxVersionOutput(t *testing.T, binary string) string {
	t.Helper()
	out, err := exec.Command(binary, "-V").CombinedOutput()
	if err != nil {
		t.Fatalf("%s -V: %v\n%s", binary, err, out)
	}
	return string(out)
}

// TestSnippetHeadersMoreNative: with the headers-more module, snippets'
// more_set_headers and more_clear_headers are written as themselves, and
// Debian's nginx with its dynamic module takes them.
func TestSnippetHeadersMoreNative(t *testing.T) {
	nginxproc.Binary(t)
	l := loc("/", model.PathPrefix, "ns/web:80")
	l.Snippet = &model.SnippetSettings{
		AlwaysHeaders: "X-Frame-Options: DENY",
		SetHeaders:    "Server: edge\nX-Request-ID: ${restysync_request_id}-edge",
		HideHeaders:   "Server,X-Request-ID,X-Powered-By",
		ClearHeaders:  "X-Powered-By",
		HeadersMore:   true,
	}
	m := model.Model{Servers: model.ListOf(&model.Server{Host: "app.example.com", Locations: []model.Location{l}})}
	prefix := nginxproc.TempPrefix(t)
	s := Settings{SharedDir: prefix, HTTPPort: 18080, HTTPSPort: 18443, ListenAddress: "127.0.0.1", WorkerProcesses: "1",
		LoadModules: append(nginxproc.DebianLoadModules(), nginxproc.HeadersMoreLoadModules(t)...)}
	cfg := writePrefix(t, prefix, m, s)
	out, err := nginxproc.Test(t, prefix)
	if err != nil {
		t.Fatalf("%v\n%s", err, cfg.Bytes)
	}
	checkNoWarnings(t, out)
	conf := string(cfg.Bytes)
	for _, want := range []string{
		`            add_header "Strict-Transport-Security" "${restysync_hsts}" always;
            add_header "X-Frame-Options" "DENY" always;
            more_set_headers "Server: edge";
            more_set_headers "X-Request-ID: ${restysync_request_id}-edge";
            more_clear_headers "X-Powered-By";`,
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("nginx.conf lacks\n%s\n\n%s", want, conf)
		}
	}
	if strings.Contains(conf, `add_header "X-Request-ID"`) {
		t.Error("more_set_headers X-Request-ID and an add_header of it: two headers")
	}
}
