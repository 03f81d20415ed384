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
	kubeapi.InstallGatewayAPI(t, c.srv, false)
	gw, err := gatewayclient.NewForConfig(c.srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	pods := []*podnet.Pod{podnet.New(t, "pod-b10a"), podnet.New(t, "pod-b10b")}
	c.createAll([]any{service("b10"), slice("b10", pods[0].IP)})
	port := nginxproc.FreePort(t)
	ctx := context.Background()
	class := &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "restysync"},
		Spec: gatewayv1.GatewayClassSpec{ControllerName: gatewayv1.GatewayController(model.GatewayControllerName)}}
	if _, err := gw.GatewayV1().GatewayClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gateway := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: benchNS},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "restysync", Listeners: []gatewayv1.Listener{
			{Name: "http", Protocol: gatewayv1.HTTPProtocolType, Port: gatewayv1.PortNumber(port)}}}}
	if _, err := gw.GatewayV1().Gateways(benchNS).Create(ctx, gateway, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createRoute := func(name, host string) error {
		_, err := gw.GatewayV1().HTTPRoutes(benchNS).Create(ctx, httpRoute(name, host, "b10"), metav1.CreateOptions{})
		return err
	}
	work := make(chan int)
	errs := make(chan error, 16)
	for range 16 {
		go func() {
			var first error
			for i := range work {
				if err := createRoute("r"+strconv.Itoa(i), "r"+strconv.Itoa(i)+".b10.test"); err != nil && first == nil {
					first = err
				}
			}
			errs <- first
		}()
	}
	for i := range 1000 {
		work <- i
	}
	close(work)
	for range 16 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}

	a := startAgent(t, c, "--gateway-addresses", gatewayAddress)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, net.JoinHostPort(gatewayAddress, strconv.Itoa(port)))
		},
		MaxIdleConnsPerHost: 8,
	}}
	waitFor := func(host, want string, bound time.Duration) time.Duration {
		t.Helper()
		start := time.Now()
		for {
			status, body := 0, ""
			req, _ := http.NewRequest(http.MethodGet, "http://"+host+"/", nil)
			if resp, err := client.Do(req); err == nil {
				data, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
				resp.Body.Close()
				status, body = resp.StatusCode, strings.TrimSpace(string(data))
			} else {
				body = err.Error()
			}
			if status == http.StatusOK && (want == "" || body == want) {
				return time.Since(start)
			}
			if time.Since(start) > bound {
				t.Fatalf("%s: no %q within %s: %d %s\n%s", host, want, bound, status, body, tail(a.log.String(), 4000))
			}
		}
	}
	waitFor("r999.b10.test", "", 120*time.Second)
	time.Sleep(time.Second)

	n := 30
	if *quick {
		n = 8
	}
	before := strings.Count(a.log.String(), "action=reload")
	var latencies []time.Duration
	for i := range n {
		host := "new" + strconv.Itoa(i) + ".b10.test"
		if err := createRoute("new"+strconv.Itoa(i), host); err != nil {
			t.Fatal(err)
		}
		latencies = append(latencies, waitFor(host, "", waitBound))
		time.Sleep(300 * time.Millisecond)
	}
	reloads := strings.Count(a.log.String(), "action=reload") - before
	routed := summarize(latencies)
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
	latencies = nil
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
