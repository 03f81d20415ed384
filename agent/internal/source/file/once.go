package file

import "github.com/restysync/restysync/agent/internal/model"

// ReadBytes reads data, the manifests of one file named name (its path,
// or "stdin"), once, as Start reads each file of a folder: the same
// decoding, the same Problems, with no watch. restysync check and inspect
// read a single file or stdin with it; of opts, WithConfigMap,
// WithServicesConfigMaps, WithMaxFileSize and WithMaxDocuments apply.
func ReadBytes(name string, data []byte, opts ...Option) (model.Snapshot, []model.Problem) {
	s := New(name, opts...)
	state := &fileState{}
	if int64(len(data)) > s.maxFileSize {
		state.problems = []problem{{path: name, reason: s.tooLarge(int64(len(data))).Error()}}
	} else {
		state.docs, state.problems = decodeManifests(name, data, s.maxDocuments)
	}
	s.files[name] = state
	s.view = s.buildView()
	return s.Snapshot()
}
