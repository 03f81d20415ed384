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
// Only the API server and etcd run: no controller-manager or scheduler, so
// nothing reconciles the objects a test creates.
package kubeapi
