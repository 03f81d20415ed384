//go:build linux

package kubenode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/restysync/restysync/agent/internal/testenv/kubeapi"
)

const waitTimeout = 60 * time.Second

// The smallest real cluster runs a Deployment: the controllers make its
// pods, the node runs them as echo-basic processes at their own addresses,
// the EndpointSlice controller lists them, pods/log reaches their output,
// and deleting the namespace ends them.
func TestNodeRunsADeployment(t *testing.T) {
	s := kubeapi.StartCluster(t, kubeapi.ClusterOptions{})
	node := Start(t, s.Config(), Options{})
	client, err := kubernetes.NewForConfig(s.Config())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const ns, app = "echo", "echo-v1"
	create(t, func() error {
		_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		return err
	})
	labels := map[string]string{"app": app}
	create(t, func() error {
		_, err := client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: app},
			Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{
				{Name: "http", Port: 8080, TargetPort: intstr.FromInt32(3000)}}},
		}, metav1.CreateOptions{})
		return err
	})
	create(t, func() error {
		_, err := client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: app},
			Spec: appsv1.DeploymentSpec{
				Replicas: new(int32(2)),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{
						Name:  app,
						Image: "registry.k8s.io/gateway-api/echo-basic:v1.5.1",
						Env: []corev1.EnvVar{
							{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
							{Name: "NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
							{Name: "SERVICE_NAME", Value: app},
						},
					}}},
				},
			},
		}, metav1.CreateOptions{})
		return err
	})

	var pods []corev1.Pod
	eventually(t, "two pods Running and Ready", func() error {
		list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		pods = list.Items
		if len(pods) != 2 {
			return fmt.Errorf("%d pods", len(pods))
		}
		for _, p := range pods {
			if p.Status.Phase != corev1.PodRunning || !podReady(p) || p.Status.PodIP == "" {
				return fmt.Errorf("pod %s: phase %s, ready %v, IP %q", p.Name, p.Status.Phase, podReady(p), p.Status.PodIP)
			}
		}
		return nil
	})
	if pods[0].Status.PodIP == pods[1].Status.PodIP {
		t.Fatalf("both pods have %s", pods[0].Status.PodIP)
	}
	if got := len(node.PIDs()); got != 2 {
		t.Errorf("%d processes run, want 2", got)
	}
	// Once Ready, a pod's status stays as written: no update after update.
	time.Sleep(2 * time.Second)
	for _, p := range pods {
		now, err := client.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if now.ResourceVersion != p.ResourceVersion {
			t.Errorf("pod %s written again without a change: resourceVersion %s, then %s", p.Name, p.ResourceVersion, now.ResourceVersion)
		}
	}

	var wantIPs []string
	for _, p := range pods {
		wantIPs = append(wantIPs, p.Status.PodIP)
	}
	slices.Sort(wantIPs)
	eventually(t, "the EndpointSlice controller lists both pods, ready", func() error {
		list, err := client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + app})
		if err != nil {
			return err
		}
		var got []string
		for _, slice := range list.Items {
			for _, e := range slice.Endpoints {
				if e.Conditions.Ready != nil && *e.Conditions.Ready {
					got = append(got, e.Addresses...)
				}
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, wantIPs) {
			return fmt.Errorf("ready endpoints %v, want %v", got, wantIPs)
		}
		return nil
	})

	// Each pod answers at its own address with its own name.
	// pods/log takes sinceTime in whole seconds: start at the next one.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
	since := metav1.Now()
	httpClient := &http.Client{Timeout: 5 * time.Second}
	for _, p := range pods {
		resp, err := httpClient.Get("http://" + p.Status.PodIP + ":3000/hello")
		if err != nil {
			t.Fatal(err)
		}
		var echo struct{ Pod, Namespace string }
		err = json.NewDecoder(resp.Body).Decode(&echo)
		resp.Body.Close()
		if err != nil || echo.Pod != p.Name || echo.Namespace != ns {
			t.Errorf("%s answered pod %q namespace %q (%v), want %s in %s", p.Status.PodIP, echo.Pod, echo.Namespace, err, p.Name, ns)
		}
	}

	// pods/log through the API server, from the second the requests
	// started: the request line is there; the start-up lines, older, are not.
	for _, p := range pods {
		eventually(t, "pods/log of "+p.Name+" shows the request", func() error {
			stream, err := client.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: app, SinceTime: &since}).Stream(ctx)
			if err != nil {
				return err
			}
			defer stream.Close()
			text, err := io.ReadAll(stream)
			if err != nil {
				return err
			}
			if !strings.Contains(string(text), "Echoing back request made to /hello") {
				return fmt.Errorf("log since %s: %q", since.Format(time.RFC3339), text)
			}
			if strings.Contains(string(text), "Starting server") {
				return fmt.Errorf("log since %s has the start-up lines: %q", since.Format(time.RFC3339), text)
			}
			return nil
		})
	}

	// Deleting the namespace deletes the pods; the node stops their
	// processes and deletes them with grace 0, and the namespace goes.
	pids := node.PIDs()
	if err := client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the namespace and its pods are gone", func() error {
		_, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			list, _ := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			return fmt.Errorf("namespace still there (%v), %d pods", err, len(list.Items))
		}
		return nil
	})
	if left := node.PIDs(); len(left) != 0 {
		t.Errorf("processes %v still run", left)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d of a deleted pod: kill -0 = %v, want no such process", pid, err)
		}
	}
}

func TestIsEchoBasic(t *testing.T) {
	for image, want := range map[string]bool{
		"registry.k8s.io/gateway-api/echo-basic:v1.5.1": true,
		"echo-basic":                              true,
		"localhost:5000/echo-basic@sha256:abc":    true,
		"registry.k8s.io/coredns/coredns:v1.12.2": false,
		"example.com/echo-basic-fork:v1":          false,
	} {
		if got := isEchoBasic(image); got != want {
			t.Errorf("isEchoBasic(%q) = %v, want %v", image, got, want)
		}
	}
}

func TestLogBufferSince(t *testing.T) {
	b := &logBuffer{}
	fmt.Fprint(b, "one\ntw")
	mid := time.Now()
	time.Sleep(10 * time.Millisecond)
	fmt.Fprint(b, "o\nthree\n")
	if got := string(b.since(time.Time{}, false)); got != "one\ntwo\nthree\n" {
		t.Errorf("all lines: %q", got)
	}
	if got := string(b.since(mid, false)); got != "two\nthree\n" {
		t.Errorf("lines since the middle: %q (a line counts from when it ends)", got)
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

func create(t *testing.T, f func() error) {
	t.Helper()
	if err := f(); err != nil {
		t.Fatal(err)
	}
}

// eventually polls check every 100 ms until it passes, and fails t with
// its last error after waitTimeout.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, waitTimeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
