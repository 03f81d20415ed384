//go:build bench

package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/restysync/restysync/agent/internal/testenv/kubeapi"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
	"github.com/restysync/restysync/agent/internal/testenv/podnet"
	"github.com/restysync/restysync/agent/internal/testenv/syncbuf"
)

const (
	benchNS        = "bench"
	controllerName = "restysync.io/ingress-controller"
	waitBound      = 10 * time.Second
)

// agentBinary builds the agent once.
var agentBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "restysync-bench-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "restysync")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/restysync/restysync/agent/cmd/restysync").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("building the agent: %v\n%s", err, out)
	}
	// On disk, as an image's binary is: the kernel pages out clean file
	// pages only, and the agent pages out its own binary when idle.
	if err := syncFile(bin); err != nil {
		return "", err
	}
	return bin, nil
})

// syncFile writes the file name to disk.
func syncFile(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// cluster is a real API server with a client fast enough to fill it.
type cluster struct {
	t      *testing.T
	srv    *kubeapi.Server
	client kubernetes.Interface
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	return startClusterWith(t, kubeapi.Options{})
}

// startClusterWith is startCluster on a server started with opts.
func startClusterWith(t *testing.T, opts kubeapi.Options) *cluster {
	t.Helper()
	srv := kubeapi.Start(t, opts)
	cfg := srv.Config()
	cfg.QPS, cfg.Burst = 5000, 10000
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, srv: srv, client: client}
	ctx := context.Background()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	class := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "restysync"}, Spec: networkingv1.IngressClassSpec{Controller: controllerName}}
	if _, err := client.NetworkingV1().IngressClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return c
}

// useProtobuf has the cluster's client send and accept protobuf, which
// costs the API server less CPU a request than JSON (a bulk fill).
func (c *cluster) useProtobuf() {
	c.t.Helper()
	cfg := c.srv.Config()
	cfg.QPS, cfg.Burst = 5000, 10000
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	c.client = client
}

func service(name string) *corev1.Service {
	return serviceOn(name, "http", podnet.Port)
}

// serviceOn is a Service whose port 80, named portName, targets the
// pods' port.
func serviceOn(name, portName string, port int32) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: benchNS},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: portName, Port: 80, TargetPort: intstr.FromInt32(port)}}}}
}

func slice(svc string, addrs ...string) *discoveryv1.EndpointSlice {
	return sliceOn(svc, "http", podnet.Port, addrs...)
}

// sliceOn is the EndpointSlice of serviceOn(svc, portName, port): addrs
// on port.
func sliceOn(svc, portName string, port int32, addrs ...string) *discoveryv1.EndpointSlice {
	name, ready := portName, true
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: svc + "-1", Namespace: benchNS, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
	}
	for _, a := range addrs {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
	}
	return s
}

// ingress routes host "/" to each service in turn, one path per service
// ("/" for the first, "/s1", "/s2", … for the rest).
func ingress(name, host string, services ...string) *networkingv1.Ingress {
	class, prefix := "restysync", networkingv1.PathTypePrefix
	rule := networkingv1.IngressRule{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{}}}
	for i, svc := range services {
		path := "/"
		if i > 0 {
			path = "/s" + strconv.Itoa(i)
		}
		rule.HTTP.Paths = append(rule.HTTP.Paths, networkingv1.HTTPIngressPath{Path: path, PathType: &prefix,
			Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Number: 80}}}})
	}
	return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: benchNS},
		Spec: networkingv1.IngressSpec{IngressClassName: &class, Rules: []networkingv1.IngressRule{rule}}}
}

// createAll creates objects with parallel workers; it fails the test on error.
func (c *cluster) createAll(objs []any) {
	c.t.Helper()
	const workers = 16
	work := make(chan any)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for obj := range work {
				if err := c.create(obj); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for _, o := range objs {
		work <- o
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		c.t.Fatal(err)
	default:
	}
}

func (c *cluster) create(obj any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	switch o := obj.(type) {
	case *corev1.Service:
		_, err = c.client.CoreV1().Services(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *discoveryv1.EndpointSlice:
		_, err = c.client.DiscoveryV1().EndpointSlices(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *networkingv1.Ingress:
		_, err = c.client.NetworkingV1().Ingresses(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	default:
		return fmt.Errorf("create: unexpected %T", obj)
	}
	if err != nil {
		return fmt.Errorf("create %T: %w", obj, err)
	}
	return nil
}

// setEndpoints replaces the endpoints of svc's slice and returns when the
// API server has accepted the update.
func (c *cluster) setEndpoints(svc string, addrs ...string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	s := slice(svc, addrs...)
	current, err := c.client.DiscoveryV1().EndpointSlices(benchNS).Get(ctx, s.Name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	current.Endpoints = s.Endpoints
	if _, err := c.client.DiscoveryV1().EndpointSlices(benchNS).Update(ctx, current, metav1.UpdateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// fakeAddrs returns n addresses in 10.250.0.0/16 that nothing answers: the
// endpoints of backends that are measured but never requested.
func fakeAddrs(start, n int) []string {
	out := make([]string, n)
	for i := range out {
		v := start + i
		out[i] = fmt.Sprintf("10.250.%d.%d", (v/250)%250, 1+v%250)
	}
	return out
}

// agent is the agent binary and the nginx it drives.
type agent struct {
	t      *testing.T
	cmd    *exec.Cmd
	log    *syncbuf.Buffer
	done   chan struct{}
	nginx  *nginxproc.Nginx
	shared string
	port   int
	client *http.Client
	start  time.Time
}

// startAgent runs the agent on the cluster with extra flags, then nginx.
func startAgent(t *testing.T, c *cluster, extra ...string) *agent {
	t.Helper()
	return startAgentOn(t, []string{"--source", "kube", "--kubeconfig", c.srv.Kubeconfig, "--namespace", benchNS}, extra...)
}

// startAgentOn runs the agent with the source flags and extra flags, then
// nginx.
func startAgentOn(t *testing.T, source []string, extra ...string) *agent {
	t.Helper()
	bin, err := agentBinary()
	if err != nil {
		t.Fatal(err)
	}
	a := &agent{t: t, log: &syncbuf.Buffer{}, done: make(chan struct{}), shared: nginxproc.TempPrefix(t), port: nginxproc.FreePort(t)}
	args := append(append([]string{"run"}, source...),
		"--shared-dir", a.shared, "--http-port", strconv.Itoa(a.port), "--https-port", strconv.Itoa(nginxproc.FreePort(t)),
		"--listen-address", "127.0.0.1", "--worker-processes", "1", "--log-level", "info")
	for _, m := range nginxproc.DebianLoadModules() {
		args = append(args, "--load-module", m)
	}
	args = append(args, extra...)
	a.cmd = exec.Command(bin, args...)
	a.cmd.Stdout, a.cmd.Stderr = a.log, a.log
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	a.start = time.Now()
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { a.cmd.Wait(); close(a.done) }()
	t.Cleanup(a.stop)
	deadline := time.Now().Add(waitBound)
	for {
		if _, err := os.Stat(filepath.Join(a.shared, "nginx.conf")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent wrote no nginx.conf\n%s", a.log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	a.nginx = nginxproc.Start(t, a.shared)
	a.client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", strconv.Itoa(a.port)))
		},
		MaxIdleConnsPerHost: 8,
	}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent log (tail):\n%s", tail(a.log.String(), 4000))
		}
	})
	return a
}

func (a *agent) stop() {
	syscall.Kill(a.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-a.done:
	case <-time.After(10 * time.Second):
		syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL)
		<-a.done
	}
}

// get returns the status and body of GET host+path through nginx.
func (a *agent) get(host, path string) (int, string) {
	req, _ := http.NewRequest(http.MethodGet, "http://"+host+path, nil)
	resp, err := a.client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, strings.TrimSpace(string(body))
}

// waitFor polls GET host+path until it answers want (a pod name) or 200
// when want is "", and returns how long that took; it fails after bound.
func (a *agent) waitFor(host, path, want string, bound time.Duration) time.Duration {
	a.t.Helper()
	return timeUntil(a.t, a, host+path, bound, func() (bool, string) {
		status, body := a.get(host, path)
		return status == http.StatusOK && (want == "" || body == want), fmt.Sprintf("want 200 %q, got %d %s", want, status, body)
	})
}

// waitIdle waits until the agent has logged no sync for quiet, at most
// bound: the syncs of its start (the first config, and the full sync that
// may follow it when nginx is detected or confirms) are not the change a
// row measures.
func (a *agent) waitIdle(quiet, bound time.Duration) {
	deadline := time.Now().Add(bound)
	for last := a.log.Len(); time.Now().Before(deadline); {
		time.Sleep(quiet)
		now := a.log.Len()
		if now == last || !strings.Contains(a.log.String()[last:now], "msg=sync ") {
			return
		}
		last = now
	}
}

var syncLine = regexp.MustCompile(`msg=sync action=(\S+) .*? bytes=(\d+)`)

// pushBytes returns the bytes of each push logged after offset in the log.
func (a *agent) pushBytes(offset int) []int {
	var out []int
	for _, m := range syncLine.FindAllStringSubmatch(a.log.String()[offset:], -1) {
		if strings.Contains(m[1], "push") {
			n, _ := strconv.Atoi(m[2])
			out = append(out, n)
		}
	}
	return out
}

// rssKiB is the agent's resident memory.
func (a *agent) rssKiB() int { return rssOf(a.cmd.Process.Pid) }

// cpuTime is the agent's user+system CPU time so far.
func (a *agent) cpuTime() time.Duration {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(a.cmd.Process.Pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(data, ')')
	fields := strings.Fields(string(data[i+1:]))
	utime, _ := strconv.Atoi(fields[11])
	stime, _ := strconv.Atoi(fields[12])
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
