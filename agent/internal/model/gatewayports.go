package model

import (
	"fmt"
	"net/netip"
	"slices"
)

// The ports the ingress pod holds (model stage): a Gateway listener on
// one of them, where it would take the Ingresses' connections or could
// not be bound, is not accepted (PortUnavailable), with a Problem on its
// Gateway or ListenerSet, and the rest keeps serving. render refuses the
// listeners nginx cannot bind too (render/gateway.go, stream.go), but a
// refusal there fails the whole render, every tenant's configuration
// with it; so the model, which can name the object, refuses them first.

// IngressPorts is where nginx's own servers listen: Address is
// --listen-address ("" every address), then the HTTP, HTTPS and status
// ports (Status 0: none). The zero value holds no port.
type IngressPorts struct {
	Address             string
	HTTP, HTTPS, Status int32
}

// heldBy returns why listener l of a Gateway on address cannot have its
// port, or "". nginx's Ingress servers listen on their ports of every
// address when Address is "": a Gateway listener on one of those ports
// there would take the Ingresses' connections to that address (nginx
// picks the server of the most specific address; in the chart the pool
// is the pod's own IP, where every Ingress request arrives), or could
// not be bound at all (a TLS listener is the stream module's, as is the
// HTTPS port with ssl-passthrough). On another address the port is
// free. The agent's admin ports (those of podPorts, Targets.PodPorts,
// that are not nginx's) are refused on any address: the model does not
// know the admin server's.
func (ports IngressPorts) heldBy(l *listenerState, address string, podPorts []int32) string {
	if a, err := netip.ParseAddr(ports.Address); err == nil {
		ports.Address = a.String() // as the pool's addresses are written
	}
	port := l.spec.Port
	own := []int32{ports.HTTP, ports.HTTPS}
	if ports.Status != 0 {
		own = append(own, ports.Status)
	}
	switch {
	case slices.Contains(own, port) && (ports.Address == "" || ports.Address == address):
		return fmt.Sprintf("port %d is where nginx serves the Ingresses on %s; a listener there would take their connections", port, ports.where())
	case slices.Contains(podPorts, port) && !slices.Contains(own, port):
		return fmt.Sprintf("port %d is one the ingress pod serves itself on (nginx's or the agent's admin server)", port)
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
