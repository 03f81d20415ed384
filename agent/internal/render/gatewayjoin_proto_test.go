package render_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/websocket"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
)

// What the join backends answer besides the echo, as the suite's
// echo-basic does: /ws echoes WebSocket frames, and /retry/… fails the
// first succeedAfter requests of each uuid with responseCode.
type joinSpecial struct {
	ws       http.Handler
	mu       sync.Mutex
	attempts map[string]int
}

func newJoinSpecial() *joinSpecial {
	return &joinSpecial{
		ws:       websocket.Handler(func(c *websocket.Conn) { _, _ = io.Copy(c, c) }),
		attempts: map[string]int{},
	}
}

// serve answers r when it is one of the special requests.
func (s *joinSpecial) serve(w http.ResponseWriter, r *http.Request) bool {
	switch {
	case r.URL.Path == "/ws":
		s.ws.ServeHTTP(w, r)
		return true
	case strings.HasPrefix(r.URL.Path, "/retry/"):
		q := r.URL.Query()
		after, err := strconv.Atoi(q.Get("succeedAfter"))
		if q.Get("uuid") == "" || err != nil {
			http.Error(w, "uuid and succeedAfter are required", http.StatusBadRequest)
			return true
		}
		s.mu.Lock()
		n := s.attempts[q.Get("uuid")]
		fail := n < after
		if fail {
			s.attempts[q.Get("uuid")] = n + 1
		}
		s.mu.Unlock()
		if !fail {
			return false
		}
		// delayRetry (up to 5 s) delays a failing answer.
		if d, err := time.ParseDuration(q.Get("delayRetry")); err == nil && d > 0 && d <= 5*time.Second {
			time.Sleep(d)
		}
		if code, err := strconv.Atoi(q.Get("responseCode")); err == nil {
			w.WriteHeader(code)
			return true
		}
		// No responseCode: the connection is reset (TCP RST).
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			if tcp, ok := conn.(*net.TCPConn); ok {
				tcp.SetLinger(0)
			}
			conn.Close()
		}
		return true
	}
	return false
}

// TestGatewayJoinWebSocket is the suite's HTTPRouteBackendProtocolWebSocket:
// a backendRef to a Service port of appProtocol kubernetes.io/ws carries a
// WebSocket through the Gateway, text and binary frames both ways.
func TestGatewayJoinWebSocket(t *testing.T) {
	j := startJoin(t)
	m, _ := j.sync(t, j.snapshot(t, "tests/httproute-backend-protocol-websocket.yaml"))
	addr := gatewayAddress(t, m, "same-namespace")
	cfg, err := websocket.NewConfig("ws://"+addr+"/ws", "ws://gateway/"+t.Name())
	if err != nil {
		t.Fatal(err)
	}
	ws, err := websocket.DialConfig(cfg)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer ws.Close()
	ws.SetDeadline(time.Now().Add(5 * time.Second))
	var text string
	if err := websocket.Message.Send(ws, "Websocket Support!"); err != nil {
		t.Fatal(err)
	}
	if err := websocket.Message.Receive(ws, &text); err != nil || text != "Websocket Support!" {
		t.Fatalf("text frame: got %q, %v", text, err)
	}
	var binary []byte
	if err := websocket.Message.Send(ws, []byte{1, 2, 3, 4, 5, 6, 7}); err != nil {
		t.Fatal(err)
	}
	if err := websocket.Message.Receive(ws, &binary); err != nil || !bytes.Equal(binary, []byte{1, 2, 3, 4, 5, 6, 7}) {
		t.Fatalf("binary frame: got %v, %v", binary, err)
	}
}

// retryCase is one request of the suite's HTTPRouteRetry: the backend
// fails the first succeedAfter tries with code.
type retryCase struct {
	path               string
	code, succeedAfter int
	want               int
}

// TestGatewayJoinRetry is the suite's HTTPRouteRetry (its cases, and the
// number of tries attempts gives), then: a new route whose retry codes
// nginx has a location for is a push, and one of new codes a reload.
func TestGatewayJoinRetry(t *testing.T) {
	j := startJoin(t)
	s := j.snapshot(t, "tests/httproute-retry.yaml")
	m, _ := j.sync(t, s)
	addr := gatewayAddress(t, m, "same-namespace")
	const three, two = "/retry/code-500-attempts-3", "/retry/code-all-attempts-2"
	cases := []retryCase{
		{three, 500, 2, 200}, {three, 500, 4, 500}, {three, 503, 2, 503},
		{two, 500, 1, 200}, {two, 500, 3, 500}, {two, 502, 1, 200}, {two, 502, 3, 502},
		{two, 503, 1, 200}, {two, 503, 3, 503}, {two, 504, 1, 200}, {two, 504, 3, 504},
		// attempts counts retries: 3 retries are 4 tries, 2 are 3.
		{three, 500, 3, 200}, {two, 503, 2, 200},
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i, c := range cases {
		checkRetry(t, client, addr, c, i)
	}

	// A second route of the same codes: a push. Its own path, so that it
	// does not shadow the first.
	again := *s.HTTPRoutes.At(s.HTTPRoutes.Len() - 1)
	if again.Name != "retries" {
		t.Fatalf("the last HTTPRoute of the manifest is %s, want retries", again.Name)
	}
	again.Name = "retries-again"
	again.Spec = *again.Spec.DeepCopy()
	for i := range again.Spec.Rules {
		p := strings.Replace(*again.Spec.Rules[i].Matches[0].Path.Value, "/retry/", "/retry/again/", 1)
		again.Spec.Rules[i].Matches[0].Path.Value = &p
	}
	s.HTTPRoutes = model.ListOf(append(s.HTTPRoutes.Slice(), &again)...)
	_, res := j.sync(t, s)
	if res.Reloaded || res.RouteUpserts != 1 {
		t.Errorf("a route of known retry codes: %+v (reasons %q), want 1 route pushed and no reload", res.Outcome, res.ReloadReasons)
	}
	checkRetry(t, client, addr, retryCase{"/retry/again/code-500-attempts-3", 500, 3, 200}, 100)
	checkRetry(t, client, addr, retryCase{"/retry/again/code-500-attempts-3", 503, 1, 503}, 101)

	// Codes no route had: a reload brings their location.
	newCodes := *again.DeepCopy()
	newCodes.Name = "retries-new-codes"
	newCodes.Spec.Rules = newCodes.Spec.Rules[:1]
	p := "/retry/new"
	newCodes.Spec.Rules[0].Matches[0].Path.Value = &p
	newCodes.Spec.Rules[0].Retry.Codes = []gatewayv1.HTTPRouteRetryStatusCode{503, 429}
	s.HTTPRoutes = model.ListOf(append(s.HTTPRoutes.Slice(), &newCodes)...)
	m, res = j.sync(t, s)
	if !res.Reloaded || !slices.Contains(res.ReloadReasons, render.ReasonGatewayRetries) {
		t.Errorf("a route of new retry codes: %+v (reasons %q), want a reload for %q", res.Outcome, res.ReloadReasons, render.ReasonGatewayRetries)
	}
	if got := retryOf(t, m, "/retry/new"); got == nil || model.RetryLocation(got.Codes) != "@restysync_retry_429_503" {
		t.Errorf("the rule's retry: %+v, want codes 429 and 503", got)
	}
	// Workers of the config before may still take a connection or two
	// right after the reload: wait for 3 answers in a row, as the suite
	// does, for at most 3 s.
	for i, inRow := 0, 0; i < 30 && inRow < 3; i++ {
		if retryStatus(t, client, addr, retryCase{"/retry/new", 429, 3, 0}, 200+i) == 200 {
			inRow++
		} else {
			inRow = 0
			time.Sleep(100 * time.Millisecond)
		}
	}
	checkRetry(t, client, addr, retryCase{"/retry/new", 429, 3, 200}, 102)
	checkRetry(t, client, addr, retryCase{"/retry/new", 500, 1, 500}, 103)
}

// TestGatewayJoinRetryErrors: a rule with a retry and no codes is tried
// again after a reset connection (HTTPRouteRetryConnectionError) and
// after its timeouts.backendRequest ran out (HTTPRouteRetryBackendTimeout),
// to the same endpoint when it is the only one; a rule without a retry is
// not (one endpoint: nothing else to try). nginx does not count a try
// that failed on a kept-alive connection (ngx_http_upstream_next: it may
// have been closed by the backend while idle), so a reset on one buys a
// try more: the cases that run out of tries fail more often than that.
func TestGatewayJoinRetryErrors(t *testing.T) {
	j := startJoin(t)
	s := j.snapshot(t, "tests/httproute-retry.yaml")
	route := s.HTTPRoutes.At(s.HTTPRoutes.Len() - 1)
	backend := gatewayv1.Duration("500ms")
	attempts := 2
	prefix := func(p string) []gatewayv1.HTTPRouteMatch {
		return []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: ptr(gatewayv1.PathMatchPathPrefix), Value: &p}}}
	}
	refs := route.Spec.Rules[0].BackendRefs
	route.Spec.Rules = []gatewayv1.HTTPRouteRule{
		{Matches: prefix("/retry/errors"), BackendRefs: refs, Retry: &gatewayv1.HTTPRouteRetry{Attempts: &attempts},
			Timeouts: &gatewayv1.HTTPRouteTimeouts{BackendRequest: &backend}},
		{Matches: prefix("/retry/none"), BackendRefs: refs},
	}
	m, _ := j.sync(t, s)
	addr := gatewayAddress(t, m, "same-namespace")
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i, c := range []struct {
		path  string
		query url.Values
		want  int
	}{
		{"/retry/errors", url.Values{"succeedAfter": {"2"}}, 200},                                                // two resets, then an answer
		{"/retry/errors", url.Values{"succeedAfter": {"6"}}, 502},                                                // resets, more than the tries (see below)
		{"/retry/errors", url.Values{"succeedAfter": {"1"}, "delayRetry": {"2s"}, "responseCode": {"200"}}, 200}, // a timeout, then an answer
		{"/retry/errors", url.Values{"succeedAfter": {"3"}, "delayRetry": {"1s"}, "responseCode": {"200"}}, 504}, // three timeouts
		{"/retry/none", url.Values{"succeedAfter": {"3"}}, 502},
	} {
		c.query.Set("uuid", fmt.Sprintf("%s-%d-%d", t.Name(), i, time.Now().UnixNano()))
		resp, err := client.Get("http://" + addr + c.path + "?" + c.query.Encode())
		if err != nil {
			t.Errorf("%s %v: %v", c.path, c.query, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s %v: %d, want %d", c.path, c.query, resp.StatusCode, c.want)
		}
	}
}

// checkRetry sends c's request with a new uuid and wants c.want.
func checkRetry(t *testing.T, client *http.Client, addr string, c retryCase, i int) {
	t.Helper()
	if got := retryStatus(t, client, addr, c, i); got != c.want {
		t.Errorf("%s fails %d times with %d: got %d, want %d", c.path, c.succeedAfter, c.code, got, c.want)
	}
}

// retryStatus sends c's request with a new uuid and returns the status
// (0 for none).
func retryStatus(t *testing.T, client *http.Client, addr string, c retryCase, i int) int {
	t.Helper()
	q := url.Values{"responseCode": {strconv.Itoa(c.code)}, "succeedAfter": {strconv.Itoa(c.succeedAfter)},
		"uuid": {fmt.Sprintf("%s-%d-%d", t.Name(), i, time.Now().UnixNano())}}
	resp, err := client.Get("http://" + addr + c.path + "?" + q.Encode())
	if err != nil {
		t.Logf("%+v: %v", c, err)
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// retryOf is the retry of the Gateway location of path.
func retryOf(t *testing.T, m model.Model, path string) *model.RouteRetry {
	t.Helper()
	for r := range m.GatewayRoutes.All() {
		for _, l := range r.Locations {
			if l.Path == path && l.Rule != nil {
				return l.Rule.Retry
			}
		}
	}
	t.Fatalf("no Gateway location %s", path)
	return nil
}
