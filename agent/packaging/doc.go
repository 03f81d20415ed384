// Package packaging holds no code: its tests validate how restysync is
// installed (the agent's Dockerfile, the Helm chart in charts/restysync and
// the sidecar patch in examples/kubernetes/sidecar) against the real agent
// binary and a real kube-apiserver. It is a separate module so that helm and
// kustomize stay out of the agent's go.mod.
package packaging
