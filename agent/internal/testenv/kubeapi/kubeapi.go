//go:build linux

package kubeapi

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/restysync/restysync/agent/internal/testenv/freeport"
)

// Version is the kube-apiserver version that build.sh builds.
const Version = "v1.37.2"

// BinaryEnv names the environment variable that overrides the kube-apiserver
// binary path.
const BinaryEnv = "RESTYSYNC_KUBE_APISERVER"

// ControllerManagerEnv names the environment variable that overrides the
// kube-controller-manager binary path.
const ControllerManagerEnv = "RESTYSYNC_KUBE_CONTROLLER_MANAGER"

const (
	readyTimeout = 60 * time.Second
	stopTimeout  = 15 * time.Second
	installHint  = "run `go tool task kube-apiserver` (agent/tools/kubeapiserver/build.sh)"
)

// Options configures Start.
type Options struct {
	// Binary is the kube-apiserver to run. Default: $RESTYSYNC_KUBE_APISERVER,
	// else ${RESTYSYNC_CACHE:-$HOME/.cache/restysync}/bin/kube-apiserver-v1.37.2.
	Binary string
	// Etcd is the etcd binary. Default: etcd on PATH.
	Etcd string
	// EtcdInMemory keeps etcd's data in /dev/shm (tmpfs) instead of the
	// test's temporary directory on disk: its fsyncs then cost nothing.
	// For benchmarks that fill the API server with tens of thousands of
	// objects, whose writes wait on etcd's fsync (etcd 3.4 has no
	// --unsafe-no-fsync); every write still goes through the API server.
	EtcdInMemory bool
}

// ClusterOptions configures StartCluster.
type ClusterOptions struct {
	Options
	// ControllerManager is the kube-controller-manager to run. Default:
	// $RESTYSYNC_KUBE_CONTROLLER_MANAGER, else
	// ${RESTYSYNC_CACHE:-$HOME/.cache/restysync}/bin/kube-controller-manager-v1.37.2.
	ControllerManager string
}

// Server is a running kube-apiserver backed by its own etcd.
type Server struct {
	// URL is the API server's https URL on 127.0.0.1.
	URL string
	// Kubeconfig is the path of a kubeconfig for the admin user.
	Kubeconfig string
	// AdminToken is a static bearer token of a system:masters member.
	AdminToken string
	// CAData is the PEM certificate that the API server serves with.
	CAData []byte

	// How to run the kube-apiserver again after StopAPIServer.
	apiserverBin  string
	apiserverArgs []string
	apiserverLog  string
	apiserver     *process // nil while stopped
}

// DefaultBinary returns the kube-apiserver path that Start uses when
// Options.Binary is empty.
func DefaultBinary() string {
	return cachedBinary(BinaryEnv, "kube-apiserver")
}

// DefaultControllerManager returns the kube-controller-manager path that
// StartCluster uses when ClusterOptions.ControllerManager is empty.
func DefaultControllerManager() string {
	return cachedBinary(ControllerManagerEnv, "kube-controller-manager")
}

// cachedBinary is $env, else the component's path in the cache build.sh
// builds into.
func cachedBinary(env, component string) string {
	if p := os.Getenv(env); p != "" {
		return p
	}
	cache := os.Getenv("RESTYSYNC_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "restysync")
	}
	return filepath.Join(cache, "bin", component+"-"+Version)
}

// Start runs etcd and kube-apiserver on free loopback ports and waits until
// the API server is ready. Both are stopped by t.Cleanup. Without the
// binaries it skips t, or fails it when the environment has CI=true.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	return start(t, opts, nil)
}

// StartCluster is Start, plus what a cluster with pods needs besides a
// kubelet: the API server reaches a node's kubelet port at its InternalIP
// (for pods/log), and kube-controller-manager runs the deployment,
// replicaset, endpointslice, garbagecollector and namespace controllers
// as the admin. Pods are bound and run by a node process (package
// kubenode). Without the controller-manager binary it skips t, or fails it
// when the environment has CI=true.
func StartCluster(t testing.TB, opts ClusterOptions) *Server {
	t.Helper()
	manager := opts.ControllerManager
	if manager == "" {
		manager = DefaultControllerManager()
	}
	if _, err := os.Stat(manager); err != nil {
		missing(t, fmt.Sprintf("kube-controller-manager %s not found at %s; run `go tool task kube-controller-manager`", Version, manager))
	}
	s := start(t, opts.Options, []string{"--kubelet-preferred-address-types=InternalIP"})
	startProcess(t, filepath.Join(filepath.Dir(s.apiserverLog), "kube-controller-manager.log"), manager,
		"--kubeconfig="+s.Kubeconfig,
		"--controllers=deployment,replicaset,endpointslice,garbagecollector,namespace",
		"--leader-elect=false",
		"--secure-port=0",
		"--profiling=false",
	)
	return s
}

// start runs etcd and the API server with its usual flags and extra.
func start(t testing.TB, opts Options, extra []string) *Server {
	t.Helper()
	apiserverBin, etcdBin := findBinaries(t, opts)

	dir := t.TempDir()
	etcdData := filepath.Join(dir, "etcd")
	if opts.EtcdInMemory {
		shm, err := os.MkdirTemp("/dev/shm", "kubeapi-etcd-")
		if err != nil {
			t.Fatalf("kubeapi: etcd in memory: %v", err)
		}
		// Registered before etcd starts: removed after it has stopped.
		t.Cleanup(func() { os.RemoveAll(shm) })
		etcdData = filepath.Join(shm, "etcd")
	}
	ports, err := freePorts(3)
	if err != nil {
		t.Fatalf("kubeapi: %v", err)
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	s := &Server{URL: "https://127.0.0.1:" + strconv.Itoa(ports[2])}

	etcd := startProcess(t, filepath.Join(dir, "etcd.log"), etcdBin,
		"--name=test",
		"--data-dir="+etcdData,
		"--listen-client-urls="+etcdURL,
		"--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=test="+peerURL,
		"--logger=zap",
		"--log-outputs=stderr",
		"--log-level=warn",
	)
	waitReady(t, etcd, etcdURL+"/health", nil, "")

	files, err := writeFiles(dir, s)
	if err != nil {
		t.Fatalf("kubeapi: %v", err)
	}
	s.apiserverBin = apiserverBin
	s.apiserverLog = filepath.Join(dir, "kube-apiserver.log")
	s.apiserverArgs = []string{
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ports[2]),
		"--etcd-servers=" + etcdURL,
		"--cert-dir=" + filepath.Join(dir, "certs"),
		"--tls-cert-file=" + files.servingCert,
		"--tls-private-key-file=" + files.servingKey,
		"--token-auth-file=" + files.tokens,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + files.serviceAccountKey,
		"--service-account-signing-key-file=" + files.serviceAccountKey,
		"--service-cluster-ip-range=10.96.0.0/16",
		// The "kubernetes" Service's endpoints may not be loopback addresses.
		"--endpoint-reconciler-type=none",
		// No controller-manager creates the "default" ServiceAccounts, which
		// the ServiceAccount admission plugin requires for every Pod.
		"--disable-admission-plugins=ServiceAccount",
		// Without it the server waits before it stops serving.
		"--shutdown-delay-duration=0",
		// Without it the open watches, which the server does not end, hold
		// its exit back until the request timeout (60 s) and it is killed;
		// with it they end at once on SIGTERM and the server exits.
		"--shutdown-watch-termination-grace-period=2s",
		"--profiling=false",
	}
	s.apiserverArgs = append(s.apiserverArgs, extra...)
	s.StartAPIServer(t)

	s.Kubeconfig = s.KubeconfigFor(t, s.AdminToken)
	return s
}

// StopAPIServer stops the kube-apiserver, as the test's cleanup would, and
// leaves etcd running: the API is unreachable (connections to its port are
// refused) until StartAPIServer. It fails t if the API server is not running.
func (s *Server) StopAPIServer(t testing.TB) {
	t.Helper()
	if s.apiserver == nil {
		t.Fatal("kubeapi: StopAPIServer: the API server is not running")
	}
	s.apiserver.stop(t)
	s.apiserver = nil
}

// StartAPIServer runs the kube-apiserver on s.URL with the same
// certificates, tokens and etcd, and waits until it is ready, so every
// kubeconfig and rest.Config of s stays valid and every stored object is
// still there. Start calls it; tests call it after StopAPIServer. It fails t
// if the API server is already running or does not become ready in time.
func (s *Server) StartAPIServer(t testing.TB) {
	t.Helper()
	if s.apiserver != nil {
		t.Fatal("kubeapi: StartAPIServer: the API server is already running")
	}
	p := startProcess(t, s.apiserverLog, s.apiserverBin, s.apiserverArgs...)
	s.apiserver = p
	waitReady(t, p, s.URL+"/readyz", s.CAData, s.AdminToken)
}

// Config returns a rest.Config for the admin user.
func (s *Server) Config() *rest.Config {
	return &rest.Config{
		Host:            s.URL,
		BearerToken:     s.AdminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: s.CAData},
	}
}

// KubeconfigFor writes a kubeconfig that authenticates with the bearer token
// into a temporary directory of t, and returns its path.
func (s *Server) KubeconfigFor(t testing.TB, token string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: s.URL, CertificateAuthorityData: s.CAData}
	cfg.AuthInfos["test"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test", Namespace: "default"}
	cfg.CurrentContext = "test"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatalf("kubeapi: write kubeconfig: %v", err)
	}
	return path
}

// ServiceAccountKubeconfig creates the namespace and ServiceAccount when they
// are missing, mints a token for the ServiceAccount through the TokenRequest
// API and returns the path of a kubeconfig that uses it. The ServiceAccount
// has no permissions until the test grants them with RBAC.
func (s *Server) ServiceAccountKubeconfig(t testing.TB, namespace, name string) string {
	t.Helper()
	client, err := kubernetes.NewForConfig(s.Config())
	if err != nil {
		t.Fatalf("kubeapi: %v", err)
	}
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("kubeapi: create namespace %s: %v", namespace, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := client.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("kubeapi: create service account %s/%s: %v", namespace, name, err)
	}
	expiry := int64(time.Hour / time.Second)
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}
	tr, err := client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, req, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("kubeapi: token for service account %s/%s: %v", namespace, name, err)
	}
	return s.KubeconfigFor(t, tr.Status.Token)
}

func findBinaries(t testing.TB, opts Options) (apiserver, etcd string) {
	t.Helper()
	apiserver = opts.Binary
	if apiserver == "" {
		apiserver = DefaultBinary()
	}
	if _, err := os.Stat(apiserver); err != nil {
		missing(t, fmt.Sprintf("kube-apiserver %s not found at %s; %s", Version, apiserver, installHint))
	}
	etcd = opts.Etcd
	if etcd == "" {
		etcd = "etcd"
	}
	path, err := exec.LookPath(etcd)
	if err != nil {
		missing(t, fmt.Sprintf("etcd not found (%v); %s", err, installHint))
	}
	return apiserver, path
}

// missing fails t when the environment has CI=true, and skips it otherwise.
func missing(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// process is a started child whose exit is reported by closing done.
type process struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error // valid once done is closed
}

// startProcess runs bin in its own process group with output appended to
// logPath, and registers a cleanup that stops it.
func startProcess(t testing.TB, logPath, bin string, args ...string) *process {
	t.Helper()
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("kubeapi: %v", err)
	}
	defer logFile.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// Own process group so the whole tree can be killed; Pdeathsig kills the
	// child should the test binary die without running its cleanups.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("kubeapi: start %s: %v", bin, err)
	}
	p := &process{cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kubeapi: last lines of %s:\n%s", filepath.Base(logPath), p.tail())
		}
		p.stop(t)
	})
	return p
}

// stop sends SIGTERM, then SIGKILLs the process group if the process has not
// exited in time.
func (p *process) stop(t testing.TB) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopTimeout):
		t.Logf("kubeapi: %s did not stop within %s; killing it", filepath.Base(p.cmd.Path), stopTimeout)
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// tail returns the last lines of the process log.
func (p *process) tail() string {
	data, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-40):], "\n")
}

// waitReady polls url until it answers 200, and fails t with the log tail
// when p exits or readyTimeout passes first.
func waitReady(t testing.TB, p *process, url string, caPEM []byte, token string) {
	t.Helper()
	transport := &http.Transport{}
	if caPEM != nil {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(caPEM)
		transport.TLSClientConfig = &tls.Config{RootCAs: pool}
	}
	client := &http.Client{Transport: transport, Timeout: 5 * time.Second}
	defer transport.CloseIdleConnections()

	deadline := time.After(readyTimeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err == nil {
			body := readSmall(resp)
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = fmt.Sprintf("%s: %s", resp.Status, body)
		} else {
			last = err.Error()
		}
		select {
		case <-p.done:
			t.Fatalf("kubeapi: %s exited before %s was ready: %v\n%s", filepath.Base(p.cmd.Path), url, p.err, p.tail())
		case <-deadline:
			t.Fatalf("kubeapi: %s not ready within %s (last answer: %s)\n%s", url, readyTimeout, last, p.tail())
		case <-tick.C:
		}
	}
}

// readSmall returns the start of the response body and closes it.
func readSmall(resp *http.Response) string {
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return strings.TrimSpace(string(body))
}

// freePorts returns n distinct free TCP ports on 127.0.0.1, below the
// ephemeral range (package freeport says why).
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		port, err := freeport.Pick()
		if err != nil {
			return nil, err
		}
		ports = append(ports, port)
	}
	return ports, nil
}

type serverFiles struct {
	servingCert, servingKey string
	serviceAccountKey       string
	tokens                  string
}

// writeFiles generates the serving certificate, the ServiceAccount signing
// key and the static token file into dir, and sets s.CAData and s.AdminToken.
func writeFiles(dir string, s *Server) (serverFiles, error) {
	f := serverFiles{
		servingCert:       filepath.Join(dir, "serving.crt"),
		servingKey:        filepath.Join(dir, "serving.key"),
		serviceAccountKey: filepath.Join(dir, "service-account.key"),
		tokens:            filepath.Join(dir, "tokens.csv"),
	}
	certPEM, keyPEM, err := selfSignedCert()
	if err != nil {
		return f, err
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return f, err
	}
	saPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)})
	token := make([]byte, 16)
	if _, err := rand.Read(token); err != nil {
		return f, err
	}
	s.AdminToken = hex.EncodeToString(token)
	s.CAData = certPEM
	tokens := s.AdminToken + ",admin,admin,system:masters\n"

	for path, data := range map[string][]byte{
		f.servingCert:       certPEM,
		f.servingKey:        keyPEM,
		f.serviceAccountKey: saPEM,
		f.tokens:            []byte(tokens),
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return f, err
		}
	}
	return f, nil
}

// selfSignedCert returns a PEM certificate and key for 127.0.0.1 and
// localhost; clients trust the certificate itself.
func selfSignedCert() (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	return certPEM, keyPEM, nil
}
