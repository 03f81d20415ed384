package render

// ModSecurity (model.ModSecurity): a location that runs it gets, in its
// profile,
//
//	modsecurity on;
//	modsecurity_rules "SecRuleEngine On";             (--modsecurity-rule-engine, when set)
//	modsecurity_rules_file "/etc/nginx/modsecurity.conf";
//	modsecurity_rules "Include /etc/modsecurity/crs/crs-setup.conf";   (and the rest of the CRS, with CoreRules)
//	modsecurity_transaction_id "${request_id}";       (with a TransactionID)
//
// Everything is in the profile, nothing in the http block, so a profile's
// body means the same in every config it is kept in (profiles.go). The
// rule engine comes first on purpose: libmodsecurity (3.0.9) keeps the
// first SecRuleEngine a location's rules set reads and ignores later ones,
// so it must come before the recommended file's own (DetectionOnly in
// Debian's and in ingress-nginx's). Each location with the Core Rule Set
// parses it on its own (about 17 MB and 40 ms of each reload per profile,
// measured with Debian's 3.3.4): profiles are shared by every location with
// the same settings, so that is per distinct setting, where ingress-nginx
// paid it per location.

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"

	"github.com/restysync/restysync/agent/internal/model"
)

// ModSecurityModule is the file name of the ModSecurity module; a
// Settings.LoadModules entry of that name loads it.
const ModSecurityModule = "ngx_http_modsecurity_module.so"

// Where Debian's packages put ModSecurity's files: libnginx-mod-http-modsecurity
// (the module and its recommended configuration, SecRuleEngine
// DetectionOnly, with its audit log in /var/log/nginx) and modsecurity-crs
// (the OWASP Core Rule Set 3.3.4). Debian's own loader of the rule set,
// /usr/share/modsecurity-crs/owasp-crs.load, is for Apache: libmodsecurity
// refuses its IncludeOptional, so the files are named one by one.
const (
	DebianModSecurityModule = "/usr/share/nginx/modules/" + ModSecurityModule
	DefaultModSecurityRules = "/etc/nginx/modsecurity.conf"
)

// DefaultModSecurityCoreRules are the files of Debian's modsecurity-crs,
// in the order its loader includes them.
var DefaultModSecurityCoreRules = []string{
	"/etc/modsecurity/crs/crs-setup.conf",
	"/etc/modsecurity/crs/REQUEST-900-EXCLUSION-RULES-BEFORE-CRS.conf",
	"/usr/share/modsecurity-crs/rules/*.conf",
	"/etc/modsecurity/crs/RESPONSE-999-EXCLUSION-RULES-AFTER-CRS.conf",
}

// ModSecurityRuleEngines are the values of ModSecurity.RuleEngine besides
// "" (the rules file's own).
var ModSecurityRuleEngines = []string{"On", "DetectionOnly", "Off"}

// ModSecurity are the agent's settings of the ModSecurity module.
type ModSecurity struct {
	// BuiltIn says nginx has the module without a load_module line
	// (--modsecurity-built-in); otherwise a LoadModules entry named
	// ModSecurityModule loads it. Default false.
	BuiltIn bool
	// Rules is ModSecurity's recommended configuration, the first rules
	// file of every location that runs it (--modsecurity-rules; default
	// DefaultModSecurityRules, Debian's). An absolute path.
	Rules string
	// CoreRules are the files of the OWASP Core Rule Set, in the order
	// they are included, each an absolute path that may end in a "*"
	// pattern (--modsecurity-crs; default DefaultModSecurityCoreRules,
	// Debian's modsecurity-crs).
	CoreRules []string
	// RuleEngine, when not "", is the SecRuleEngine of every location
	// that runs ModSecurity, over the rules file's: "On" blocks what the
	// rules detect (ingress-nginx users set it with a modsecurity-snippet,
	// which is refused here), "DetectionOnly" only logs, "Off"
	// (--modsecurity-rule-engine; default "": the file's, DetectionOnly in
	// Debian's and in ingress-nginx's).
	RuleEngine string
	// Enable and EnableCoreRules run ModSecurity, and the Core Rule Set,
	// for every Ingress that does not turn it off (ConfigMap keys
	// enable-modsecurity and enable-owasp-modsecurity-crs; default false).
	// The model applies them, location by location.
	Enable          bool
	EnableCoreRules bool
}

// ModSecurityLoaded says whether nginx has the ModSecurity module: built
// in, or loaded by a LoadModules entry.
func (s Settings) ModSecurityLoaded() bool {
	return s.ModSecurity.BuiltIn || slices.ContainsFunc(s.LoadModules, func(m string) bool {
		return filepath.Base(m) == ModSecurityModule
	})
}

// ModSecurityGlobal is what model.Build needs to know of s
// (model.Snapshot.ModSecurity).
func (s Settings) ModSecurityGlobal() model.ModSecurityGlobal {
	return model.ModSecurityGlobal{Loaded: s.ModSecurityLoaded(), Enabled: s.ModSecurity.Enable, CoreRules: s.ModSecurity.EnableCoreRules}
}

// modSecurityLast returns modules with the ModSecurity module moved after
// the others. libmodsecurity (Debian's 3.0.9) links Lua 5.3, and nginx
// loads modules with RTLD_GLOBAL: loaded before the Lua module, its Lua
// 5.3 takes the place of LuaJIT's functions, and nginx's master aborts at
// start ("PANIC: unprotected error in call to Lua API (attempt to index a
// nil value)"), though nginx -t passes.
func modSecurityLast(modules []string) []string {
	out := make([]string, 0, len(modules))
	var last []string
	for _, m := range modules {
		if filepath.Base(m) == ModSecurityModule {
			last = append(last, m)
		} else {
			out = append(out, m)
		}
	}
	return append(out, last...)
}

// modSecurityPath is a rules file or pattern ModSecurity reads: an
// absolute path of characters that mean nothing to nginx's quoting nor to
// ModSecurity's Include (no space, quote, "$" or "\"), "*" for patterns.
var modSecurityPath = regexp.MustCompile(`^/[A-Za-z0-9._/+@*-]+$`)

// maxModSecurityPath bounds a rules file's path.
const maxModSecurityPath = 1024

// CheckModSecurityPath returns why path cannot be a rules file or pattern,
// or nil.
func CheckModSecurityPath(path string) error {
	if len(path) > maxModSecurityPath || !modSecurityPath.MatchString(path) || filepath.Clean(path) != path {
		return fmt.Errorf("%q: want a clean absolute path of letters, digits and . _ / + @ * - (at most %d bytes)", path, maxModSecurityPath)
	}
	return nil
}

// modSecurityFiles returns the rules file and the Core Rule Set of m,
// with the defaults for the unset ones.
func modSecurityFiles(m ModSecurity) (string, []string) {
	rules, crs := m.Rules, m.CoreRules
	if rules == "" {
		rules = DefaultModSecurityRules
	}
	if crs == nil {
		crs = DefaultModSecurityCoreRules
	}
	return rules, crs
}

func checkModSecurity(m ModSecurity) error {
	rules, crs := modSecurityFiles(m)
	if err := CheckModSecurityPath(rules); err != nil {
		return fmt.Errorf("rules file %w", err)
	}
	if len(crs) == 0 {
		return errors.New("core rule set: no file")
	}
	for _, f := range crs {
		if err := CheckModSecurityPath(f); err != nil {
			return fmt.Errorf("core rule set file %w", err)
		}
	}
	if m.RuleEngine != "" && !slices.Contains(ModSecurityRuleEngines, m.RuleEngine) {
		return fmt.Errorf("rule engine %q: want On, DetectionOnly or Off", m.RuleEngine)
	}
	return nil
}

// modSecurityView is what the template's "modsecurity" section prints
// for one location.
type modSecurityView struct {
	// EngineRule is "SecRuleEngine VALUE", or "" to keep RulesFile's.
	EngineRule string
	RulesFile  string
	// Includes are "Include PATH" lines, one per Core Rule Set file.
	Includes      []string
	TransactionID string // "${name}" variables and literal text; "" for none
}

// addModSecurity gives each location of views that runs ModSecurity its
// view. When nginx has no module, such a location fails closed (503), as
// the model makes it with the same settings: never served without the
// firewall it asks for, nor written with directives nginx would reject.
func addModSecurity(views []serverView, s Settings) error {
	for i := range views {
		for j := range views[i].Locations {
			lv := &views[i].Locations[j]
			waf := lv.source.AccessSettings().WAF
			if !waf.Enabled || lv.Access.Denied {
				continue
			}
			if !s.ModSecurityLoaded() {
				lv.Access = accessView{Denied: true}
				continue
			}
			v, err := newModSecurityView(waf, s.ModSecurity)
			if err != nil {
				return fmt.Errorf("server %q: path %q of %s: ModSecurity: %w", views[i].Host, lv.source.Path, lv.source.Ingress, err)
			}
			lv.Access.WAF = v
		}
	}
	return nil
}

func newModSecurityView(waf model.ModSecurity, m ModSecurity) (*modSecurityView, error) {
	rules, crs := modSecurityFiles(m)
	v := &modSecurityView{RulesFile: rules}
	if m.RuleEngine != "" {
		v.EngineRule = "SecRuleEngine " + m.RuleEngine
	}
	if waf.CoreRules {
		for _, f := range crs {
			v.Includes = append(v.Includes, "Include "+f)
		}
	}
	if waf.TransactionID != "" {
		if _, err := QuoteWithVariables(waf.TransactionID); err != nil {
			return nil, fmt.Errorf("transaction id: %w", err)
		}
		v.TransactionID = waf.TransactionID
	}
	return v, nil
}
