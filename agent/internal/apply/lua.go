package apply

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/restysync/restysync/agent/internal/luaapi"
	"github.com/restysync/restysync/agent/internal/model"
)

// LuaClient talks to the Lua config API over the unix socket.
type LuaClient struct {
	push *retryablehttp.Client
	// pushTimeout bounds one push, every attempt included, by its body's
	// size (pushTimeoutFor; tests make it short).
	pushTimeout func(bodyBytes int) time.Duration
	status      *http.Client
	// metricsHint is the size of Lua's last answer to GET /metrics, a
	// luaapi.StreamHint.
	metricsHint atomic.Value
}

// A push's time limit grows with its body: nginx's one worker decodes and
// applies it while it serves traffic, and the first push at 50,000
// Ingresses (14 MB) took over 10 s on a loaded machine. A push that ran out
// of time is not sent again: nginx is still working through it, and a copy
// queued behind it only makes the next one later (one start's first push
// took 51 s that way); the syncer's own retry comes after its backoff.
const (
	pushTimeoutBase  = 10 * time.Second
	pushTimeoutPerMB = 2 * time.Second
)

// pushTimeoutFor is the time limit of a push of bodyBytes.
func pushTimeoutFor(bodyBytes int) time.Duration {
	return pushTimeoutBase + time.Duration(bodyBytes>>20)*pushTimeoutPerMB
}

// NewLuaClient returns a client for the socket at path. Pushes retry a few
// times with backoff when nginx could not take them (no connection, a
// reset, a 5xx), within one time limit (pushTimeoutFor); status reads do
// not, as callers poll them. Every
// request carries the config API's secret, read from the file beside the
// socket (luaapi.SecretName) once it is there; without it only GET /status
// answers.
func NewLuaClient(socketPath string) *LuaClient {
	var transport http.RoundTripper = &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socketPath)
		},
		MaxIdleConns:        4,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
		MaxIdleConnsPerHost: 4,
	}
	transport = luaapi.WithSecret(transport, filepath.Dir(socketPath))
	push := retryablehttp.NewClient()
	push.HTTPClient = &http.Client{Transport: transport}
	push.RetryMax = 4
	push.RetryWaitMin = 20 * time.Millisecond
	push.RetryWaitMax = 500 * time.Millisecond
	// The syncer logs each push once; retryablehttp's per-attempt lines are noise.
	push.Logger = nil
	// A 4xx means Lua rejected the payload: retrying cannot help. Past
	// the push's time limit the policy does not retry (ctx is done).
	push.CheckRetry = func(ctx context.Context, resp *http.Response, err error) (bool, error) {
		if resp != nil && resp.StatusCode >= 400 && resp.StatusCode < 500 {
			return false, nil
		}
		return retryablehttp.DefaultRetryPolicy(ctx, resp, err)
	}
	push.ErrorHandler = retryablehttp.PassthroughErrorHandler
	return &LuaClient{
		push:        push,
		pushTimeout: pushTimeoutFor,
		status:      &http.Client{Transport: transport, Timeout: 2 * time.Second},
	}
}

// luaapi.Status asks the running nginx for its config hash, boot id and version.
func (c *LuaClient) Status(ctx context.Context) (luaapi.Status, error) {
	var s luaapi.Status
	err := c.getJSON(ctx, "/status", &s)
	return s, err
}

// Metrics reads Lua's counters and what it holds, for the agent's /metrics.
// It is asked on every Prometheus scrape and holds an entry per backend
// (4 MB at 50,000 backends), so it is decoded as it is read, 64 KB at a
// time (luaapi.ReadLuaMetrics). An answer that is not what Lua writes is
// asked for again and read whole, for luaapi.DecodeLuaMetrics to decode as
// encoding/json would, errors included.
func (c *LuaClient) Metrics(ctx context.Context) (luaapi.LuaMetrics, error) {
	resp, err := c.get(ctx, "/metrics")
	if err != nil {
		return luaapi.LuaMetrics{}, err
	}
	defer resp.Body.Close()
	hint, _ := c.metricsHint.Load().(luaapi.StreamHint)
	m, next, ok, err := luaapi.ReadLuaMetrics(io.LimitReader(resp.Body, maxLuaAnswer), hint)
	if err != nil {
		return luaapi.LuaMetrics{}, fmt.Errorf("reading lua's /metrics: %w", err)
	}
	if ok {
		c.metricsHint.Store(next)
		return m, nil
	}
	resp.Body.Close()
	return c.metricsWhole(ctx)
}

// metricsWhole reads GET /metrics whole and decodes it.
func (c *LuaClient) metricsWhole(ctx context.Context) (luaapi.LuaMetrics, error) {
	resp, err := c.get(ctx, "/metrics")
	if err != nil {
		return luaapi.LuaMetrics{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxLuaAnswer))
	if err != nil {
		return luaapi.LuaMetrics{}, fmt.Errorf("reading lua's /metrics: %w", err)
	}
	m, err := luaapi.DecodeLuaMetrics(body)
	if err != nil {
		return luaapi.LuaMetrics{}, fmt.Errorf("decoding lua's /metrics: %w", err)
	}
	return m, nil
}

// RequestMetrics returns the request metrics nginx holds.
func (c *LuaClient) RequestMetrics(ctx context.Context) (luaapi.RequestMetrics, error) {
	var m luaapi.RequestMetrics
	err := c.getJSON(ctx, "/metrics/requests", &m)
	return m, err
}

// Backends returns every backend Lua holds, by name.
func (c *LuaClient) Backends(ctx context.Context) (map[string]model.Backend, error) {
	var body struct {
		Backends []luaapi.BackendPayload `json:"backends"`
	}
	if err := c.getJSON(ctx, "/backends", &body); err != nil {
		return nil, err
	}
	held := make(map[string]model.Backend, len(body.Backends))
	for _, b := range body.Backends {
		h := model.Backend{Name: b.Name, Endpoints: b.Endpoints}
		if b.Policy != nil && *b.Policy != (model.Policy{}) {
			h.Policy = b.Policy
		}
		held[b.Name] = h
	}
	return held, nil
}

// Certificates returns every certificate Lua holds (names, hosts, hashes).
func (c *LuaClient) Certificates(ctx context.Context) ([]luaapi.HeldCertificate, error) {
	var body struct {
		Certificates []luaapi.HeldCertificate `json:"certificates"`
	}
	if err := c.getJSON(ctx, "/certificates", &body); err != nil {
		return nil, err
	}
	return body.Certificates, nil
}

// Routes returns every route Lua holds, by host.
func (c *LuaClient) Routes(ctx context.Context) (map[string]model.Route, error) {
	var body struct {
		Routes []luaapi.RoutePayload `json:"routes"`
	}
	if err := c.getJSON(ctx, "/routes", &body); err != nil {
		return nil, err
	}
	held := make(map[string]model.Route, len(body.Routes))
	for _, r := range body.Routes {
		held[r.Name] = model.Route{Host: r.Name, HTTPS: r.HTTPS, Locations: r.Locations, Ordered: r.Ordered, Listener: r.Listener}
	}
	return held, nil
}

// PushRoutes sends route upserts and removes in one request and returns
// the bytes sent. Lua takes all of it or none.
func (c *LuaClient) PushRoutes(ctx context.Context, update luaapi.RouteUpdate) (int, error) {
	return c.post(ctx, "routes", update)
}

// Push sends backend upserts and removes in one request and returns the
// bytes sent.
func (c *LuaClient) Push(ctx context.Context, update luaapi.BackendUpdate) (int, error) {
	return c.post(ctx, "backends", update)
}

// PushCertificates sends certificate upserts and removes in one request and
// returns the bytes sent. Lua takes all of it or none.
func (c *LuaClient) PushCertificates(ctx context.Context, update luaapi.CertificateUpdate) (int, error) {
	return c.post(ctx, "certificates", update)
}

// post sends update to POST /what.
func (c *LuaClient) post(ctx context.Context, what string, update any) (int, error) {
	body, err := encodeUpdate(update)
	if err != nil {
		return 0, fmt.Errorf("encoding %s: %w", what, err)
	}
	limit := c.pushTimeout(len(body))
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, "http://restysync/"+what, body)
	if err != nil {
		return 0, fmt.Errorf("building push request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.push.Do(req)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return len(body), fmt.Errorf("pushing %s (%d bytes): no answer within %s: %w", what, len(body), limit, err)
		}
		return len(body), fmt.Errorf("pushing %s: %w", what, err)
	}
	defer resp.Body.Close()
	reply, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode == http.StatusBadRequest {
		return len(body), fmt.Errorf("pushing %s: %w: %s", what, ErrRefused, bytes.TrimSpace(reply))
	}
	if resp.StatusCode != http.StatusOK {
		return len(body), fmt.Errorf("pushing %s: lua answered %s: %s", what, resp.Status, bytes.TrimSpace(reply))
	}
	return len(body), nil
}

// encodeUpdate returns json.Marshal(update), encoding luaapi's update
// types ({"upserts":[…],"removes":[…]}) one item at a time. json.Marshal
// keeps the buffer it encoded into for its next call (a sync.Pool, which
// the agent's frequent small encodings keep alive): one whole push of
// 50,000 routes left 16 MB there for good.
func encodeUpdate(update any) ([]byte, error) {
	switch u := update.(type) {
	case luaapi.RouteUpdate:
		return encodeItems(u.Upserts, u.Removes)
	case luaapi.BackendUpdate:
		return encodeItems(u.Upserts, u.Removes)
	case luaapi.CertificateUpdate:
		return encodeItems(u.Upserts, u.Removes)
	}
	return json.Marshal(update)
}

// encodeItems is encodeUpdate's {"upserts":upserts,"removes":removes}.
func encodeItems[T any](upserts []T, removes []string) ([]byte, error) {
	body := []byte(`{"upserts":`)
	if upserts == nil {
		body = append(body, "null"...)
	} else {
		body = append(body, '[')
		for i, item := range upserts {
			data, err := json.Marshal(item)
			if err != nil {
				return nil, err
			}
			if i > 0 {
				body = append(body, ',')
			}
			body = append(body, data...)
		}
		body = append(body, ']')
	}
	data, err := json.Marshal(removes)
	if err != nil {
		return nil, err
	}
	body = append(append(append(body, `,"removes":`...), data...), '}')
	return body, nil
}

func (c *LuaClient) getJSON(ctx context.Context, path string, into any) error {
	resp, err := c.get(ctx, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxLuaAnswer)).Decode(into); err != nil {
		return fmt.Errorf("decoding lua's %s: %w", path, err)
	}
	// The decoder stops after the value, before Lua's closing newline: a
	// body closed before its end closes the connection, and the next
	// request (a status read every sync) dials a new one, with its
	// buffers (some 5 KB of garbage a sync).
	io.CopyN(io.Discard, resp.Body, maxLuaTrailer)
	return nil
}

// maxLuaTrailer bounds what getJSON reads after the JSON value so that
// the connection is used again: Lua sends a newline.
const maxLuaTrailer = 4 << 10

// maxLuaAnswer bounds the body of a GET read from Lua.
const maxLuaAnswer = 256 << 20

// get GETs path from Lua; the caller closes the body of the 200 returned.
func (c *LuaClient) get(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://restysync"+path, nil)
	if err != nil {
		return nil, fmt.Errorf("building request for %s: %w", path, err)
	}
	resp, err := c.status.Do(req)
	if err != nil {
		return nil, fmt.Errorf("asking lua for %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return nil, fmt.Errorf("asking lua for %s: %s: %s", path, resp.Status, bytes.TrimSpace(msg))
	}
	return resp, nil
}

// ErrRejected means nginx refused the new config in its own words (an
// [emerg] line, or init_by_lua failing) and runs the previous one.
var ErrRejected = errors.New("nginx rejected the new config")

// ErrRefused means Lua refused an update as invalid (400): the bodies the
// agent sends are checked before, so what Lua refuses comes from input
// the agent's checks let through (a regex PCRE refuses), like a config
// nginx rejects.
var ErrRefused = errors.New("lua refused the update")

// ErrNotConfirmed means nginx did not report the new config hash in time
// and said nothing against it: it may be slow (a loaded node, a stopped
// master) and take it later. It is no verdict on the config.
var ErrNotConfirmed = errors.New("nginx has not confirmed the new config yet")
