// Package freeport picks TCP ports on 127.0.0.1 for the servers the tests
// start (nginx, etcd, kube-apiserver): test support, not a pipeline stage.
//
// A port from the kernel's ephemeral range (ip_local_port_range) that was
// free a moment ago can become the source port of any outgoing connection
// before the server binds it, and nginx then fails with "Address already in
// use"; with tests opening hundreds of connections that happened. The ports
// are therefore picked below that range, where no outgoing connection takes
// them, and never twice in one process.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// low is the first port Pick considers.
const low = 10000

var given = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// Pick returns a TCP port on 127.0.0.1 that was free a moment ago, below
// the ephemeral range, not returned before by this process.
func Pick() (int, error) {
	high := ephemeralStart() - 1
	given.Lock()
	defer given.Unlock()
	for range 200 {
		port := low + rand.IntN(high-low+1)
		if given.ports[port] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		l.Close()
		given.ports[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("no free port on 127.0.0.1 between %d and %d after 200 tries", low, high)
}

// ephemeralStart is the first port of the kernel's ephemeral range, or
// 32768 (Linux's default) when it cannot be read or leaves too little room.
func ephemeralStart() int {
	raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	fields := strings.Fields(string(raw))
	if len(fields) != 2 {
		return 32768
	}
	start, err := strconv.Atoi(fields[0])
	if err != nil || start <= low+1000 {
		return 32768
	}
	return start
}
