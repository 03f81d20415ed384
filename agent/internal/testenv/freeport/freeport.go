// Package freeport picks TCP ports on 127.0.0.1 for the servers the tests
// start (nginx, etcd, kube-apiserver): test support, not a pipeline stage.
//
// A port from the kernel's ephemeral range (ip_local_port_range) that was
// free a moment ago can become the source port of any outgoing connection
// before the server binds it, and nginx then fails with "Address already in
// use"; with tests opening hundreds of connections that happened. The ports
// are therefore picked below that range, where no outgoing connection takes
// them, and never twice on the machine while the process that got it runs:
// test packages run in parallel processes, and a port one of them picked but
// had not yet bound (an agent writes nginx.conf long before nginx starts) was
// picked again by another. Each port given is held by an flock on a file
// named after it, which the kernel drops when the process ends.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// low is the first port Pick considers.
const low = 10000

var given = struct {
	sync.Mutex
	ports map[int]*os.File // the locked file that reserves each port
}{ports: map[int]*os.File{}}

// Pick returns a TCP port on 127.0.0.1 that was free a moment ago, below
// the ephemeral range, not returned before by this process nor held by
// another running process that uses this package.
func Pick() (int, error) {
	high := ephemeralStart() - 1
	dir := filepath.Join(os.TempDir(), "restysync-freeport")
	if err := os.MkdirAll(dir, 0o1777); err != nil {
		return 0, fmt.Errorf("freeport: %w", err)
	}
	given.Lock()
	defer given.Unlock()
	for range 200 {
		port := low + rand.IntN(high-low+1)
		if given.ports[port] != nil {
			continue
		}
		lock, ok := reserve(dir, port)
		if !ok {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			lock.Close()
			continue
		}
		l.Close()
		given.ports[port] = lock
		return port, nil
	}
	return 0, fmt.Errorf("no free port on 127.0.0.1 between %d and %d after 200 tries", low, high)
}

// reserve takes an exclusive, non-blocking flock on dir/<port>; it fails
// while another process holds the port.
func reserve(dir string, port int) (*os.File, bool) {
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, false
	}
	return f, true
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
