package render

import (
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// wafModel has three locations: ModSecurity alone, with the Core Rule Set
// and a transaction id, and one that fails closed.
func wafModel() model.Model {
	plain := loc("/plain", model.PathPrefix, "default/web:80")
	waf := loc("/waf", model.PathPrefix, "default/web:80")
	own(&waf.Access).WAF = model.ModSecurity{Enabled: true}
	crs := loc("/crs", model.PathPrefix, "default/web:80")
	own(&crs.Access).WAF = model.ModSecurity{Enabled: true, CoreRules: true, TransactionID: "${request_id}-${host}"}
	denied := loc("/denied", model.PathPrefix, "default/web:80")
	own(&denied.Access).Denied = "ModSecurity is not loaded"
	return model.Model{Servers: model.ListOf(&model.Server{Host: "app.test", Locations: []model.Location{crs, denied, plain, waf}})}
}

func wafSettings() Settings {
	s := goldenSettings
	s.LoadModules = []string{"/usr/share/nginx/modules/ngx_http_modsecurity_module.so"}
	return s
}

// profileBodies returns the bodies of cfg's profiles that run ModSecurity.
func profileBodies(cfg Config) []string {
	var out []string
	for _, p := range cfg.Profiles {
		if strings.Contains(p.Body, "modsecurity on;") {
			out = append(out, strings.TrimSpace(p.Body))
		}
	}
	return out
}

func TestRenderModSecurity(t *testing.T) {
	const (
		base = "modsecurity on;\n            modsecurity_rules_file \"/etc/nginx/modsecurity.conf\";"
		crs  = "\n            modsecurity_rules \"Include /etc/modsecurity/crs/crs-setup.conf\";" +
			"\n            modsecurity_rules \"Include /etc/modsecurity/crs/REQUEST-900-EXCLUSION-RULES-BEFORE-CRS.conf\";" +
			"\n            modsecurity_rules \"Include /usr/share/modsecurity-crs/rules/*.conf\";" +
			"\n            modsecurity_rules \"Include /etc/modsecurity/crs/RESPONSE-999-EXCLUSION-RULES-AFTER-CRS.conf\";" +
			"\n            modsecurity_transaction_id \"${request_id}-${host}\";"
	)
	t.Run("defaults: Debian's files, the file's rule engine", func(t *testing.T) {
		cfg, err := Render(wafModel(), wafSettings())
		if err != nil {
			t.Fatal(err)
		}
		bodies := profileBodies(cfg)
		if len(bodies) != 2 {
			t.Fatalf("profiles with ModSecurity: %q, want 2", bodies)
		}
		for _, want := range []string{base + crs, base} {
			found := false
			for _, b := range bodies {
				found = found || strings.HasPrefix(b, want+"\n")
			}
			if !found {
				t.Errorf("no profile starts with\n%s\nin\n%s", want, strings.Join(bodies, "\n---\n"))
			}
		}
		// Nothing outside the profiles but the load_module line.
		conf := strings.Replace(string(cfg.Bytes), `load_module "/usr/share/nginx/modules/ngx_http_modsecurity_module.so";`, "", 1)
		if n, inBodies := strings.Count(conf, "modsecurity"), strings.Count(strings.Join(bodies, ""), "modsecurity"); n != inBodies {
			t.Errorf("nginx.conf names modsecurity %d times, its profiles' bodies %d times", n, inBodies)
		}
	})
	t.Run("the rule engine comes before the rules file", func(t *testing.T) {
		s := wafSettings()
		s.ModSecurity = ModSecurity{RuleEngine: "On", Rules: "/etc/waf/base.conf", CoreRules: []string{"/etc/waf/crs/*.conf"}}
		cfg, err := Render(wafModel(), s)
		if err != nil {
			t.Fatal(err)
		}
		want := "modsecurity on;\n            modsecurity_rules \"SecRuleEngine On\";\n            modsecurity_rules_file \"/etc/waf/base.conf\";" +
			"\n            modsecurity_rules \"Include /etc/waf/crs/*.conf\";\n            modsecurity_transaction_id \"${request_id}-${host}\";"
		if !strings.Contains(string(cfg.Bytes), want) {
			t.Errorf("nginx.conf lacks\n%s\n%s", want, cfg.Bytes)
		}
	})
	t.Run("built in", func(t *testing.T) {
		s := goldenSettings
		s.ModSecurity.BuiltIn = true
		if _, err := Render(wafModel(), s); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("no module: fails closed, never a config nginx rejects", func(t *testing.T) {
		cfg, routes, err := Build(wafModel(), goldenSettings)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(cfg.Bytes), "modsecurity") {
			t.Errorf("nginx.conf names modsecurity without the module:\n%s", cfg.Bytes)
		}
		for _, l := range routes[len(routes)-1].Locations {
			body := ""
			for _, p := range cfg.Profiles {
				if p.Name == l.Profile {
					body = p.Body
				}
			}
			if !strings.HasPrefix(l.Path, "/plain") && !strings.Contains(body, "return 503;") {
				t.Errorf("location %q: profile %q does not fail closed: %q", l.Path, l.Profile, body)
			}
		}
	})
}

func TestRenderModSecuritySettingsErrors(t *testing.T) {
	for _, m := range []ModSecurity{
		{Rules: "modsecurity.conf"},
		{Rules: "/etc/nginx/modsecurity.conf\"; return 200; #"},
		{Rules: "/etc/nginx/../modsecurity.conf"},
		{Rules: "/etc/$host.conf"},
		{CoreRules: []string{}},
		{CoreRules: []string{"/a b.conf"}},
		{CoreRules: []string{"/ok.conf", "relative/*.conf"}},
		{RuleEngine: "on"},
		{RuleEngine: "On\nSecRuleEngine Off"},
	} {
		s := goldenSettings
		s.ModSecurity = m
		if _, err := Render(model.Model{}, s); err == nil || !strings.Contains(err.Error(), "ModSecurity") {
			t.Errorf("%+v: err = %v, want a ModSecurity error", m, err)
		}
	}
}

// TestRenderModSecurityNginxAccepts runs nginx -t on the profiles of
// wafModel with Debian's module, its recommended configuration and the
// whole Core Rule Set, as the agent's defaults name them.
func TestRenderModSecurityNginxAccepts(t *testing.T) {
	m := nginxproc.ModSecurityModules(t)
	for _, engine := range []string{"", "On"} {
		t.Run("engine "+engine, func(t *testing.T) {
			prefix := nginxproc.TempPrefix(t)
			s := goldenSettings
			s.SharedDir = prefix
			s.LoadModules = append(nginxproc.DebianLoadModules(), m.LoadModules...)
			s.ModSecurity = ModSecurity{Rules: m.Rules, RuleEngine: engine}
			writePrefix(t, prefix, wafModel(), s)
			out, err := nginxproc.Test(t, prefix)
			if err != nil {
				t.Fatal(err)
			}
			checkNoWarnings(t, out)
		})
	}
}

// The ModSecurity module is loaded after the others, whatever the order
// of --load-module: loaded before the Lua module, its Lua 5.3 takes
// LuaJIT's place and nginx's master aborts at start.
func TestRenderModSecurityModuleLast(t *testing.T) {
	s := goldenSettings
	s.LoadModules = []string{"/m/ngx_http_modsecurity_module.so", "/m/ndk_http_module.so", "/m/ngx_http_lua_module.so"}
	cfg, err := Render(model.Model{}, s)
	if err != nil {
		t.Fatal(err)
	}
	want := "load_module \"/m/ndk_http_module.so\";\nload_module \"/m/ngx_http_lua_module.so\";\nload_module \"/m/ngx_http_modsecurity_module.so\";\n"
	if !strings.Contains(string(cfg.Bytes), want) {
		t.Errorf("nginx.conf does not load the modules as\n%s\n%s", want, cfg.Bytes)
	}
	if s.LoadModules[0] != "/m/ngx_http_modsecurity_module.so" {
		t.Error("Render changed its settings")
	}
}
