// Package packaging holds no code: its tests validate how restysync is
// installed (the agent's Dockerfile, the Helm chart in charts/restysync, the
// sidecar patch in examples/kubernetes/sidecar and its overlay
// examples/kubernetes/sidecar-stream) against the real agent binary and a
// real kube-apiserver. It is a separate module so that helm and kustomize
// stay out of the agent's go.mod.
package packaging
