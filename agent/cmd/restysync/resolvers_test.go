package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestNginxResolvers(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "resolv.conf")
	os.WriteFile(conf, []byte("search svc.cluster.local\nnameserver 10.96.0.10\nnameserver fe80::1%eth0\nnameserver 2001:db8::53\noptions ndots:5\n"), 0o644)
	if got := nginxResolvers("", conf); !slices.Equal(got, []string{"10.96.0.10", "2001:db8::53"}) {
		t.Errorf("from resolv.conf: %v", got)
	}
	if got := nginxResolvers("[2001:db8::1]:5353", conf); !slices.Equal(got, []string{"[2001:db8::1]:5353"}) {
		t.Errorf("from --dns-server: %v", got)
	}
	if got := nginxResolvers("dns.example:53", conf); got != nil {
		t.Errorf("a name as --dns-server: %v, want none", got)
	}
	if got := nginxResolvers("", filepath.Join(t.TempDir(), "none")); got != nil {
		t.Errorf("no resolv.conf: %v", got)
	}
}
