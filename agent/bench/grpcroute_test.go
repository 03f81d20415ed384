//go:build bench

package bench

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/restysync/restysync/agent/internal/testenv/podnet"
)

// grpcPodPort is where the B10-grpc pod serves h2c (HTTP/2 without TLS),
// beside podnet's HTTP/1.1 server.
const grpcPodPort = 8081

// grpcCall is the gRPC method every B10-grpc route matches, and its path.
const (
	grpcCallService = "bench.Echo"
	grpcCallMethod  = "Call"
)

// TestB10GRPCRoute measures B10-grpc: a new GRPCRoute → the first call
// answered by its backend through it, 1,000 GRPCRoutes present on a
// Gateway port that serves GRPCRoutes only (HTTP/2 to clients, grpc_pass
// to the backends). The backend is a pod's h2c server answering its name:
// what is measured is the route reaching nginx, not gRPC itself.
func TestB10GRPCRoute(t *testing.T) {
	if !wanted("B10-grpc") {
		t.Skip("not selected")
	}
	podnet.Require(t)
	c := startCluster(t)
	pod := podnet.New(t, "pod-b10g")
	l, err := pod.Listen(grpcPodPort)
	if err != nil {
		t.Fatal(err)
	}
	backend := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: h2c.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, pod.Name)
	}), &http2.Server{})}
	go backend.Serve(l)
	t.Cleanup(func() { backend.Close() })
	c.createAll([]any{serviceOn("b10g", "grpc", grpcPodPort), sliceOn("b10g", "grpc", grpcPodPort, pod.IP)})

	port, a, createRoute := startGatewayBench(t, c, func(gw gatewayclient.Interface, name, host string) error {
		_, err := gw.GatewayV1().GRPCRoutes(benchNS).Create(context.Background(), grpcRoute(name, host, "b10g"), metav1.CreateOptions{})
		return err
	})
	// HTTP/2 with prior knowledge over plain TCP, as a gRPC client
	// without TLS dials.
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http2.Transport{
		AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, _ string, _ *tls.Config) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, net.JoinHostPort(gatewayAddress, strconv.Itoa(port)))
		},
	}}
	waitFor := func(host string, bound time.Duration) time.Duration {
		t.Helper()
		return timeUntil(t, a, host, bound, func() (bool, string) {
			req, _ := http.NewRequest(http.MethodPost, "http://"+host+"/"+grpcCallService+"/"+grpcCallMethod, strings.NewReader(""))
			req.Header.Set("Content-Type", "application/grpc")
			status, body := fetch(client, req)
			return status == http.StatusOK && body == pod.Name, fmt.Sprintf("%d %s", status, body)
		})
	}
	waitFor("r999.b10.test", 120*time.Second)
	time.Sleep(time.Second)

	routed, reloads := timeNewRoutes(t, a, func(i int) (string, error) {
		host := "new" + strconv.Itoa(i) + ".b10.test"
		return host, createRoute("new"+strconv.Itoa(i), host)
	}, func(host string) time.Duration { return waitFor(host, waitBound) })
	report(t, Row{ID: "B10-grpc", What: "new GRPCRoute → first call answered, 1,000 GRPCRoutes present", Target: "p99 ≤ 100 ms, 0 reloads",
		Measured: fmt.Sprintf("%s; %d reloads", routed, reloads), Pass: routed.p99 <= 100*time.Millisecond && routed.n > 0 && reloads == 0,
		Note: "B10 for GRPCRoute (issue 30): an HTTP/2 Gateway port, grpc_pass to an h2c backend"})
}

// grpcRoute routes host's bench.Echo/Call to service's port 80 through
// the bench Gateway.
func grpcRoute(name, host, service string) *gatewayv1.GRPCRoute {
	port := gatewayv1.PortNumber(80)
	svc, method := grpcCallService, grpcCallMethod
	return &gatewayv1.GRPCRoute{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: benchNS},
		Spec: gatewayv1.GRPCRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "bench"}}},
			Hostnames:       []gatewayv1.Hostname{gatewayv1.Hostname(host)},
			Rules: []gatewayv1.GRPCRouteRule{{
				Matches: []gatewayv1.GRPCRouteMatch{{Method: &gatewayv1.GRPCMethodMatch{Service: &svc, Method: &method}}},
				BackendRefs: []gatewayv1.GRPCBackendRef{{BackendRef: gatewayv1.BackendRef{
					BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(service), Port: &port}}}}}}}}
}
