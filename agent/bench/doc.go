// Package bench is `go tool task bench`: it measures the targets of the
// hot path (B1–B8, and B9: one tenant's catastrophic regexes under attack
// against another tenant's latency) against real parts — kube-apiserver + etcd, nginx with
// the Lua balancer, backends in network namespaces, wrk — and prints the
// result table. The measurements live in _test.go files behind the "bench"
// build tag, so `go test ./...` never runs them: timings on a shared
// two-core machine are reported, not asserted.
package bench
