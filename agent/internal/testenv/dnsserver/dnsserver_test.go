package dnsserver

import (
	"context"
	"net"
	"testing"
	"time"
)

func TestAnswers(t *testing.T) {
	s := Start(t)
	s.Set("web.demo.test", "127.0.0.61", "fd00::61")
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", s.Addr)
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addrs, err := r.LookupNetIP(ctx, "ip", "web.demo.test")
	if err != nil || len(addrs) != 2 {
		t.Fatalf("lookup: %v, %v", addrs, err)
	}
	if _, err := r.LookupNetIP(ctx, "ip", "nope.demo.test"); err == nil {
		t.Error("an unknown name resolved")
	}
}
