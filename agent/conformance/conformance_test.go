//go:build linux

package conformance

import (
	"context"
	"fmt"
	"io"
	"io/fs"
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

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/apis/v1alpha2"
	"sigs.k8s.io/gateway-api/apis/v1alpha3"
	"sigs.k8s.io/gateway-api/apis/v1beta1"
	xv1alpha1 "sigs.k8s.io/gateway-api/apisx/v1alpha1"
	gwconformance "sigs.k8s.io/gateway-api/conformance"
	confv1 "sigs.k8s.io/gateway-api/conformance/apis/v1"
	"sigs.k8s.io/gateway-api/conformance/utils/config"
	"sigs.k8s.io/gateway-api/conformance/utils/flags"
	kubeutil "sigs.k8s.io/gateway-api/conformance/utils/kubernetes"
	"sigs.k8s.io/gateway-api/conformance/utils/roundtripper"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"

	"github.com/restysync/restysync/agent/internal/testenv/kubeapi"
	"github.com/restysync/restysync/agent/internal/testenv/kubenode"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
	"github.com/restysync/restysync/agent/internal/testenv/syncbuf"
)

const (
	// controllerName is the agent's default --gateway-controller-name.
	controllerName = "restysync.io/gateway-controller"
	// className is the GatewayClass the harness creates (-gateway-class
	// names another).
	className = "restysync"
	// agentNS holds the agent's leader-election Lease.
	agentNS = "restysync-system"
	// startBound bounds each step of starting the agent and nginx.
	startBound = 30 * time.Second
	// podsBound bounds the wait for the base manifests' pods.
	podsBound = 5 * time.Minute
)

// The Gateways' addresses: the agent's pool (--gateway-addresses), one
// address each, and the suite's usable and unusable static addresses
// (GatewayStaticAddresses). A static address is served only when it is in
// the pool (the agent serves the addresses it was given), so the usable
// one is the pool's last, which no Gateway takes before 40 others do; the
// unusable one is of TEST-NET-3, which no interface here has.
var (
	addressPool     = loopbackRange(50, 1, 40)
	usableAddress   = "127.0.51.1"
	unusableAddress = "203.0.113.51"
)

func loopbackRange(third, first, last int) []string {
	var out []string
	for i := first; i <= last; i++ {
		out = append(out, fmt.Sprintf("127.0.%d.%d", third, i))
	}
	return out
}

// TestConformance runs the suite: the cluster, the CRDs, the node, the
// GatewayClass, the agent and nginx, then RunConformanceWithOptions with
// the GATEWAY-HTTP, GATEWAY-GRPC and GATEWAY-TLS profiles. The features come from the GatewayClass's
// status.supportedFeatures (-supported-features overrides).
func TestConformance(t *testing.T) {
	start := time.Now()
	c := startCluster(t)
	opts := options(t, c)
	createGatewayClass(t, c, opts.GatewayClassName)
	startAgent(t, c)
	t.Logf("harness up in %s: cluster, CRDs, node, GatewayClass %s, agent and nginx", time.Since(start).Round(time.Second), opts.GatewayClassName)
	if len(opts.SupportedFeatures) == 0 && !opts.EnableAllSupportedFeatures {
		waitForSupportedFeatures(t, c, opts)
	}
	gwconformance.RunConformanceWithOptions(t, opts)
}

// TestConformanceWithoutTLSRoute runs HTTPRouteSimpleSameNamespace on a
// cluster whose Gateway API lacks the TLSRoute CRD (an older or partial
// install): the agent reads every other kind, so HTTPRoutes still route.
func TestConformanceWithoutTLSRoute(t *testing.T) {
	c := startCluster(t)
	kubeapi.RemoveGatewayAPIResource(t, c.server, "tlsroutes")
	opts := options(t, c)
	opts.ConformanceProfiles = []suite.ConformanceProfileName{suite.GatewayHTTPConformanceProfileName}
	opts.RunTest = "HTTPRouteSimpleSameNamespace"
	opts.ReportOutputPath = "" // the report is TestConformance's
	createGatewayClass(t, c, opts.GatewayClassName)
	startAgent(t, c)
	waitForSupportedFeatures(t, c, opts)
	gwconformance.RunConformanceWithOptions(t, opts)
}

// waitForSupportedFeatures waits, as long as the suite waits for an
// Accepted GatewayClass, until the controller has written the class's
// status.supportedFeatures: the suite reads them once, when it starts, and
// stops at once ("no supported features were determined") if they are not
// there yet.
func waitForSupportedFeatures(t *testing.T, c *cluster, opts suite.ConformanceOptions) {
	t.Helper()
	bound := opts.TimeoutConfig.GWCMustBeAccepted
	deadline := time.Now().Add(bound)
	for {
		gc := &gatewayv1.GatewayClass{}
		err := c.client.Get(context.Background(), client.ObjectKey{Name: opts.GatewayClassName}, gc)
		if err == nil && len(gc.Status.SupportedFeatures) > 0 {
			t.Logf("GatewayClass %s supports %d features", gc.Name, len(gc.Status.SupportedFeatures))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GatewayClass %s: no status.supportedFeatures within %s (the suite reads the features from it; -supported-features names them instead): error %v, conditions %+v",
				opts.GatewayClassName, bound, err, gc.Status.Conditions)
		}
		time.Sleep(opts.TimeoutConfig.DefaultPollInterval)
	}
}

// TestClusterRunsTheBase proves the harness without the controller: the
// suite's base manifests (and the Secrets its setup makes for them) give
// pods that all become Ready on the node.
func TestClusterRunsTheBase(t *testing.T) {
	start := time.Now()
	c := startCluster(t)
	timeouts := config.DefaultTimeoutConfig()
	applier := kubeutil.Applier{ManifestFS: []fs.FS{&gwconformance.Manifests}, GatewayClass: className, ControllerName: controllerName}
	applier.MustApplyWithCleanup(t, c.client, timeouts, "base/manifests.yaml", false)
	// The Secrets the backends mount, made as the suite's Setup makes them.
	_, ca, caKey := kubeutil.MustCreateCACertConfigMap(t, suite.InfrastructureNamespace, "tls-checks-ca-certificate")
	applier.MustApplyObjectsWithCleanup(t, c.client, timeouts, []client.Object{
		kubeutil.MustCreateCASignedCertSecret(t, suite.InfrastructureNamespace, "tls-checks-certificate", []string{"abc.example.com"}, ca, caKey),
		kubeutil.MustCreateCASignedCertSecret(t, suite.InfrastructureNamespace, "tls-passthrough-checks-certificate", []string{"abc.example.com"}, ca, caKey),
		kubeutil.MustCreateCASignedCertSecret(t, suite.AppBackendNamespace, "tls-passthrough-checks-certificate", []string{"abc.example.com"}, ca, caKey),
	}, false)
	namespaces := []string{suite.InfrastructureNamespace, suite.AppBackendNamespace, suite.WebBackendNamespace}
	deadline := time.Now().Add(podsBound)
	for {
		total, waiting := 0, []string{}
		for _, ns := range namespaces {
			var pods corev1.PodList
			if err := c.client.List(context.Background(), &pods, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			for _, p := range pods.Items {
				total++
				if !podReady(p) {
					waiting = append(waiting, ns+"/"+p.Name)
				}
			}
		}
		if total > 0 && len(waiting) == 0 {
			t.Logf("%d pods of the base manifests Ready in %s (from the harness's start); %d echo-basic processes", total, time.Since(start).Round(time.Second), len(c.node.PIDs()))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("of %d pods, not Ready within %s: %v", total, podsBound, waiting)
		}
		time.Sleep(time.Second)
	}
}

// cluster is the API server with its controllers, the Gateway API CRDs
// and the node, with the suite's clients.
type cluster struct {
	server    *kubeapi.Server
	node      *kubenode.Node
	config    *rest.Config
	client    client.Client
	clientset kubernetes.Interface
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	// controller-runtime complains once unless it has a logger.
	log.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	s := kubeapi.StartCluster(t, kubeapi.ClusterOptions{})
	// The experimental channel: a superset of the standard one, with the
	// fields of the experimental features (HTTPRoute retry, ...), which
	// the standard CRDs would prune.
	kubeapi.InstallGatewayAPI(t, s, true)
	cfg := s.Config()
	cfg.QPS, cfg.Burst = 100, 200
	c := &cluster{server: s, config: cfg, node: kubenode.Start(t, s.Config(), kubenode.Options{})}
	var err error
	if c.client, err = client.New(cfg, client.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, install := range []func(*runtime.Scheme) error{v1alpha3.Install, v1alpha2.Install, v1beta1.Install, gatewayv1.Install, xv1alpha1.Install, apiextensionsv1.AddToScheme} {
		if err := install(c.client.Scheme()); err != nil {
			t.Fatal(err)
		}
	}
	if c.clientset, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	return c
}

// options are the suite's options for this cluster; the suite's own flags
// (after -args) override them.
func options(t *testing.T, c *cluster) suite.ConformanceOptions {
	t.Helper()
	opts := suite.ConformanceOptions{
		ConfigurableOptions: suite.ConfigurableOptions{
			GatewayClassName:    className,
			ConformanceProfiles: []suite.ConformanceProfileName{suite.GatewayHTTPConformanceProfileName, suite.GatewayGRPCConformanceProfileName, suite.GatewayTLSConformanceProfileName},
			// The cluster ends with the test: nothing to clean up after it.
			CleanupBaseResources: false,
			CleanupTestResources: true,
			Mode:                 flags.DefaultMode,
			TimeoutConfig:        config.DefaultTimeoutConfig(),
			Implementation: confv1.Implementation{
				Organization: "restysync",
				Project:      "restysync",
				URL:          "https://github.com/restysync/restysync",
				Version:      version(),
				Contact:      []string{"https://github.com/restysync/restysync/issues"},
			},
			UsableNetworkAddresses:   []gatewayv1.GatewaySpecAddress{ipAddress(usableAddress)},
			UnusableNetworkAddresses: []gatewayv1.GatewaySpecAddress{ipAddress(unusableAddress)},
		},
		Client:     c.client,
		Clientset:  c.clientset,
		RestConfig: c.config,
		ManifestFS: []fs.FS{&gwconformance.Manifests},
	}
	flags.ApplyAll(&opts.ConfigurableOptions)
	// Straight to the Gateways' loopback addresses: no proxy from the
	// environment, a bounded dial, no keep-alive (as the suite's own).
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	opts.RoundTripper = &roundtripper.DefaultRoundTripper{Debug: opts.Debug, TimeoutConfig: opts.TimeoutConfig, CustomDialContext: dialer.DialContext}
	return opts
}

func ipAddress(ip string) gatewayv1.GatewaySpecAddress {
	return gatewayv1.GatewaySpecAddress{Type: new(gatewayv1.IPAddressType), Value: ip}
}

// version is the report's implementation version: git describe, as the
// agent binary's.
func version() string {
	out, err := exec.Command("git", "describe", "--tags", "--always", "--dirty").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		return "dev"
	}
	return strings.TrimSpace(string(out))
}

// createGatewayClass creates the class the suite's Gateways name, for the
// agent's controller name: the suite expects the harness to make it.
func createGatewayClass(t *testing.T, c *cluster, name string) {
	t.Helper()
	gc := &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: gatewayv1.GatewayClassSpec{ControllerName: controllerName}}
	if err := c.client.Create(context.Background(), gc); err != nil {
		t.Fatalf("creating GatewayClass %s: %v", name, err)
	}
}

// startAgent builds and runs the agent on the cluster as the admin (the
// kube source, every namespace, the Gateway controller flags), then nginx
// on the config it writes, and waits until the agent is ready. Both stop
// with the test.
func startAgent(t *testing.T, c *cluster) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "restysync")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/restysync/restysync/agent/cmd/restysync").CombinedOutput(); err != nil {
		t.Fatalf("building the agent: %v\n%s", err, out)
	}
	if err := c.client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentNS}}); err != nil {
		t.Fatal(err)
	}
	nginxproc.Binary(t) // fails under CI=true when nginx is missing
	shared := nginxproc.TempPrefix(t)
	admin := "127.0.0.1:" + strconv.Itoa(nginxproc.FreePort(t))
	args := []string{"run", "--source", "kube", "--kubeconfig", c.server.Kubeconfig,
		"--election-namespace", agentNS, "--pod-name", "conformance",
		"--gateway-controller-name", controllerName,
		"--gateway-addresses", strings.Join(append(addressPool, usableAddress), ","),
		"--shared-dir", shared,
		"--http-port", strconv.Itoa(nginxproc.FreePort(t)),
		"--https-port", strconv.Itoa(nginxproc.FreePort(t)),
		"--listen-address", "127.0.0.1",
		"--worker-processes", "2",
		"--metrics-address", admin,
	}
	// The stream module serves the TLS passthrough listeners (TLSRoute).
	for _, m := range append(nginxproc.DebianLoadModules(), nginxproc.StreamLoadModules(t)...) {
		args = append(args, "--load-module", m)
	}
	logs := &syncbuf.Buffer{}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			text := logs.String()
			t.Logf("agent log (last 8 KiB):\n%s", text[max(0, len(text)-8192):])
		}
	})
	waitFor(t, done, "the agent writes nginx.conf", func() error {
		_, err := os.Stat(filepath.Join(shared, "nginx.conf"))
		return err
	})
	nginx := nginxproc.Start(t, shared)
	t.Cleanup(func() {
		if t.Failed() {
			text := nginx.Logs()
			t.Logf("nginx's log (last 8 KiB):\n%s", text[max(0, len(text)-8192):])
		}
	})
	probe := &http.Client{Timeout: 2 * time.Second}
	waitFor(t, done, "the agent is ready", func() error {
		resp, err := probe.Get("http://" + admin + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz: %s", resp.Status)
		}
		return nil
	})
}

// waitFor polls check until it passes, and fails t when the agent exits
// or startBound passes first.
func waitFor(t *testing.T, agentDone <-chan struct{}, what string, check func() error) {
	t.Helper()
	deadline := time.After(startBound)
	for {
		err := check()
		if err == nil {
			return
		}
		select {
		case <-agentDone:
			t.Fatalf("%s: the agent exited", what)
		case <-deadline:
			t.Fatalf("%s: not within %s: %v", what, startBound, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func podReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
