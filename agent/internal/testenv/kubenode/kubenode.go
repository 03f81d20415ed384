//go:build linux

// Package kubenode is a test helper: the node of the tests' cluster with
// pods (kubeapi.StartCluster). There is no kubelet and no scheduler here,
// so Start registers a Node, binds every pending pod to it, runs each pod's
// echo-basic containers inside the pod's own network namespace (podnet, an
// address in 10.244.0.0/16) and reports the pod Running and Ready once its
// port answers. It serves the kubelet's /containerLogs for pods/log, and a
// deleted pod is stopped and then deleted with grace 0, as a kubelet would.
//
// Only echo-basic runs (built from sigs.k8s.io/gateway-api/conformance,
// the backend of every Deployment of the Gateway API conformance suite): a
// container of any other image (coredns) is reported ready with no
// process, and a pod with no echo-basic container gets no address. kwok
// fakes the status and runs nothing, and virtual-kubelet pulls in a newer
// controller-runtime than the suite's; a few hundred lines of client-go
// give real backends at the pods' addresses.
//
// There is no mount namespace either: a container sees its secret,
// configMap and emptyDir volumes through its environment and arguments —
// a value that starts with a volumeMount's mountPath is rewritten to the
// folder the node wrote that volume to, so the host's /etc stays as it is.
package kubenode

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/restysync/restysync/agent/internal/testenv/podnet"
	"github.com/restysync/restysync/agent/internal/testenv/testcert"
)

// Bounds of the node's waits.
const (
	readyTimeout = 60 * time.Second // a started process's port answers
	stopTimeout  = 5 * time.Second  // a process ends on SIGTERM, else SIGKILL
	syncTimeout  = 30 * time.Second // the pod cache fills; Stop's own end
	callTimeout  = 10 * time.Second // one API call
	maxLogLines  = 10000            // kept per container
	workers      = 4
)

// Options configures Start.
type Options struct {
	// Name is the Node's name. Default: "restysync-node".
	Name string
	// EchoBasic is the echo-basic binary. Default: built by EchoBasic.
	EchoBasic string
}

// Node is a running node process.
type Node struct {
	// Name is the Node object's name.
	Name string

	t         testing.TB
	client    kubernetes.Interface
	echoBasic string
	dir       string // the pods' volumes
	pods      corelisters.PodLister
	queue     workqueue.TypedRateLimitingInterface[string]
	logServer *http.Server

	procs sync.WaitGroup // the goroutines that wait for and probe processes

	mu      sync.Mutex
	running map[string]*runningPod // by namespace/name
	logs    map[string]*logBuffer  // by namespace/pod/container
}

// runningPod is what the node runs for one pod.
type runningPod struct {
	uid        types.UID
	net        *podnet.Pod // nil when no container runs
	started    metav1.Time
	containers map[string]*container // the echo-basic containers, by name
}

// container is one echo-basic process of a pod, restarted when it exits.
type container struct {
	proc     *process
	restarts int32
	ready    bool // its port answered since it started
}

// process is a started echo-basic; done closes when it has exited.
type process struct {
	cmd     *exec.Cmd
	started metav1.Time
	done    chan struct{}
	exit    int       // valid once done is closed
	endedAt time.Time // valid once done is closed
	stopped bool
}

// Start registers the Node, serves its logs and starts binding and running
// pods; the test's cleanup stops every process it started, removes every
// network namespace and stops the node. It fails t when the node cannot
// start; pods it cannot run are logged and retried.
func Start(t testing.TB, cfg *rest.Config, opts Options) *Node {
	t.Helper()
	podnet.Require(t)
	n := &Node{Name: opts.Name, t: t, echoBasic: opts.EchoBasic, dir: t.TempDir(),
		running: map[string]*runningPod{}, logs: map[string]*logBuffer{}}
	if n.Name == "" {
		n.Name = "restysync-node"
	}
	if n.echoBasic == "" {
		n.echoBasic = EchoBasic(t)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 100, 200 // a kubelet's pace would keep the suite's 23 pods waiting
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("kubenode: %v", err)
	}
	n.client = client

	port := n.serveLogs(t)
	if err := n.register(port); err != nil {
		t.Fatalf("kubenode: register node %s: %v", n.Name, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(client, 0)
	informer := factory.Core().V1().Pods()
	n.pods = informer.Lister()
	n.queue = workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			n.queue.Add(key)
		}
	}
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}); err != nil {
		t.Fatalf("kubenode: %v", err)
	}
	factory.Start(ctx.Done())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		n.queue.ShutDown()
		wg.Wait()
		factory.Shutdown()
		n.stopAll()
		n.procs.Wait()
		shutdown, done := context.WithTimeout(context.Background(), stopTimeout)
		defer done()
		_ = n.logServer.Shutdown(shutdown)
	})
	synced, done := context.WithTimeout(ctx, syncTimeout)
	defer done()
	if !cache.WaitForCacheSync(synced.Done(), informer.Informer().HasSynced) {
		t.Fatalf("kubenode: the pod cache did not sync within %s", syncTimeout)
	}
	for range workers {
		wg.Go(func() {
			for n.work(ctx) {
			}
		})
	}
	return n
}

// EchoBasic builds echo-basic from the sigs.k8s.io/gateway-api/conformance
// module of go.mod into a temporary folder of t and returns its path.
func EchoBasic(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "echo-basic")
	out, err := exec.Command("go", "build", "-o", bin, "sigs.k8s.io/gateway-api/conformance/echo-basic").CombinedOutput()
	if err != nil {
		t.Fatalf("kubenode: building echo-basic: %v\n%s", err, out)
	}
	return bin
}

// PIDs returns the process ids of the echo-basic processes running now.
func (n *Node) PIDs() []int {
	n.mu.Lock()
	defer n.mu.Unlock()
	var pids []int
	for _, r := range n.running {
		for _, c := range r.containers {
			if c.proc != nil && !c.proc.exited() {
				pids = append(pids, c.proc.cmd.Process.Pid)
			}
		}
	}
	return pids
}

// logf logs through the test; every goroutine that calls it ends in the
// test's cleanup.
func (n *Node) logf(format string, args ...any) {
	n.t.Logf("kubenode: "+format, args...)
}

// register creates the Node with its InternalIP (where the API server
// reaches the log server) and kubelet port, and marks it Ready: the
// EndpointSlice controller leaves out the pods of a node that does not
// exist.
func (n *Node) register(port int) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	node, err := n.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:   n.Name,
		Labels: map[string]string{corev1.LabelHostname: n.Name, corev1.LabelOSStable: "linux"},
	}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	now := metav1.Now()
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("2"),
		corev1.ResourceMemory: resource.MustParse("4Gi"),
		corev1.ResourcePods:   resource.MustParse("250"), // podnet's subnets
	}
	node.Status = corev1.NodeStatus{
		Capacity:    capacity,
		Allocatable: capacity,
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: "127.0.0.1"},
			{Type: corev1.NodeHostName, Address: n.Name},
		},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(port)}},
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			Reason: "KubeletReady", Message: "restysync test node", LastHeartbeatTime: now, LastTransitionTime: now}},
		NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.37.2", OperatingSystem: "linux", Architecture: "amd64"},
	}
	_, err = n.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	return err
}

// work syncs one pod from the queue; false once the queue is shut down.
func (n *Node) work(ctx context.Context) bool {
	key, quit := n.queue.Get()
	if quit {
		return false
	}
	defer n.queue.Done(key)
	retry, err := n.sync(ctx, key)
	switch {
	case err != nil && ctx.Err() == nil:
		n.logf("pod %s: %v (retrying)", key, err)
		n.queue.AddRateLimited(key)
	case retry > 0:
		n.queue.Forget(key)
		n.queue.AddAfter(key, retry)
	default:
		n.queue.Forget(key)
	}
	return true
}

// sync brings the node's share of one pod to what its object asks: bind
// it, run it, report its status, or stop and delete it. A positive retry
// asks for another sync after that long (a container's restart back-off).
func (n *Node) sync(ctx context.Context, key string) (retry time.Duration, err error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil
	}
	pod, err := n.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		n.stop(key, "")
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	call, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	switch {
	case pod.Spec.NodeName == "":
		return 0, n.bind(call, pod)
	case pod.Spec.NodeName != n.Name:
		return 0, nil
	case pod.DeletionTimestamp != nil:
		n.stop(key, "")
		err := n.client.CoreV1().Pods(ns).Delete(call, name, metav1.DeleteOptions{
			GracePeriodSeconds: new(int64), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return 0, nil // gone, or another pod of that name
		}
		return 0, err
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return 0, nil
	}
	n.stop(key, pod.UID) // a pod of the same name before this one
	retry, err = n.run(pod)
	if err != nil {
		return 0, err
	}
	return retry, n.report(call, pod)
}

// bind assigns a pending pod to this node, as the scheduler would.
func (n *Node) bind(ctx context.Context, pod *corev1.Pod) error {
	err := n.client.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: n.Name},
	}, metav1.CreateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil // bound already, or deleted: the next event says which
	}
	return err
}

// run starts the pod's containers when they do not run yet and restarts
// the ones that exited, after a back-off.
func (n *Node) run(pod *corev1.Pod) (time.Duration, error) {
	key := pod.Namespace + "/" + pod.Name
	n.mu.Lock()
	r := n.running[key]
	n.mu.Unlock()
	if r == nil {
		var err error
		if r, err = n.prepare(pod); err != nil {
			return 0, err
		}
		n.mu.Lock()
		n.running[key] = r
		n.mu.Unlock()
	}
	var retry time.Duration
	for _, spec := range pod.Spec.Containers {
		n.mu.Lock()
		c, ok := r.containers[spec.Name]
		n.mu.Unlock()
		if !ok {
			continue // an image the node does not run
		}
		if c.proc != nil && !c.proc.exited() {
			continue
		}
		if c.proc != nil { // exited: restart after 1, 2, 4, 8, 10, 10… seconds
			backoff := min(time.Second<<min(c.restarts, 4), 10*time.Second)
			if wait := time.Until(c.proc.endedAt.Add(backoff)); wait > 0 {
				retry = max(retry, wait)
				continue
			}
		}
		if err := n.startContainer(pod, r, spec, c); err != nil {
			return 0, err
		}
	}
	return retry, nil
}

// prepare makes the pod's network namespace when one of its containers is
// echo-basic.
func (n *Node) prepare(pod *corev1.Pod) (*runningPod, error) {
	r := &runningPod{uid: pod.UID, started: now(), containers: map[string]*container{}}
	for _, c := range pod.Spec.Containers {
		if isEchoBasic(c.Image) {
			r.containers[c.Name] = &container{}
		}
	}
	if len(r.containers) == 0 {
		return r, nil
	}
	network, err := podnet.NewNamespace(pod.Namespace + "/" + pod.Name)
	if err != nil {
		network.Remove()
		return nil, fmt.Errorf("network namespace: %w", err)
	}
	r.net = network
	return r, nil
}

// startContainer writes the container's volumes and starts its process
// in the pod's network namespace, logging into the container's log; a
// goroutine marks it ready once its port answers.
func (n *Node) startContainer(pod *corev1.Pod, r *runningPod, spec corev1.Container, c *container) error {
	key := pod.Namespace + "/" + pod.Name
	mounts, err := n.writeVolumes(pod, spec)
	if err != nil {
		return fmt.Errorf("container %s: %w", spec.Name, err)
	}
	env, err := environment(pod, spec, r.net.IP, mounts)
	if err != nil {
		return fmt.Errorf("container %s: %w", spec.Name, err)
	}
	var args []string
	for _, a := range spec.Args {
		args = append(args, rewritePath(a, mounts))
	}
	logs := n.logBuffer(key + "/" + spec.Name)
	cmd := r.net.Command(n.echoBasic, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logs, logs
	// Its own process group, so stop reaches it whole; Pdeathsig ends it
	// should the test binary die without running its cleanups.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("container %s: %w", spec.Name, err)
	}
	p := &process{cmd: cmd, started: now(), done: make(chan struct{})}
	n.mu.Lock()
	if c.proc != nil {
		c.restarts++
	}
	c.proc, c.ready = p, false
	n.mu.Unlock()
	n.procs.Go(func() {
		err := cmd.Wait()
		n.mu.Lock()
		p.exit, p.endedAt = cmd.ProcessState.ExitCode(), time.Now()
		stopped := p.stopped
		n.mu.Unlock()
		close(p.done)
		if !stopped {
			n.logf("pod %s container %s exited: %v", key, spec.Name, err)
			n.queue.Add(key)
		}
	})
	addr := net.JoinHostPort(r.net.IP, strconv.Itoa(probePort(spec, env)))
	n.procs.Go(func() {
		if n.probe(addr, p) {
			n.mu.Lock()
			if c.proc == p {
				c.ready = true
			}
			n.mu.Unlock()
			n.queue.Add(key)
		}
	})
	return nil
}

// probe dials addr until it answers, the process exits or readyTimeout
// passes; true when it answered.
func (n *Node) probe(addr string, p *process) bool {
	deadline := time.After(readyTimeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return true
		}
		select {
		case <-p.done:
			return false
		case <-deadline:
			n.logf("%s did not answer within %s: %v", addr, readyTimeout, err)
			return false
		case <-tick.C:
		}
	}
}

// report writes the pod's status as a kubelet would: Running, its
// address, each container's state, and Ready once every container is.
func (n *Node) report(ctx context.Context, pod *corev1.Pod) error {
	key := pod.Namespace + "/" + pod.Name
	n.mu.Lock()
	r := n.running[key]
	if r == nil {
		n.mu.Unlock()
		return nil
	}
	status := pod.Status.DeepCopy()
	status.Phase = corev1.PodRunning
	status.HostIP, status.HostIPs = "127.0.0.1", []corev1.HostIP{{IP: "127.0.0.1"}}
	if r.net != nil {
		status.PodIP, status.PodIPs = r.net.IP, []corev1.PodIP{{IP: r.net.IP}}
	}
	status.StartTime = &r.started
	status.ContainerStatuses = nil
	allReady := true
	for _, spec := range pod.Spec.Containers {
		cs := corev1.ContainerStatus{Name: spec.Name, Image: spec.Image, ImageID: spec.Image}
		c, runs := r.containers[spec.Name]
		switch {
		case !runs: // not run here: ready as it is
			cs.Ready, cs.Started = true, new(true)
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: r.started}
		case c.proc == nil:
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
		case c.proc.exited():
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
				Message: fmt.Sprintf("exited with code %d", c.proc.exit)}
		default:
			cs.Ready, cs.Started = c.ready, new(true)
			cs.ContainerID = fmt.Sprintf("restysync://%d", c.proc.cmd.Process.Pid)
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: c.proc.started}
		}
		if runs {
			cs.RestartCount = c.restarts
		}
		allReady = allReady && cs.Ready
		status.ContainerStatuses = append(status.ContainerStatuses, cs)
	}
	n.mu.Unlock()
	ready := corev1.ConditionFalse
	if allReady {
		ready = corev1.ConditionTrue
	}
	for _, c := range []struct {
		kind   corev1.PodConditionType
		status corev1.ConditionStatus
	}{
		{corev1.PodScheduled, corev1.ConditionTrue},
		{corev1.PodReadyToStartContainers, corev1.ConditionTrue},
		{corev1.PodInitialized, corev1.ConditionTrue},
		{corev1.ContainersReady, ready},
		{corev1.PodReady, ready},
	} {
		setCondition(status, c.kind, c.status)
	}
	if apiequality.Semantic.DeepEqual(*status, pod.Status) {
		return nil
	}
	updated := pod.DeepCopy()
	updated.Status = *status
	_, err := n.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// setCondition sets the pod condition, keeping its transition time while
// its status stays.
func setCondition(status *corev1.PodStatus, kind corev1.PodConditionType, value corev1.ConditionStatus) {
	for i, c := range status.Conditions {
		if c.Type == kind {
			if c.Status != value {
				status.Conditions[i].Status, status.Conditions[i].LastTransitionTime = value, now()
			}
			return
		}
	}
	status.Conditions = append(status.Conditions, corev1.PodCondition{Type: kind, Status: value, LastTransitionTime: now()})
}

// now is the time in whole seconds, as the API stores it: a status built
// again from the same state equals the stored one, and is not written.
func now() metav1.Time {
	return metav1.NewTime(time.Now().Truncate(time.Second))
}

// stop ends the processes of the pod under key and removes its network
// namespace, unless it is the pod of uid keep.
func (n *Node) stop(key string, keep types.UID) {
	n.mu.Lock()
	r := n.running[key]
	if r == nil || r.uid == keep {
		n.mu.Unlock()
		return
	}
	delete(n.running, key)
	n.mu.Unlock()
	n.stopPod(r)
}

func (n *Node) stopPod(r *runningPod) {
	for _, c := range r.containers {
		if c.proc != nil {
			n.stopProcess(c.proc)
		}
	}
	if r.net != nil {
		r.net.Remove()
	}
}

// stopAll stops every pod: the test's end.
func (n *Node) stopAll() {
	n.mu.Lock()
	pods := n.running
	n.running = map[string]*runningPod{}
	n.mu.Unlock()
	for _, r := range pods {
		n.stopPod(r)
	}
}

// stopProcess sends SIGTERM to the process group, then SIGKILL if it has
// not exited within stopTimeout, and waits for it.
func (n *Node) stopProcess(p *process) {
	n.mu.Lock()
	p.stopped = true
	n.mu.Unlock()
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopTimeout):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// isEchoBasic says whether the image is echo-basic, whatever its registry
// and tag.
func isEchoBasic(image string) bool {
	name, _, _ := strings.Cut(image, "@")
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name = name[:i]
	}
	return filepath.Base(name) == "echo-basic"
}

// probePort is the port whose answer makes a container ready: its first
// TCP containerPort, else the port echo-basic serves on (HTTP_PORT or
// TCP_PORT, else 3000).
func probePort(spec corev1.Container, env []string) int {
	for _, p := range spec.Ports {
		if p.Protocol == "" || p.Protocol == corev1.ProtocolTCP {
			return int(p.ContainerPort)
		}
	}
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		if name == "HTTP_PORT" || name == "TCP_PORT" {
			if port, err := strconv.Atoi(value); err == nil {
				return port
			}
		}
	}
	return 3000
}

// environment is the container's environment: its env entries, values
// and fieldRefs resolved, volume paths rewritten.
func environment(pod *corev1.Pod, spec corev1.Container, podIP string, mounts map[string]string) ([]string, error) {
	if len(spec.EnvFrom) > 0 {
		return nil, errors.New("envFrom is not supported by the test node")
	}
	var env []string
	for _, e := range spec.Env {
		value := e.Value
		if e.ValueFrom != nil {
			if e.ValueFrom.FieldRef == nil {
				return nil, fmt.Errorf("env %s: only value and fieldRef are supported by the test node", e.Name)
			}
			var err error
			if value, err = fieldValue(pod, e.ValueFrom.FieldRef.FieldPath, podIP); err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
		}
		env = append(env, e.Name+"="+rewritePath(value, mounts))
	}
	return env, nil
}

// fieldValue is the value of a fieldRef's fieldPath, as the kubelet
// resolves it.
func fieldValue(pod *corev1.Pod, path, podIP string) (string, error) {
	if key, ok := strings.CutPrefix(path, "metadata.labels['"); ok && strings.HasSuffix(key, "']") {
		return pod.Labels[strings.TrimSuffix(key, "']")], nil
	}
	if key, ok := strings.CutPrefix(path, "metadata.annotations['"); ok && strings.HasSuffix(key, "']") {
		return pod.Annotations[strings.TrimSuffix(key, "']")], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs":
		return podIP, nil
	case "status.hostIP", "status.hostIPs":
		return "127.0.0.1", nil
	}
	return "", fmt.Errorf("fieldRef %q is not supported by the test node", path)
}

// rewritePath replaces a leading volume mountPath in value by the folder
// the volume was written to.
func rewritePath(value string, mounts map[string]string) string {
	for mountPath, dir := range mounts {
		if value == mountPath {
			return dir
		}
		if rest, ok := strings.CutPrefix(value, strings.TrimSuffix(mountPath, "/")+"/"); ok {
			return filepath.Join(dir, rest)
		}
	}
	return value
}

// writeVolumes writes the secret, configMap and emptyDir volumes the
// container mounts into the pod's folder, and returns mountPath → folder.
// A missing Secret or ConfigMap is an error: the sync is retried, as a
// kubelet waits for it.
func (n *Node) writeVolumes(pod *corev1.Pod, spec corev1.Container) (map[string]string, error) {
	mounts := map[string]string{}
	for _, m := range spec.VolumeMounts {
		var volume *corev1.Volume
		for i := range pod.Spec.Volumes {
			if pod.Spec.Volumes[i].Name == m.Name {
				volume = &pod.Spec.Volumes[i]
			}
		}
		if volume == nil {
			return nil, fmt.Errorf("volumeMount %s: no such volume", m.Name)
		}
		dir := filepath.Join(n.dir, string(pod.UID), m.Name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		files, items, err := n.volumeData(pod.Namespace, volume)
		if err != nil {
			return nil, fmt.Errorf("volume %s: %w", m.Name, err)
		}
		if len(items) > 0 {
			picked := map[string][]byte{}
			for _, item := range items {
				picked[item.Path] = files[item.Key]
			}
			files = picked
		}
		for name, data := range files {
			path := filepath.Join(dir, name)
			if !strings.HasPrefix(path, dir+string(filepath.Separator)) {
				return nil, fmt.Errorf("volume %s: path %q leaves the volume", m.Name, name)
			}
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				return nil, err
			}
			if err := os.WriteFile(path, data, 0o600); err != nil {
				return nil, err
			}
		}
		path := dir
		if m.SubPath != "" {
			path = filepath.Join(dir, m.SubPath)
		}
		mounts[m.MountPath] = path
	}
	return mounts, nil
}

// volumeData reads a volume's files and its items.
func (n *Node) volumeData(namespace string, v *corev1.Volume) (map[string][]byte, []corev1.KeyToPath, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	switch {
	case v.Secret != nil:
		s, err := n.client.CoreV1().Secrets(namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
		if err != nil {
			return nil, nil, err
		}
		return s.Data, v.Secret.Items, nil
	case v.ConfigMap != nil:
		cm, err := n.client.CoreV1().ConfigMaps(namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
		if err != nil {
			return nil, nil, err
		}
		files := map[string][]byte{}
		for k, v := range cm.Data {
			files[k] = []byte(v)
		}
		for k, v := range cm.BinaryData {
			files[k] = v
		}
		return files, v.ConfigMap.Items, nil
	case v.EmptyDir != nil:
		return nil, nil, nil
	}
	return nil, nil, errors.New("only secret, configMap and emptyDir volumes are supported by the test node")
}

// serveLogs serves /containerLogs over HTTPS on 127.0.0.1 (the API server
// does not check a kubelet's certificate unless it is given a CA for it)
// and returns the port.
func (n *Node) serveLogs(t testing.TB) int {
	t.Helper()
	certPEM, keyPEM := testcert.New(t, 1, time.Now().Add(24*time.Hour), n.Name)
	cert, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM))
	if err != nil {
		t.Fatalf("kubenode: %v", err)
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatalf("kubenode: %v", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", n.containerLogs)
	n.logServer = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go n.logServer.Serve(l)
	return l.Addr().(*net.TCPAddr).Port
}

// containerLogs answers a kubelet's log request: the container's output,
// from sinceTime or sinceSeconds on, with timestamps when asked.
func (n *Node) containerLogs(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("namespace") + "/" + r.PathValue("pod") + "/" + r.PathValue("container")
	n.mu.Lock()
	logs := n.logs[key]
	n.mu.Unlock()
	if logs == nil {
		http.Error(w, "no container "+key+" on this node", http.StatusNotFound)
		return
	}
	var since time.Time
	q := r.URL.Query()
	if s := q.Get("sinceTime"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			http.Error(w, "sinceTime: "+err.Error(), http.StatusBadRequest)
			return
		}
		since = t
	}
	if s := q.Get("sinceSeconds"); s != "" {
		secs, err := strconv.Atoi(s)
		if err != nil {
			http.Error(w, "sinceSeconds: "+err.Error(), http.StatusBadRequest)
			return
		}
		since = time.Now().Add(-time.Duration(secs) * time.Second)
	}
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write(logs.since(since, q.Get("timestamps") == "true"))
}

// logBuffer returns the log of a container, made on first use; a restart
// appends to it.
func (n *Node) logBuffer(key string) *logBuffer {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.logs[key] == nil {
		n.logs[key] = &logBuffer{}
	}
	return n.logs[key]
}

// logBuffer keeps a container's output as lines with the time each
// arrived, the last maxLogLines of them.
type logBuffer struct {
	mu      sync.Mutex
	partial []byte
	lines   []logLine
}

type logLine struct {
	at   time.Time
	text string
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.partial = append(b.partial, p...)
	now := time.Now()
	for {
		i := strings.IndexByte(string(b.partial), '\n')
		if i < 0 {
			break
		}
		b.lines = append(b.lines, logLine{at: now, text: string(b.partial[:i])})
		b.partial = b.partial[i+1:]
	}
	if extra := len(b.lines) - maxLogLines; extra > 0 {
		b.lines = append([]logLine(nil), b.lines[extra:]...)
	}
	return len(p), nil
}

// since returns the lines that arrived at or after t, each ended by a
// newline and led by its RFC 3339 time when timestamps.
func (b *logBuffer) since(t time.Time, timestamps bool) []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []byte
	for _, l := range b.lines {
		if l.at.Before(t) {
			continue
		}
		if timestamps {
			out = append(out, l.at.UTC().Format(time.RFC3339Nano)+" "...)
		}
		out = append(out, l.text+"\n"...)
	}
	return out
}
