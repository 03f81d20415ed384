// Package conformance is `go tool task conformance`: the Gateway API
// conformance suite (sigs.k8s.io/gateway-api/conformance v1.6.3,
// profiles GATEWAY-HTTP, GATEWAY-GRPC and GATEWAY-TLS) run against the agent and a real nginx, on the
// smallest real cluster: the pinned kube-apiserver and etcd,
// kube-controller-manager (deployment, replicaset, endpointslice,
// garbagecollector and namespace controllers) and a node process that runs
// the suite's echo-basic pods in network namespaces (package kubenode).
//
// The pipeline under test is the agent's whole one: source → model →
// render → plan → apply, status beside it. The harness creates the
// GatewayClass and applies the v1.6.3 CRDs (the experimental channel, a
// superset of the standard one) server-side; the suite applies
// its base manifests and waits until every Gateway is Programmed and every
// pod Ready before its first test.
//
// The suite is part of `go tool task test` (`go test ./...`): every
// GATEWAY-HTTP, GATEWAY-GRPC and GATEWAY-TLS test of the features the GatewayClass declares runs there,
// and one that fails fails the run. `go tool task conformance` runs it
// alone and writes the report. Every suite flag works after -args: -run-test NAME runs one test,
// -skip-tests A,B skips some, -report-output FILE writes the report,
// -debug logs each request. TestConformanceWithoutTLSRoute runs one HTTPRoute
// test on a cluster without the TLSRoute CRD: the agent reads the kinds
// that are served.
package conformance
