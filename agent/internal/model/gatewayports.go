package model

import (
	"fmt"
	"net/netip"
	"slices"
)

// The ports nginx's own servers hold (model stage): a Gateway listener
// nginx cannot bind beside them is not accepted (PortUnavailable), with a
// Problem on its Gateway or ListenerSet, and the rest keeps serving.
// render refuses such a listener too (render/gateway.go, stream.go), but a
// refusal there fails the whole render, every tenant's configuration
// with it; so the model, which can name the object, refuses it first, by
// the same rules.

// IngressPorts is where nginx's own servers listen: Address is
// --listen-address ("" every address), then the HTTP, HTTPS and status
// ports (Status 0: none). The zero value holds no port.
type IngressPorts struct {
	Address             string
	HTTP, HTTPS, Status int32
}

// heldBy returns why nginx's own servers keep listener l of a Gateway on
// address from binding its port, or "". The http module serves a Gateway
// address beside the Ingress servers' port on every address, but not on
// their own address and port, nor on the HTTPS port that ssl-passthrough
// gives the stream module; a TLS listener is the stream module's, which
// cannot share a port with the http module on one address.
func (ports IngressPorts) heldBy(l *listenerState, address string, sslPassthrough bool) string {
	own := []int32{ports.HTTP, ports.HTTPS}
	if ports.Status != 0 {
		own = append(own, ports.Status)
	}
	if a, err := netip.ParseAddr(ports.Address); err == nil {
		ports.Address = a.String() // as the pool's addresses are written
	}
	port := l.spec.Port
	everyAddress := ports.Address == "" || ports.Address == address
	switch {
	case !slices.Contains(own, port):
		return ""
	case l.stream() && everyAddress:
		return fmt.Sprintf("port %d is where nginx serves the Ingresses on %s; a TLS listener cannot share it", port, ports.where())
	case ports.Address == address:
		return fmt.Sprintf("port %d on %s is where nginx serves the Ingresses", port, address)
	case sslPassthrough && port == ports.HTTPS && everyAddress:
		return fmt.Sprintf("port %d is held on %s by nginx's ssl-passthrough front (--enable-ssl-passthrough)", port, ports.where())
	}
	return ""
}

// where names the address nginx's own servers listen on.
func (ports IngressPorts) where() string {
	if ports.Address == "" {
		return "every address"
	}
	return ports.Address
}
