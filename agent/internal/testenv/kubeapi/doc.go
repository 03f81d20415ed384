// Package kubeapi starts a real etcd and kube-apiserver for tests, on free
// loopback ports with temporary directories, and stops both when the test
// ends. It is imported only by tests.
//
// The kube-apiserver binary is built by agent/tools/kubeapiserver/build.sh
// (`go tool task kube-apiserver`) and etcd comes from Debian's etcd-server.
// When either is missing, Start skips the test, or fails it when CI=true.
//
// Server.StopAPIServer and Server.StartAPIServer take the API server down and
// bring it back on the same address, certificates and etcd, for tests of an
// API server outage.
//
// Start runs only the API server and etcd: no controller-manager or
// scheduler, so nothing reconciles the objects a test creates.
// StartCluster adds kube-controller-manager (built by the same script,
// `go tool task kube-controller-manager`) with the controllers that turn
// Deployments into pods, pods into EndpointSlices and deleted namespaces
// into nothing; a node process (package kubenode) binds and runs the pods.
// There is no scheduler: the node binds every pending pod to itself.
package kubeapi
