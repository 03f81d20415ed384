//go:build bench

package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/testenv/kubeapi"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
	"github.com/restysync/restysync/agent/internal/testenv/podnet"
)

// gatewayAddress is the bench Gateway's address, from the agent's pool.
const gatewayAddress = "127.0.60.1"

// TestB10GatewayAPI measures B10 (a new HTTPRoute → first 200 through it,
// 1,000 HTTPRoutes present; issue 29 calls it B9, a name the regex attack
// held already) and B10-B1 (an endpoint change behind an HTTPRoute, as B1).
func TestB10GatewayAPI(t *testing.T) {
	if !wanted("B10") {
		t.Skip("not selected")
	}
	podnet.Require(t)
	c := startCluster(t)
	pods := []*podnet.Pod{podnet.New(t, "pod-b10a"), podnet.New(t, "pod-b10b")}
	c.createAll([]any{service("b10"), slice("b10", pods[0].IP)})
	port, a, createRoute := startGatewayBench(t, c, func(gw gatewayclient.Interface, name, host string) error {
		_, err := gw.GatewayV1().HTTPRoutes(benchNS).Create(context.Background(), httpRoute(name, host, "b10"), metav1.CreateOptions{})
		return err
	})
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, net.JoinHostPort(gatewayAddress, strconv.Itoa(port)))
		},
		MaxIdleConnsPerHost: 8,
	}}
	waitFor := func(host, want string, bound time.Duration) time.Duration {
		t.Helper()
		return timeUntil(t, a, host, bound, func() (bool, string) {
			req, _ := http.NewRequest(http.MethodGet, "http://"+host+"/", nil)
			status, body := fetch(client, req)
			return status == http.StatusOK && (want == "" || body == want), fmt.Sprintf("%d %s", status, body)
		})
	}
	waitFor("r999.b10.test", "", 120*time.Second)
	time.Sleep(time.Second)

	routed, reloads := timeNewRoutes(t, a, func(i int) (string, error) {
		host := "new" + strconv.Itoa(i) + ".b10.test"
		return host, createRoute("new"+strconv.Itoa(i), host)
	}, func(host string) time.Duration { return waitFor(host, "", waitBound) })
	report(t, Row{ID: "B10", What: "new HTTPRoute → first 200, 1,000 HTTPRoutes present", Target: "p99 ≤ 100 ms, 0 reloads",
		Measured: fmt.Sprintf("%s; %d reloads", routed, reloads), Pass: routed.p99 <= 100*time.Millisecond && routed.n > 0 && reloads == 0,
		Note: "issue 29's B9; anchors (howardjohn/gateway-api-bench): agentgateway 17 ms, Istio 212 ms, NGINX Gateway Fabric 358 ms"})

	changes := 50
	if *quick {
		changes = 20
	}
	c.setEndpoints("b10", pods[0].IP)
	waitFor("r0.b10.test", pods[0].Name, waitBound)
	time.Sleep(200 * time.Millisecond)
	current := 0
	var latencies []time.Duration
	for range changes {
		current = 1 - current
		c.setEndpoints("b10", pods[current].IP)
		latencies = append(latencies, waitFor("r0.b10.test", pods[current].Name, waitBound))
	}
	b1 := summarize(latencies)
	report(t, Row{ID: "B10-B1", What: "endpoint change behind an HTTPRoute → served by the new endpoint, 1,000 HTTPRoutes", Target: "p99 as B1 (≤ 50 ms)",
		Measured: b1.String(), Pass: b1.p99 <= 50*time.Millisecond, Note: "issue 29's B9-B1; compare B1 of the same run"})
}

// httpRoute routes host "/" to service's port 80 through the bench Gateway.
func httpRoute(name, host, service string) *gatewayv1.HTTPRoute {
	port := gatewayv1.PortNumber(80)
	return &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: benchNS},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "bench"}}},
			Hostnames:       []gatewayv1.Hostname{gatewayv1.Hostname(host)},
			Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
				BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(service), Port: &port}}}}}}}}
}

// startGatewayBench installs the Gateway API, creates the bench Gateway
// on a free port and 1,000 routes "r<i>" of hosts "r<i>.b10.test" with
// create, then starts the agent; it returns the port, the agent, and
// create bound to the Gateway API's client.
func startGatewayBench(t *testing.T, c *cluster, create func(gw gatewayclient.Interface, name, host string) error) (int, *agent, func(name, host string) error) {
	t.Helper()
	kubeapi.InstallGatewayAPI(t, c.srv, false)
	// The routes are made before the agent starts: no need to throttle
	// them at client-go's default 5 per second.
	cfg := c.srv.Config()
	cfg.QPS, cfg.Burst = 100, 200
	gw, err := gatewayclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	port := nginxproc.FreePort(t)
	createGateway(t, gw, "bench", port)
	createRoute := func(name, host string) error { return create(gw, name, host) }
	createRoutes(t, 1000, createRoute)
	return port, startAgent(t, c, "--gateway-addresses", gatewayAddress), createRoute
}

// fetch sends req and returns the answer's status and body (trimmed, its
// first 4 KiB), or 0 and the error.
func fetch(client *http.Client, req *http.Request) (int, string) {
	resp, err := client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	return resp.StatusCode, strings.TrimSpace(string(data))
}

// createGateway creates the GatewayClass restysync and Gateway name with
// one HTTP listener on port, in benchNS.
func createGateway(t *testing.T, gw gatewayclient.Interface, name string, port int) {
	t.Helper()
	ctx := context.Background()
	class := &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "restysync"},
		Spec: gatewayv1.GatewayClassSpec{ControllerName: gatewayv1.GatewayController(model.GatewayControllerName)}}
	if _, err := gw.GatewayV1().GatewayClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gateway := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: benchNS},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "restysync", Listeners: []gatewayv1.Listener{
			{Name: "http", Protocol: gatewayv1.HTTPProtocolType, Port: gatewayv1.PortNumber(port)}}}}
	if _, err := gw.GatewayV1().Gateways(benchNS).Create(ctx, gateway, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// createRoutes creates n routes "r<i>" for hosts "r<i>.<…>" with create,
// 16 at a time.
func createRoutes(t *testing.T, n int, create func(name, host string) error) {
	t.Helper()
	work := make(chan int)
	errs := make(chan error, 16)
	for range 16 {
		go func() {
			var first error
			for i := range work {
				if err := create("r"+strconv.Itoa(i), "r"+strconv.Itoa(i)+".b10.test"); err != nil && first == nil {
					first = err
				}
			}
			errs <- first
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	for range 16 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// timeUntil calls try until it says done and returns how long that took;
// past bound the test fails with try's last word and the agent's log.
func timeUntil(t *testing.T, a *agent, what string, bound time.Duration, try func() (done bool, last string)) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		done, last := try()
		if done {
			return time.Since(start)
		}
		if time.Since(start) > bound {
			t.Fatalf("%s: not served within %s: %s\n%s", what, bound, last, tail(a.log.String(), 4000))
		}
		time.Sleep(pollPause)
	}
}

// pollPause is the pause between two tries of a latency sample. A client
// that polls without one holds one of this machine's two cores (and nginx's
// worker) for the whole sample, which the agent it measures then lacks; a
// real user's check polls too, and the pause adds at most itself to a sample.
const pollPause = time.Millisecond

// timeNewRoutes creates 30 routes (8 with -quick) one after the other with
// create, which returns the new route's host, times each until wait says
// it is served, and counts the reloads meanwhile.
func timeNewRoutes(t *testing.T, a *agent, create func(i int) (string, error), wait func(host string) time.Duration) (stats, int) {
	t.Helper()
	n := 30
	if *quick {
		n = 8
	}
	before := strings.Count(a.log.String(), "action=reload")
	var latencies []time.Duration
	for i := range n {
		host, err := create(i)
		if err != nil {
			t.Fatal(err)
		}
		latencies = append(latencies, wait(host))
		time.Sleep(300 * time.Millisecond)
	}
	return summarize(latencies), strings.Count(a.log.String(), "action=reload") - before
}
