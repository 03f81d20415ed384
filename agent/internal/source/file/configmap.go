package file

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/restysync/restysync/agent/internal/source"
)

// WithConfigMap names the agent's ConfigMap, "namespace/name": Snapshot
// returns the ConfigMap of that name in the folder as model.Snapshot's
// ConfigMap (default "": none).
func WithConfigMap(namespacedName string) Option {
	return func(s *Source) { s.configMap = namespacedName }
}

// WithServicesConfigMaps names ingress-nginx's ConfigMaps of TCP and UDP
// services, "namespace/name" each ("": none): Snapshot returns those in
// the folder as model.Snapshot's TCPServices and UDPServices.
func WithServicesConfigMaps(tcp, udp string) Option {
	return func(s *Source) { s.tcpServices, s.udpServices = tcp, udp }
}

// namedConfigMap returns the ConfigMap "namespace/name" of v, or nil.
func namedConfigMap(v *view, namespacedName string) *corev1.ConfigMap {
	if namespacedName == "" {
		return nil
	}
	namespace, name, _ := strings.Cut(namespacedName, "/")
	cm, _ := source.FindNamedIn(v.configMaps, namespace, name)
	return cm
}
