package source

import "github.com/restysync/restysync/agent/internal/model"

// The fast path's reads of an EndpointIndex, when nothing but EndpointSlices
// changed since the last full build: whether nginx.conf names a changed
// Service's endpoints (then the model is built and rendered whole), and
// the patch of the changed Services' backends (model.EndpointPatch).

// StreamUsesAny says whether a Service of changed has endpoints in
// nginx.conf (a stream backend).
func StreamUsesAny(st model.Stream, changed []ServiceKey) bool {
	for _, k := range changed {
		if st.UsesService(k.Namespace, k.Name) {
			return true
		}
	}
	return false
}

// PatchEndpoints resolves again, from index, the backends of the Services
// of changed in backends (sorted by name: model.ServiceBackends finds
// them). A Service with no backends there adds nothing.
func PatchEndpoints(index EndpointIndex, changed []ServiceKey, backends model.List[model.Backend], targets model.Targets) model.EndpointPatch {
	var patch model.EndpointPatch
	for _, k := range changed {
		positions := model.ServiceBackends(backends, k.Namespace, k.Name)
		if len(positions) == 0 {
			continue
		}
		svc, endpointSlices := index.ServiceEndpoints(k.Namespace, k.Name)
		patch.AddService(backends, positions, svc, endpointSlices, targets)
	}
	return patch
}
