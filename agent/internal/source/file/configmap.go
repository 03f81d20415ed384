package file

import (
	corev1 "k8s.io/api/core/v1"
)

// WithConfigMap names the agent's ConfigMap, "namespace/name": Snapshot
// returns the ConfigMap of that name in the folder as model.Snapshot's
// ConfigMap (default "": none).
func WithConfigMap(namespacedName string) Option {
	return func(s *Source) { s.configMap = namespacedName }
}

// agentConfigMap returns the ConfigMap WithConfigMap named from v, or nil.
func (s *Source) agentConfigMap(v *view) *corev1.ConfigMap {
	if s.configMap == "" {
		return nil
	}
	for _, cm := range v.configMaps {
		if cm.Namespace+"/"+cm.Name == s.configMap {
			return cm
		}
	}
	return nil
}
