// Package dnsserver is a test helper: a real DNS server on loopback (UDP)
// that answers A and AAAA queries from records the test sets, as Docker's
// embedded DNS answers for compose services. It stands in for the resolver
// in tests of FQDN EndpointSlices.
package dnsserver

import (
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// Server answers for the names given to Set; other names get NXDOMAIN.
type Server struct {
	// Addr is the server's "127.0.0.1:port".
	Addr string

	conn    net.PacketConn
	mu      sync.Mutex
	records map[string][]netip.Addr
}

// Start listens on a free UDP port of 127.0.0.1 until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("dnsserver: %v", err)
	}
	s := &Server{Addr: conn.LocalAddr().String(), conn: conn, records: map[string][]netip.Addr{}}
	t.Cleanup(func() { conn.Close() })
	go s.serve()
	return s
}

// Set makes name resolve to addrs (none: NXDOMAIN).
func (s *Server) Set(name string, addrs ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := canonical(name)
	s.records[key] = nil
	for _, a := range addrs {
		s.records[key] = append(s.records[key], netip.MustParseAddr(a))
	}
}

func canonical(name string) string { return strings.ToLower(strings.TrimSuffix(name, ".")) + "." }

func (s *Server) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := s.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		if reply, ok := s.answer(buf[:n]); ok {
			s.conn.WriteTo(reply, from)
		}
	}
}

func (s *Server) answer(query []byte) ([]byte, bool) {
	var p dnsmessage.Parser
	header, err := p.Start(query)
	if err != nil {
		return nil, false
	}
	q, err := p.Question()
	if err != nil {
		return nil, false
	}
	s.mu.Lock()
	addrs, known := s.records[canonical(q.Name.String())]
	s.mu.Unlock()

	rcode := dnsmessage.RCodeSuccess
	if !known || len(addrs) == 0 {
		rcode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: header.ID, Response: true, Authoritative: true, RCode: rcode})
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(q) != nil || b.StartAnswers() != nil {
		return nil, false
	}
	rh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 1}
	for _, a := range addrs {
		switch {
		case q.Type == dnsmessage.TypeA && a.Is4():
			if b.AResource(rh, dnsmessage.AResource{A: a.As4()}) != nil {
				return nil, false
			}
		case q.Type == dnsmessage.TypeAAAA && a.Is6():
			if b.AAAAResource(rh, dnsmessage.AAAAResource{AAAA: a.As16()}) != nil {
				return nil, false
			}
		}
	}
	out, err := b.Finish()
	return out, err == nil
}
