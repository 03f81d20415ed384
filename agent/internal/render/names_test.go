package render

import (
	"regexp"
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/model"
)

// collideNames makes every name hashName gives with prefix the same until
// t ends: the seam through which a test forces a hash collision.
func collideNames(t *testing.T, prefix string) {
	digest := nameDigest
	t.Cleanup(func() { nameDigest = digest })
	nameDigest = func(parts []string) string {
		if parts[0] == prefix {
			return strings.Repeat("c", nameDigits)
		}
		return digest(parts)
	}
}

// Every shared object render names by a hash (issue 25: a tenant who finds
// settings whose name is another tenant's object would take it) has a
// 128-bit name, and two different objects under one name fail the render
// as an internal error, whichever kind they are; the same object reached
// from two Ingresses is still declared once.
func TestNameCollisionIsAnError(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		// a and b are the settings of two tenants' locations whose
		// objects of this kind differ.
		a, b func(*model.Location)
	}{
		{profilePrefix,
			func(l *model.Location) { own(&l.Proxy).BodySize = "1m" },
			func(l *model.Location) { own(&l.Proxy).BodySize = "2m" }},
		{"@restysync_error_",
			func(l *model.Location) {
				own(&l.Access).Errors = model.CustomErrors{Codes: "404", Backend: "tenant-a/errors:80"}
			},
			func(l *model.Location) {
				own(&l.Access).Errors = model.CustomErrors{Codes: "404", Backend: "tenant-b/errors:80"}
			}},
		{authPrefix,
			func(l *model.Location) {
				own(&l.Access).ExternalAuth = model.ExternalAuth{URL: "http://auth.tenant-a.test/check"}
			},
			func(l *model.Location) {
				own(&l.Access).ExternalAuth = model.ExternalAuth{URL: "http://auth.tenant-b.test/check"}
			}},
		{"@restysync_signin_",
			func(l *model.Location) {
				own(&l.Access).ExternalAuth = model.ExternalAuth{URL: "http://auth.test/check", Signin: "https://a.test/login"}
			},
			func(l *model.Location) {
				own(&l.Access).ExternalAuth = model.ExternalAuth{URL: "http://auth.test/check", Signin: "https://b.test/login"}
			}},
		{defaultUpstream + "_tls_",
			func(l *model.Location) {
				l.Protocol, own(&l.Proxy).SSL = model.ProtocolHTTPS, model.ProxySSL{Protocols: "TLSv1.3"}
			},
			func(l *model.Location) {
				l.Protocol, own(&l.Proxy).SSL = model.ProtocolHTTPS, model.ProxySSL{Protocols: "TLSv1.2"}
			}},
		{"restysync_req_",
			func(l *model.Location) { own(&l.Access).RateLimit = model.RateLimit{RPS: 1} },
			func(l *model.Location) { own(&l.Access).RateLimit = model.RateLimit{RPS: 2} }},
		{"restysync_conn_",
			func(l *model.Location) {
				own(&l.Access).RateLimit = model.RateLimit{Connections: 1, Exempt: "10.0.0.0/8"}
			},
			func(l *model.Location) {
				own(&l.Access).RateLimit = model.RateLimit{Connections: 1, Exempt: "192.168.0.0/16"}
			}},
		{"restysync_limit_key_",
			func(l *model.Location) { own(&l.Access).RateLimit = model.RateLimit{RPS: 1, Exempt: "10.0.0.0/8"} },
			func(l *model.Location) { own(&l.Access).RateLimit = model.RateLimit{RPS: 1, Exempt: "192.168.0.0/16"} }},
		{"restysync_limit_exempt_",
			func(l *model.Location) { own(&l.Access).RateLimit = model.RateLimit{RPS: 1, Exempt: "10.0.0.0/8"} },
			func(l *model.Location) { own(&l.Access).RateLimit = model.RateLimit{RPS: 1, Exempt: "192.168.0.0/16"} }},
	} {
		t.Run(tc.prefix, func(t *testing.T) {
			tenants := func(a, b func(*model.Location)) model.Model {
				la, lb := loc("/", model.PathPrefix, "tenant-a/app:80"), loc("/", model.PathPrefix, "tenant-a/app:80")
				la.Ingress, lb.Ingress = "tenant-a/app", "tenant-b/app"
				a(&la)
				b(&lb)
				return model.Model{Servers: model.ListOf(
					&model.Server{Host: "a.test", Locations: []model.Location{la}},
					&model.Server{Host: "b.test", Locations: []model.Location{lb}},
				)}
			}
			cfg, _, err := Build(tenants(tc.a, tc.b), goldenSettings)
			if err != nil {
				t.Fatal(err)
			}
			names := regexp.MustCompile(regexp.QuoteMeta(tc.prefix)+`[0-9a-f]+`).FindAllString(string(cfg.Bytes), -1)
			if len(names) == 0 {
				t.Fatalf("nginx.conf names nothing %s...", tc.prefix)
			}
			for _, name := range names {
				if len(name) != len(tc.prefix)+nameDigits {
					t.Errorf("%s: want %s and %d hex digits", name, tc.prefix, nameDigits)
				}
			}

			collideNames(t, tc.prefix)
			if _, _, err := Build(tenants(tc.a, tc.a), goldenSettings); err != nil {
				t.Errorf("one object shared by two Ingresses: %v", err)
			}
			_, _, err = Build(tenants(tc.a, tc.b), goldenSettings)
			want := `internal error: path "/" of tenant-a/app and path "/" of tenant-b/app: two different objects are named ` +
				tc.prefix + strings.Repeat("c", nameDigits)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("two objects under one name: error %v, want %q", err, want)
			}
		})
	}
}

// A profile kept from an earlier config collides like a new one, and
// Routes alone, which names profiles without rendering nginx.conf, finds
// a collision too.
func TestProfileNameCollision(t *testing.T) {
	two := func(a, b string) model.Model {
		la, lb := loc("/", model.PathPrefix, "tenant-a/app:80"), loc("/", model.PathPrefix, "tenant-b/app:80")
		own(&la.Proxy).BodySize, own(&lb.Proxy).BodySize = a, b
		return model.Model{Servers: model.ListOf(
			&model.Server{Host: "a.test", Locations: []model.Location{la}},
			&model.Server{Host: "b.test", Locations: []model.Location{lb}},
		)}
	}
	cfg, err := Render(two("1m", "2m"), goldenSettings)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Profiles) != 2 {
		t.Fatalf("profiles %+v, want 2", cfg.Profiles)
	}
	collideNames(t, profilePrefix)
	want := "two different objects are named " + profilePrefix
	if _, err := Routes(two("1m", "2m"), goldenSettings); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Routes: error %v, want %q", err, want)
	}
	kept := Profile{Name: hashName(profilePrefix, cfg.Profiles[0].Body+" "), Body: cfg.Profiles[0].Body + " "}
	if _, err := Render(two("1m", "1m"), goldenSettings, kept); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Render with a kept profile: error %v, want %q", err, want)
	}
}
