package freeport

import (
	"net"
	"strconv"
	"testing"
)

// Pick gives distinct ports below the ephemeral range that can be bound.
func TestPick(t *testing.T) {
	seen := map[int]bool{}
	for range 50 {
		port, err := Pick()
		if err != nil {
			t.Fatal(err)
		}
		if seen[port] || port < low || port >= ephemeralStart() {
			t.Fatalf("port %d: repeated or outside [%d, %d)", port, low, ephemeralStart())
		}
		seen[port] = true
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("port %d cannot be bound: %v", port, err)
		}
		l.Close()
	}
}
