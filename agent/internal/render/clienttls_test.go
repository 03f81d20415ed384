package render

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
	"github.com/restysync/restysync/agent/internal/testenv/testcert"
)

// clientTLSWildcardModel is tenant B's "*.test" that checks client
// certificates, among hosts of tenant A under it and elsewhere.
func clientTLSWildcardModel() model.Model {
	web := []model.Location{loc("/", model.PathPrefix, "tenant-a/web:80")}
	b := model.ClientTLS{CAFile: "auth/tenant-b_ca.0123456789ab.ca.crt", Verify: "on", Depth: 1}
	x := model.ClientTLS{CAFile: "auth/tenant-b_x.0123456789ab.ca.crt", Verify: "optional", Depth: 2}
	return model.Model{Servers: model.ListOf(
		&model.Server{Host: "*.a.test", HTTPS: true, Locations: web},
		&model.Server{Host: "*.test", HTTPS: true, ClientTLS: &b, Locations: []model.Location{loc("/", model.PathPrefix, "tenant-b/app:80")}},
		&model.Server{Host: "a.test", HTTPS: true, Locations: web},
		&model.Server{Host: "c.test", Locations: web},
		&model.Server{Host: "d.a.test", HTTPS: true, Locations: web},
		&model.Server{Host: "other.example", HTTPS: true, Aliases: []string{"alias.example", "alias.test"}, Locations: web},
		&model.Server{Host: strings.Repeat("l", 63) + ".test", HTTPS: true, Locations: web},
		&model.Server{Host: "test", WWWRedirect: "www.test", Locations: web},
		&model.Server{Host: "x.test", HTTPS: true, ClientTLS: &x, Aliases: []string{"x2.test"}, Locations: web},
		// Client certificates but no spec.tls: a server of its own all
		// the same (the default certificate), so that its HTTPS requests,
		// routed by its own locations, are checked.
		&model.Server{Host: "y.test", ClientTLS: &x, Locations: web},
	)}
}

var defaultServerName = regexp.MustCompile(`\n        server_name _([^;]*);`)

// B's client-TLS wildcard "*.test" takes no exact host of A: every name
// the router serves that its regex would match, and that has no
// client-TLS server of its own, is named in the default server, where an
// exact name beats the regex for SNI and Host alike. Names the regex does
// not match (other domains, two labels down, wildcards) are not named; a
// client-TLS host's alias is named in that host's server.
func TestRenderClientTLSWildcardLeavesExactHosts(t *testing.T) {
	cfg, err := Render(clientTLSWildcardModel(), goldenSettings)
	if err != nil {
		t.Fatal(err)
	}
	m := defaultServerName.FindSubmatch(cfg.Bytes)
	if m == nil {
		t.Fatal("no default server_name in nginx.conf")
	}
	got := strings.Fields(string(m[1]))
	want := []string{`"a.test"`, `"alias.test"`, `"c.test"`, `"` + strings.Repeat("l", 63) + `.test"`, `"www.test"`}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("default server_name _ %s, want _ %s", strings.Join(got, " "), strings.Join(want, " "))
	}
	// x.test's alias is checked with x.test, not named in the default server.
	for _, server := range []string{`server_name "~^[^.]+\.test$";`, `server_name "x.test" "x2.test";`, `server_name "y.test";`} {
		if !strings.Contains(string(cfg.Bytes), server) {
			t.Errorf("nginx.conf lacks %s", server)
		}
	}
	// 63+5 characters: a 64-byte bucket would not hold it.
	if !strings.Contains(string(cfg.Bytes), "server_names_hash_bucket_size 512;") {
		t.Error("server_names_hash_bucket_size is not sized for the longest name")
	}

	// Without a client-TLS wildcard the default server names no host.
	noWildcard := clientTLSWildcardModel()
	noWildcard.Servers.At(1).ClientTLS = nil
	cfg, err = Render(noWildcard, goldenSettings)
	if err != nil {
		t.Fatal(err)
	}
	if m := defaultServerName.FindSubmatch(cfg.Bytes); m == nil || len(m[1]) != 0 {
		t.Errorf("without a client-TLS wildcard: default server_name _%s", m[1])
	}
}

// TestRenderNginxAcceptsClientTLSWildcardOverManyHosts: 9,000 hosts under
// a client-TLS wildcard, one of them of the longest label, all named in the
// default server; nginx takes them without hash warnings.
func TestRenderNginxAcceptsClientTLSWildcardOverManyHosts(t *testing.T) {
	nginxproc.Binary(t)
	m := manyServers(10_000)
	m.Servers.At(0).Host = strings.Repeat("a", 63) + ".example.com"
	ca := "auth/tenant-b_ca.0123456789ab.ca.crt"
	m.Servers = model.ListOf(append(m.Servers.Slice(), &model.Server{Host: "*.example.com", HTTPS: true,
		ClientTLS: &model.ClientTLS{CAFile: ca, Verify: "on", Depth: 1},
		Locations: []model.Location{loc("/", model.PathPrefix, "tenant-b/app:80")}})...)
	prefix := nginxproc.TempPrefix(t)
	s := goldenSettings
	s.SharedDir = prefix
	s.LoadModules = nginxproc.DebianLoadModules()
	cfg := writePrefix(t, prefix, m, s)
	if n := strings.Count(defaultServerName.FindString(string(cfg.Bytes)), ".example.com\""); n != 9_000 {
		t.Errorf("the default server names %d hosts, want 9000", n)
	}
	pem, _ := testcert.New(t, 1, time.Now().Add(time.Hour), "ca.test")
	if err := os.MkdirAll(filepath.Join(prefix, "auth"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(prefix, ca), []byte(pem), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, err := nginxproc.Test(t, prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("nginx -t: %v", time.Since(start))
	checkNoWarnings(t, out)
}
