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

// A port whose file another process holds locked is not given: flock
// conflicts between open files, so a second open here stands in for it.
func TestPickSkipsPortsHeldElsewhere(t *testing.T) {
	dir := t.TempDir()
	held, ok := reserve(dir, 12345)
	if !ok {
		t.Fatal("could not reserve port 12345 in an empty folder")
	}
	if again, ok := reserve(dir, 12345); ok {
		again.Close()
		t.Fatal("port 12345 reserved twice while held")
	}
	held.Close()
	again, ok := reserve(dir, 12345)
	if !ok {
		t.Fatal("port 12345 not free after its holder let go")
	}
	again.Close()
}
