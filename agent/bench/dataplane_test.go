//go:build bench

package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/luaapi"
	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
	"github.com/restysync/restysync/agent/internal/testenv/syncbuf"
	"github.com/restysync/restysync/lua"
)

// B3 is the data-plane cost of the Lua balancer: the same nginx binary runs
// three times (four with B3-router's), side by side.
//
//   - "lua": nginx.conf exactly as render.Render writes it (request
//     metrics on) for one host with
//     one Prefix "/" location, its three endpoints and its route pushed over
//     the config API. The host is routed by Lua (as every host is), so
//     every request runs access_by_lua (restysync.router.route, in the
//     default server's "location /") and balancer_by_lua
//     (restysync.balancer.balance).
//   - "static": the same rendered nginx.conf, with that one location changed
//     to proxy to a static `upstream` of the same three endpoints, with the
//     keepalive lines of the Lua upstream, and no Lua in the location.
//     Everything else (global settings, proxy_set_header lines, the Lua API
//     server, init_by_lua) is byte for byte the same, so the two differ in
//     the per-request Lua work and nothing else. It is rendered with the
//     request metrics off (nothing to record without Lua in the location).
//   - "lua-nometrics": "lua" rendered with the request metrics per Ingress
//     off (--ingress-nginx-metrics=false), for B3-metrics: "lua" has them
//     on, as the agent by default.
//
// wrk drives them in interleaved rounds, alternating which goes first. The
// backends are minimal Go HTTP/1.1 servers in a separate process (this test
// binary, re-executed as TestBackendProcess) on 127.0.0.2-4.

const (
	b3Host    = "bench.example.com"
	b3Backend = "bench/web:80"
	// b3Upstream names the static upstream; b3LuaUpstream is the template's.
	b3Upstream    = "restysync_static"
	b3LuaUpstream = "restysync_upstream"
	// b3Connections is wrk's -c: keep-alive connections, one wrk thread.
	b3Connections = 32
	// b3BackendsEnv, when set to N, makes TestBackendProcess serve N
	// backends on the listeners it inherits as fds 3, 4, ...
	b3BackendsEnv = "RESTYSYNC_BENCH_BACKENDS"
)

func TestB3DataPlane(t *testing.T) {
	if !wanted("B3") {
		t.Skip("B3 is not among -only")
	}
	wrk := lookWrk(t)
	nginxproc.Binary(t)

	rounds, duration := 7, 15*time.Second
	if *quick {
		rounds, duration = 3, 5*time.Second
	}

	// CPUs: nginx (master and worker) on one, wrk and the backends on the other.
	pin := b3Pinning()
	backends, backendPID := startBackendProcess(t, 3, pin)
	variants := []*b3Variant{
		startLuaVariant(t, backends, "lua", true),
		startStaticVariant(t, backends),
		startLuaVariant(t, backends, "lua-nometrics", false),
	}
	base, baseErr := startBaseLuaVariant(t, backends)
	if baseErr != nil {
		t.Logf("no %s variant: %v", b3BaseCommit, baseErr)
	} else {
		variants = append(variants, base)
	}
	for _, v := range variants {
		pin.nginx(t, v)
		checkSpread(t, v, backends)
	}

	// fail reports the row as failed with why, and ends the test.
	fail := func(format string, args ...any) {
		t.Helper()
		reason := fmt.Sprintf(format, args...)
		report(t, Row{ID: "B3", What: "rps Lua ÷ static upstream", Target: "median ≥ 0.95", Measured: "not measured: " + oneLine(reason)})
		t.Fatal(reason)
	}

	// Warm-up: in a full run with a 1 s warm-up, static nginx still needed
	// ~25 µs per request in round 1 against ~21.5 µs from round 4 on,
	// which biased the first rounds toward Lua.
	warmup := 5 * time.Second
	if *quick {
		warmup = 2 * time.Second
	}
	for _, v := range variants {
		if _, err := runWrk(wrk, pin, v, backendPID, warmup); err != nil {
			fail("warm-up of %s: %v", v.name, err)
		}
	}

	// Rounds: lua and static back to back, the order alternating. This
	// machine is shared (and virtual). A round is measured again, after a
	// bounded wait for the machine to be quiet, while the time budget lasts,
	// if during either run other processes or the hypervisor took more than
	// b3NoisyCPU of a CPU, or the nginx worker was under b3Saturated busy:
	// then nginx was not the bottleneck (wrk and the backends were, or the
	// loop stalled on something outside it), and its req/s is no data-plane
	// cost. If the
	// budget runs out, the least noisy of the noisy rounds fill up the
	// count, the note says so, and the rows fail as inconclusive.
	var (
		clean, noisy []b3Round
		attempts     int
		started      = time.Now()
	)
	budget, quietWait := 6*time.Minute, 20*time.Second
	if *quick {
		budget, quietWait = 40*time.Second, 3*time.Second
	}
	for len(clean) < rounds && (attempts < rounds || time.Since(started) < budget) && attempts < 3*rounds {
		attempts++
		if waited, quiet := waitQuiet(quietWait); waited > 0 {
			t.Logf("waited %s for other processes to leave the CPUs (quiet: %v)", waited.Round(time.Second), quiet)
		}
		round := b3Round{}
		order := slices.Clone(variants)
		if attempts%2 == 0 {
			slices.Reverse(order)
		}
		for _, v := range order {
			r, err := runWrk(wrk, pin, v, backendPID, duration)
			if err != nil {
				fail("round %d, %s: %v", attempts, v.name, err)
			}
			switch v.name {
			case "lua":
				round.lua = r
			case "static":
				round.static = r
			case "lua-nometrics":
				round.nometrics = r
			default:
				round.base = r
			}
			t.Logf("round %d %-6s %9.0f req/s  p99 %-9s  nginx worker %5.1f µs CPU/request (user %4.1f), busy %3.0f%%; wrk+backends busy %3.0f%%; other processes %3.0f%%, stolen %3.0f%%",
				attempts, v.name, r.rps, r.p99, micros(r.cpuPerRequest()), micros(r.userPerRequest()), 100*r.busy(), 100*r.loadBusy(), 100*r.othersBusy(), 100*r.stolenBusy())
		}
		if round.noisy() {
			noisy = append(noisy, round)
			t.Logf("round %d: ratio rps %.4f, p99 %.4f — %s, measuring again", attempts, round.rpsRatio(), round.p99Ratio(), round.why())
			continue
		}
		clean = append(clean, round)
		t.Logf("round %d: ratio rps %.4f, p99 %.4f", attempts, round.rpsRatio(), round.p99Ratio())
	}
	slices.SortStableFunc(noisy, func(a, b b3Round) int { return cmp.Compare(a.badness(), b.badness()) })
	used := clean
	noisyUsed := 0
	for len(used) < rounds && noisyUsed < len(noisy) {
		used = append(used, noisy[noisyUsed])
		noisyUsed++
	}

	of := func(f func(b3Round) float64) []float64 { return mapSlice(used, f) }
	rpsRatios := of(b3Round.rpsRatio)
	p99Ratios := of(b3Round.p99Ratio)
	rpsRatio, p99Ratio := median(rpsRatios), median(p99Ratios)
	luaRPS := median(of(func(r b3Round) float64 { return r.lua.rps }))
	staticRPS := median(of(func(r b3Round) float64 { return r.static.rps }))
	luaP99 := median(of(func(r b3Round) float64 { return r.lua.p99.Seconds() }))
	staticP99 := median(of(func(r b3Round) float64 { return r.static.p99.Seconds() }))
	luaCPU := median(of(func(r b3Round) float64 { return micros(r.lua.cpuPerRequest()) }))
	staticCPU := median(of(func(r b3Round) float64 { return micros(r.static.cpuPerRequest()) }))
	cpuDelta := median(of(func(r b3Round) float64 { return micros(r.lua.cpuPerRequest() - r.static.cpuPerRequest()) }))
	cpuRatio := median(of(func(r b3Round) float64 {
		return r.static.cpuPerRequest().Seconds() / r.lua.cpuPerRequest().Seconds()
	}))
	luaBusy := median(of(func(r b3Round) float64 { return 100 * r.lua.busy() }))
	staticBusy := median(of(func(r b3Round) float64 { return 100 * r.static.busy() }))
	luaLoad := median(of(func(r b3Round) float64 { return 100 * r.lua.loadBusy() }))
	staticLoad := median(of(func(r b3Round) float64 { return 100 * r.static.loadBusy() }))

	noise := fmt.Sprintf("%d of %d rounds measured again because other processes or the hypervisor (steal) took over %.0f%% of a CPU, or the nginx worker was under %.0f%% busy", len(noisy), attempts, 100*b3NoisyCPU, 100*b3Saturated)
	if noisyUsed > 0 {
		noise = fmt.Sprintf("NOISY: %d of the %d rounds counted lost over %.0f%% of a CPU to other processes or the hypervisor (steal), or had the nginx worker under %.0f%% busy; the time budget was spent (%d rounds tried)", noisyUsed, len(used), 100*b3NoisyCPU, 100*b3Saturated, attempts)
	}
	note := fmt.Sprintf("%d interleaved rounds of wrk -t1 -c%d -d%s --latency (keep-alive), order alternating; "+
		"1 nginx worker each (worker_processes 1); Lua = the rendered nginx.conf, static = the same file with a static upstream of the same 3 endpoints and no Lua in the location, keepalive 320 both; %s; "+
		"busy (median, share of one CPU) nginx worker Lua %.0f%% static %.0f%%, wrk+backends Lua %.0f%% static %.0f%%; "+
		"nginx worker CPU per request (medians) Lua %.1f µs, static %.1f µs, Lua − static per round %+.1f µs, static ÷ Lua per round %s (≈ the rps ratio if nginx alone were the bottleneck); %s",
		len(used), b3Connections, duration, pin.describe(), luaBusy, staticBusy, luaLoad, staticLoad,
		luaCPU, staticCPU, cpuDelta, floor3(cpuRatio), noise)

	// The shown numbers are rounded toward failing: a pass is never a
	// rounding artefact. Nor is it an artefact of noise: with noisy rounds
	// counted the rows fail as inconclusive.
	verdictOf := func(ok bool) (bool, string) {
		if noisyUsed > 0 {
			return false, "inconclusive (noisy): "
		}
		return ok, ""
	}
	rpsPass, rpsPrefix := verdictOf(rpsRatio >= 0.95)
	p99Pass, p99Prefix := verdictOf(p99Ratio <= 1.10)
	report(t, Row{
		ID:     "B3",
		What:   "rps Lua ÷ static upstream",
		Target: "median ≥ 0.95",
		Measured: fmt.Sprintf("%smedian %s (min–max %s–%s, n=%d); req/s median Lua %.0f, static %.0f",
			rpsPrefix, floor3(rpsRatio), floor3(slices.Min(rpsRatios)), floor3(slices.Max(rpsRatios)), len(rpsRatios), luaRPS, staticRPS),
		Pass: rpsPass,
		Note: note,
	})
	report(t, Row{
		ID:     "B3-p99",
		What:   "p99 latency Lua ÷ static",
		Target: "≤ 1.10",
		Measured: fmt.Sprintf("%smedian %s (min–max %s–%s, n=%d); p99 median Lua %s, static %s",
			p99Prefix, ceil3(p99Ratio), ceil3(slices.Min(p99Ratios)), ceil3(slices.Max(p99Ratios)), len(p99Ratios),
			secondsString(luaP99), secondsString(staticP99)),
		Pass: p99Pass,
		Note: "same runs as B3",
	})
	metricsDelta := median(of(func(r b3Round) float64 { return micros(r.lua.cpuPerRequest() - r.nometrics.cpuPerRequest()) }))
	noMetricsCPU := median(of(func(r b3Round) float64 { return micros(r.nometrics.cpuPerRequest()) }))
	metricsUserDelta := median(of(func(r b3Round) float64 {
		return micros(r.lua.userPerRequest() - r.nometrics.userPerRequest())
	}))
	luaUser := median(of(func(r b3Round) float64 { return micros(r.lua.userPerRequest()) }))
	noMetricsUser := median(of(func(r b3Round) float64 { return micros(r.nometrics.userPerRequest()) }))
	metricsPass, metricsPrefix := verdictOf(metricsDelta <= 0.3)
	report(t, Row{
		ID:     "B3-metrics",
		What:   "nginx CPU per request, request metrics per Ingress on − off",
		Target: "≤ +0.3 µs",
		Measured: fmt.Sprintf("%smedian %+.2f µs per round (on %.1f µs, off %.1f µs, static %.1f µs); user space only %+.2f µs (on %.1f µs, off %.1f µs)",
			metricsPrefix, metricsDelta, luaCPU, noMetricsCPU, staticCPU, metricsUserDelta, luaUser, noMetricsUser),
		Pass: metricsPass,
		Note: "same rounds as B3, a third nginx in each: the same rendered nginx.conf without the request metrics (--ingress-nginx-metrics=false: no restysync_requests dict, no recording, no metric labels in the routes); B3's Lua is the default, metrics on. " +
			"The verdict is on the whole CPU time; the user-space part (utime, 10 ms ticks) is shown beside it because the metrics add no system call per request, and the kernel's share (most of a request's CPU here: the loopback network stack) is where this shared virtual machine's noise is",
	})
	if baseErr != nil {
		report(t, Row{ID: "B3-router", What: "nginx CPU per request, this build's Lua − " + b3BaseCommit + "'s", Target: "≤ +0.5 µs",
			Measured: "not measured: " + oneLine(baseErr.Error())})
		return
	}
	routerDelta := median(of(func(r b3Round) float64 { return micros(r.lua.cpuPerRequest() - r.base.cpuPerRequest()) }))
	baseCPU := median(of(func(r b3Round) float64 { return micros(r.base.cpuPerRequest()) }))
	routerPass, routerPrefix := verdictOf(routerDelta <= 0.5)
	report(t, Row{
		ID:     "B3-router",
		What:   "nginx CPU per request, this build's Lua − " + b3BaseCommit + "'s (before every host was routed)",
		Target: "≤ +0.5 µs",
		Measured: fmt.Sprintf("%smedian %+.2f µs per round (this build %.1f µs, %s %.1f µs, static %.1f µs)",
			routerPrefix, routerDelta, luaCPU, b3BaseCommit, baseCPU, staticCPU),
		Pass: routerPass,
		Note: "same rounds as B3, a third nginx in each: the same nginx.conf with the Lua modules of " + b3BaseCommit + " (git show)",
	})
}

// b3BaseCommit is the build B3-router compares the per-request cost of the
// router with: the last commit before every host was routed in Lua.
const b3BaseCommit = "bd243a1"

// startBaseLuaVariant is startLuaVariant with the Lua modules of
// b3BaseCommit, read with git from this checkout.
func startBaseLuaVariant(t *testing.T, backends []string) (*b3Variant, error) {
	t.Helper()
	files, err := exec.Command("git", "ls-tree", "--full-tree", "--name-only", b3BaseCommit, "lua/restysync/").Output()
	if err != nil {
		return nil, fmt.Errorf("listing the Lua modules of %s: %v", b3BaseCommit, err)
	}
	prefix, port, conf := renderPrefix(t, backends, false)
	for _, name := range strings.Fields(string(files)) {
		data, err := exec.Command("git", "show", b3BaseCommit+":"+name).Output()
		if err != nil {
			return nil, fmt.Errorf("reading %s of %s: %v", name, b3BaseCommit, err)
		}
		if err := os.WriteFile(filepath.Join(prefix, "lua", "restysync", filepath.Base(name)), data, 0o644); err != nil {
			return nil, err
		}
	}
	// The modules of b3BaseCommit route in restysync.balancer, where this
	// build's nginx.conf names restysync.router.
	conf = bytes.ReplaceAll(conf, []byte(`require("restysync.router").route(`), []byte(`require("restysync.balancer").route(`))
	if err := os.WriteFile(filepath.Join(prefix, render.ConfigName), conf, 0o644); err != nil {
		return nil, err
	}
	v := &b3Variant{name: "lua@" + b3BaseCommit, nginx: nginxproc.Start(t, prefix), port: port}
	pushBackends(t, v.nginx, b3Model(backends).Backends.Slice())
	pushRoutes(t, v.nginx, b3Model(backends), false)
	return v, nil
}

// b3NoisyCPU is the share of one CPU that other processes and the
// hypervisor (steal time) may take during a run before its round is
// measured again.
const b3NoisyCPU = 0.15

// b3Saturated is how busy the nginx worker must keep its CPU during a run
// for the run's req/s to measure nginx: below it, wrk and the backends (or
// something outside) were the bottleneck and the req/s ratio says nothing
// about the data plane's cost (a full run on 2026-12-04 counted rounds
// where the static nginx was 80 % busy and wrk 99 %: rps ratio 0.967 while
// the worker CPU per request gave 0.938).
const b3Saturated = 0.85

// b3Round is one lua run and one static run, back to back.
type b3Round struct{ lua, static, base, nometrics wrkResult }

func (r b3Round) rpsRatio() float64 { return r.lua.rps / r.static.rps }
func (r b3Round) p99Ratio() float64 { return r.lua.p99.Seconds() / r.static.p99.Seconds() }
func (r b3Round) noisy() bool       { return r.why() != "" }

// badness orders noisy rounds: the CPU share lost to others and the
// hypervisor plus the share by which the less busy run fell short of
// b3Saturated.
func (r b3Round) badness() float64 {
	short := 0.0
	for _, w := range []wrkResult{r.lua, r.static} {
		short = max(short, b3Saturated-w.busy())
	}
	return r.noise() + short
}

// why says what makes the round noisy, or "".
func (r b3Round) why() string {
	if r.noise() > b3NoisyCPU {
		return "other processes or the hypervisor took CPU time"
	}
	for _, w := range []wrkResult{r.lua, r.static} {
		if w.busy() < b3Saturated {
			return "nginx was not the bottleneck of a run (its worker under the saturation mark)"
		}
	}
	return ""
}

// noise is the larger share of one CPU that other processes and the
// hypervisor took during either run.
func (r b3Round) noise() float64 {
	return max(r.lua.othersBusy()+r.lua.stolenBusy(), r.static.othersBusy()+r.static.stolenBusy())
}

func micros(d time.Duration) float64 { return d.Seconds() * 1e6 }

// waitQuiet waits until the CPUs were less than 10% busy (of one CPU) over
// half a second, or until max has passed. It returns how long it waited
// and whether the machine was quiet in the end.
func waitQuiet(max time.Duration) (time.Duration, bool) {
	start := time.Now()
	for {
		before, stolenBefore, err := machineBusy()
		if err != nil {
			return 0, false
		}
		time.Sleep(500 * time.Millisecond)
		after, stolenAfter, err := machineBusy()
		if err != nil {
			return 0, false
		}
		quiet := (after - before + stolenAfter - stolenBefore).Seconds() < 0.1*0.5
		if quiet || time.Since(start) >= max {
			return time.Since(start) - 500*time.Millisecond, quiet
		}
	}
}

// machineBusy returns the CPU time all processes have used (user, nice
// and system of every CPU) and the time the hypervisor took from the CPUs
// (steal), from /proc/stat.
func machineBusy() (busy, stolen time.Duration, err error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: %q", line)
	}
	var ticks [8]int64 // user nice system idle iowait irq softirq steal
	for i := range ticks {
		if ticks[i], err = strconv.ParseInt(f[1+i], 10, 64); err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: %q: %w", line, err)
		}
	}
	const tick = time.Second / 100 // USER_HZ is 100 on Linux
	return time.Duration(ticks[0]+ticks[1]+ticks[2]) * tick, time.Duration(ticks[7]) * tick, nil
}

// lookWrk returns the path of wrk; without it the test fails when CI=true
// and is skipped otherwise.
func lookWrk(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("wrk")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("wrk needed (CI=true): %v", err)
		}
		t.Skipf("skipping: %v (go tool task bench-deps installs it)", err)
	}
	return path
}

// b3Variant is one running nginx under load.
type b3Variant struct {
	name  string
	nginx *nginxproc.Nginx
	port  int
}

func (v *b3Variant) url() string { return fmt.Sprintf("http://127.0.0.1:%d/", v.port) }

// b3Model is one host whose "/" goes to one backend.
func b3Model(backends []string) model.Model {
	b := model.Backend{Name: b3Backend}
	for _, addr := range backends {
		host, port, _ := net.SplitHostPort(addr)
		p, _ := strconv.Atoi(port)
		b.Endpoints = append(b.Endpoints, model.Endpoint{Address: host, Port: int32(p)})
	}
	return model.Model{
		Servers: model.ListOf(&model.Server{
			Host:      b3Host,
			Locations: []model.Location{{Path: "/", PathType: model.PathPrefix, Backend: b3Backend, Ingress: "bench/web"}},
		}),
		Backends: model.ListOf(b),
	}
}

// renderPrefix makes a prefix with the Lua modules and the rendered
// nginx.conf for backends, and returns it, the HTTP port and the config.
func renderPrefix(t *testing.T, backends []string, requestMetrics bool) (string, int, []byte) {
	t.Helper()
	prefix := nginxproc.TempPrefix(t)
	port := nginxproc.FreePort(t)
	s := render.Settings{
		SharedDir:       prefix,
		HTTPPort:        port,
		HTTPSPort:       nginxproc.FreePort(t),
		ListenAddress:   "127.0.0.1",
		LoadModules:     nginxproc.DebianLoadModules(),
		WorkerProcesses: "1",
	}
	if requestMetrics {
		rm := render.DefaultRequestMetrics()
		s.RequestMetrics = &rm
	}
	cfg, err := render.Render(b3Model(backends), s)
	if err != nil {
		t.Fatalf("rendering nginx.conf: %v", err)
	}
	if err := lua.WriteTo(prefix, os.WriteFile); err != nil {
		t.Fatalf("writing the Lua modules: %v", err)
	}
	if _, err := render.WriteFallbackCertificate(prefix); err != nil {
		t.Fatal(err)
	}
	return prefix, port, cfg.Bytes
}

// startLuaVariant runs the rendered nginx.conf, with the request metrics
// per Ingress on (the agent's default) or off (--ingress-nginx-metrics=false).
func startLuaVariant(t *testing.T, backends []string, name string, requestMetrics bool) *b3Variant {
	t.Helper()
	prefix, port, conf := renderPrefix(t, backends, requestMetrics)
	if err := os.WriteFile(filepath.Join(prefix, render.ConfigName), conf, 0o644); err != nil {
		t.Fatal(err)
	}
	v := &b3Variant{name: name, nginx: nginxproc.Start(t, prefix), port: port}
	pushBackends(t, v.nginx, b3Model(backends).Backends.Slice())
	pushRoutes(t, v.nginx, b3Model(backends), requestMetrics)
	return v
}

func startStaticVariant(t *testing.T, backends []string) *b3Variant {
	t.Helper()
	prefix, port, conf := renderPrefix(t, backends, false)
	static, err := staticConfig(conf, backends)
	if err != nil {
		t.Fatalf("turning the rendered nginx.conf into the static one: %v\n%s", err, conf)
	}
	if err := os.WriteFile(filepath.Join(prefix, render.ConfigName), static, 0o644); err != nil {
		t.Fatal(err)
	}
	return &b3Variant{name: "static", nginx: nginxproc.Start(t, prefix), port: port}
}

// staticConfig rewrites the router's location, which proxies to the Lua upstream
// to proxy to a static upstream of backends instead, without the Lua (and
// the set of $restysync_backend) in it. The static upstream is inserted
// before the Lua one and gets its keepalive lines. Anything it does not
// recognise is an error: the bench must not silently compare something else.
func staticConfig(conf []byte, backends []string) ([]byte, error) {
	lines := strings.Split(string(conf), "\n")
	proxy := "proxy_pass http://" + b3LuaUpstream + ";"
	// The router's location is the first that proxies to the Lua
	// upstream ("location / {"); the named locations after it (a body
	// without Content-Length, profiles) keep theirs, and B3's requests
	// never reach them.
	at := slices.IndexFunc(lines, func(line string) bool { return strings.TrimSpace(line) == proxy })
	if at < 0 {
		return nil, fmt.Errorf("no %q line", proxy)
	}
	start := at - 1
	for start >= 0 && !strings.HasPrefix(strings.TrimSpace(lines[start]), "location ") {
		start--
	}
	if start < 0 {
		return nil, errors.New("the proxy_pass line is in no location")
	}
	if got := strings.TrimSpace(lines[start]); got != "location / {" {
		return nil, fmt.Errorf("the first %q is in %q, not the router's location", proxy, got)
	}
	var out []string
	out = append(out, lines[:start+1]...)
	for _, line := range lines[start+1 : at] {
		s := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(s, "set $restysync_"):
		case strings.Contains(s, "_by_lua"):
			if strings.Count(s, "{") != strings.Count(s, "}") {
				return nil, fmt.Errorf("%q: a Lua block over several lines is not understood", s)
			}
		default:
			out = append(out, line)
		}
	}
	indent := lines[at][:len(lines[at])-len(strings.TrimLeft(lines[at], " \t"))]
	out = append(out, indent+"proxy_pass http://"+b3Upstream+";")
	out = append(out, lines[at+1:]...)

	// The static upstream, before the Lua one, with its keepalive lines.
	head := "upstream " + b3LuaUpstream + " {"
	up := slices.IndexFunc(out, func(line string) bool { return strings.TrimSpace(line) == head })
	if up < 0 {
		return nil, fmt.Errorf("no %q line", head)
	}
	var keepalive []string
	depth := 0
	for _, line := range out[up:] {
		s := strings.TrimSpace(line)
		if depth == 1 && strings.HasPrefix(s, "keepalive") {
			keepalive = append(keepalive, s)
		}
		depth += strings.Count(s, "{") - strings.Count(s, "}")
		if depth == 0 {
			break
		}
	}
	if !slices.ContainsFunc(keepalive, func(s string) bool { return strings.HasPrefix(s, "keepalive ") }) {
		return nil, fmt.Errorf("the %s upstream has no keepalive line", b3LuaUpstream)
	}
	indent = out[up][:len(out[up])-len(strings.TrimLeft(out[up], " \t"))]
	block := []string{indent + "upstream " + b3Upstream + " {"}
	for _, addr := range backends {
		block = append(block, indent+"    server "+addr+";")
	}
	for _, k := range keepalive {
		block = append(block, indent+"    "+k)
	}
	block = append(block, indent+"}", "")
	return []byte(strings.Join(slices.Insert(out, up, block...), "\n")), nil
}

// pushBackends sends the backends to the config API, as the agent does.
func pushBackends(t *testing.T, n *nginxproc.Nginx, backends []model.Backend) {
	t.Helper()
	var upserts []luaapi.BackendPayload
	for _, b := range backends {
		upserts = append(upserts, luaapi.NewBackendPayload(b))
	}
	postUpserts(t, n, "/backends", upserts)
}

// pushRoutes gives Lua the routes of m's hosts
// (the B3 host is one), as the agent does.
func pushRoutes(t *testing.T, n *nginxproc.Nginx, m model.Model, requestMetrics bool) {
	t.Helper()
	s := render.Settings{}
	if requestMetrics {
		rm := render.DefaultRequestMetrics()
		s.RequestMetrics = &rm
	}
	routes, err := render.Routes(m, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(routes) > 0 {
		postUpserts(t, n, "/routes", luaapi.RoutePayloads(routes))
	}
}

// postUpserts POSTs {"upserts": upserts} to path of the config API.
func postUpserts(t *testing.T, n *nginxproc.Nginx, path string, upserts any) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"upserts": upserts})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := n.API().Post("http://restysync"+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	reply, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %d %s", path, resp.StatusCode, reply)
	}
}

// checkSpread sends requests through v and wants every backend to answer:
// both variants really proxy to all three endpoints before anything is timed.
func checkSpread(t *testing.T, v *b3Variant, backends []string) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	seen := map[string]int{}
	for range 3 * len(backends) {
		req, err := http.NewRequest(http.MethodGet, v.url(), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = b3Host
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: GET %s: %v", v.name, v.url(), err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: GET %s: %d %q %v\n%s", v.name, v.url(), resp.StatusCode, body, err, v.nginx.Logs())
		}
		seen[string(body)]++
	}
	if len(seen) != len(backends) {
		t.Fatalf("%s: %d requests reached %v, want all %d backends", v.name, 3*len(backends), seen, len(backends))
	}
}

// b3Pin says which CPUs nginx and the load run on; the zero value pins
// nothing.
type b3Pin struct {
	taskset         string
	nginxCPU, other string // taskset -c lists
	cpus            int
}

// b3Pinning pins nginx to the first allowed CPU and wrk with the backends
// to the second, if taskset exists and there are two CPUs to use.
func b3Pinning() b3Pin {
	cpus := allowedCPUs()
	path, err := exec.LookPath("taskset")
	if err != nil || len(cpus) < 2 {
		return b3Pin{cpus: len(cpus)}
	}
	return b3Pin{taskset: path, nginxCPU: strconv.Itoa(cpus[0]), other: strconv.Itoa(cpus[1]), cpus: len(cpus)}
}

func (p b3Pin) describe() string {
	if p.taskset == "" {
		return fmt.Sprintf("not pinned (no taskset or fewer than 2 CPUs): nginx, wrk and the backends share %d CPUs", p.cpus)
	}
	return fmt.Sprintf("taskset: nginx master and worker on CPU %s, wrk and the 3 Go backends (one process, GOMAXPROCS=1) on CPU %s, of %d CPUs", p.nginxCPU, p.other, p.cpus)
}

// nginx pins the master and the workers of v.
func (p b3Pin) nginx(t *testing.T, v *b3Variant) {
	t.Helper()
	if p.taskset == "" {
		return
	}
	pids := append([]int{v.nginx.MasterPID()}, v.nginx.WorkerPIDs()...)
	for _, pid := range pids {
		out, err := exec.Command(p.taskset, "-a", "-p", "-c", p.nginxCPU, strconv.Itoa(pid)).CombinedOutput()
		if err != nil {
			t.Fatalf("taskset nginx pid %d: %v\n%s", pid, err, out)
		}
	}
}

// command wraps name and args in taskset onto the non-nginx CPU.
func (p b3Pin) command(name string, args ...string) (string, []string) {
	if p.taskset == "" {
		return name, args
	}
	return p.taskset, append([]string{"-c", p.other, name}, args...)
}

// allowedCPUs reads the CPUs this process may run on.
func allowedCPUs() []int {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil
	}
	var cpus []int
	for _, line := range strings.Split(string(data), "\n") {
		list, ok := strings.CutPrefix(line, "Cpus_allowed_list:")
		if !ok {
			continue
		}
		for _, part := range strings.Split(strings.TrimSpace(list), ",") {
			lo, hi, isRange := strings.Cut(part, "-")
			a, err1 := strconv.Atoi(lo)
			b, err2 := a, error(nil)
			if isRange {
				b, err2 = strconv.Atoi(hi)
			}
			if err1 != nil || err2 != nil {
				return nil
			}
			for c := a; c <= b; c++ {
				cpus = append(cpus, c)
			}
		}
	}
	return cpus
}

// startBackendProcess starts n Go HTTP backends on 127.0.0.2, .3, ... in a
// child process (this test binary running TestBackendProcess), so they do
// not share a Go scheduler with the test, and returns their addresses. The
// listeners are made here and inherited, so they accept from the start.
// The child exits when its stdin closes (the test ends or dies); the
// cleanup also kills its process group.
func startBackendProcess(t *testing.T, n int, pin b3Pin) ([]string, int) {
	t.Helper()
	var (
		addrs []string
		files []*os.File
	)
	for i := range n {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.%d:0", i+2))
		if err != nil {
			t.Fatalf("backend listener: %v", err)
		}
		f, err := l.(*net.TCPListener).File()
		l.Close() // f holds its own descriptor of the socket
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, l.Addr().String())
		files = append(files, f)
	}
	name, args := pin.command(os.Args[0], "-test.run=^TestBackendProcess$", "-test.count=1", "-test.timeout=0")
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), b3BackendsEnv+"="+strconv.Itoa(n))
	if pin.taskset != "" {
		cmd.Env = append(cmd.Env, "GOMAXPROCS=1")
	}
	cmd.ExtraFiles = files
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the backend process: %v", err)
	}
	for _, f := range files {
		f.Close()
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Errorf("the backend process did not exit within 5 s of its stdin closing; killing it")
		}
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Errorf("the backend process %d survived SIGKILL", cmd.Process.Pid)
		}
		if t.Failed() {
			t.Logf("backend process stderr:\n%s", stderr.String())
		}
	})
	return addrs, cmd.Process.Pid
}

// TestBackendProcess is the backend process of B3: it serves a small fixed
// body on each inherited listener until its stdin closes. Run directly it
// skips.
//
// The backends speak just enough HTTP/1.1 for GET without a body, with
// keep-alive: every request header ("\r\n\r\n") gets one fixed response.
// net/http would do too, but it costs the load side (wrk and the backends
// share one CPU) more per request than the nginx under test, and B3 must
// measure nginx, not its backends.
func TestBackendProcess(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv(b3BackendsEnv))
	if n == 0 {
		t.Skip("only runs as the backend process of B3")
	}
	for i := range n {
		l, err := net.FileListener(os.NewFile(uintptr(3+i), fmt.Sprintf("listener%d", i)))
		if err != nil {
			t.Fatalf("listener %d: %v", i, err)
		}
		body := fmt.Sprintf("backend %d\n", i+1)
		response := []byte(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s", len(body), body))
		go serveFixed(l, response)
	}
	io.Copy(io.Discard, os.Stdin)
}

// serveFixed answers each request on each connection of l with response.
func serveFixed(l net.Listener, response []byte) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			in := make([]byte, 16<<10)
			var out []byte
			state := 0 // how much of "\r\n\r\n" has been seen
			for {
				c.SetReadDeadline(time.Now().Add(5 * time.Minute))
				n, err := c.Read(in)
				out = out[:0]
				for _, b := range in[:n] {
					switch {
					case b == '\r' && (state == 0 || state == 2):
						state++
					case b == '\n' && (state == 1 || state == 3):
						state++
					case b == '\r':
						state = 1
					default:
						state = 0
					}
					if state == 4 {
						out = append(out, response...)
						state = 0
					}
				}
				if len(out) > 0 {
					if _, err := c.Write(out); err != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

// wrkResult is one wrk run against one variant.
type wrkResult struct {
	rps      float64
	p99      time.Duration
	requests int64
	duration time.Duration // wrk's -d
	// workerCPU is the CPU time the nginx workers used during the run.
	workerCPU time.Duration
	// workerUser is the part of workerCPU spent in user space (at 10 ms
	// resolution): Lua and nginx, without the kernel's network stack.
	workerUser time.Duration
	// loadCPU is the CPU time wrk and the backend process used.
	loadCPU time.Duration
	// othersCPU is the CPU time every other process used (at 10 ms
	// resolution): the test itself, and whatever else runs on the machine.
	othersCPU time.Duration
	// stolenCPU is the time the hypervisor took from the CPUs (steal).
	stolenCPU time.Duration
}

func (r wrkResult) cpuPerRequest() time.Duration {
	if r.requests == 0 {
		return 0
	}
	return r.workerCPU / time.Duration(r.requests)
}

// userPerRequest is the user-space part of cpuPerRequest.
func (r wrkResult) userPerRequest() time.Duration {
	if r.requests == 0 {
		return 0
	}
	return r.workerUser / time.Duration(r.requests)
}

// busy is the share of one CPU the nginx workers used.
func (r wrkResult) busy() float64 { return r.workerCPU.Seconds() / r.duration.Seconds() }

// loadBusy is the share of one CPU wrk and the backends used.
func (r wrkResult) loadBusy() float64 { return r.loadCPU.Seconds() / r.duration.Seconds() }

// othersBusy is the share of one CPU every other process used.
func (r wrkResult) othersBusy() float64 { return r.othersCPU.Seconds() / r.duration.Seconds() }

// stolenBusy is the share of one CPU the hypervisor took.
func (r wrkResult) stolenBusy() float64 { return r.stolenCPU.Seconds() / r.duration.Seconds() }

var (
	wrkRPS      = regexp.MustCompile(`(?m)^Requests/sec:\s+([0-9.]+)\s*$`)
	wrkP99      = regexp.MustCompile(`(?m)^\s*99%\s+([0-9.]+)(us|ms|s|m|h)\s*$`)
	wrkRequests = regexp.MustCompile(`(?m)^\s*([0-9]+) requests in `)
	wrkNon2xx   = regexp.MustCompile(`Non-2xx or 3xx responses: ([0-9]+)`)
	wrkErrors   = regexp.MustCompile(`Socket errors: connect ([0-9]+), read ([0-9]+), write ([0-9]+), timeout ([0-9]+)`)
)

// runWrk loads v for d and parses what wrk prints. Failed requests of any
// kind make the run an error.
func runWrk(wrk string, pin b3Pin, v *b3Variant, backendPID int, d time.Duration) (wrkResult, error) {
	name, args := pin.command(wrk, "-t1", fmt.Sprintf("-c%d", b3Connections), fmt.Sprintf("-d%ds", int(d.Seconds())),
		"--latency", "-H", "Host: "+b3Host, v.url())
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	workers := v.nginx.WorkerPIDs()
	before, err := cpuTime(workers)
	if err != nil {
		return wrkResult{}, err
	}
	userBefore, err := userTime(workers)
	if err != nil {
		return wrkResult{}, err
	}
	backendsBefore, err := cpuTime([]int{backendPID})
	if err != nil {
		return wrkResult{}, err
	}
	machineBefore, stolenBefore, err := machineBusy()
	if err != nil {
		return wrkResult{}, err
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return wrkResult{}, fmt.Errorf("wrk: %w\n%s", err, out)
	}
	after, err := cpuTime(workers)
	if err != nil {
		return wrkResult{}, err
	}
	userAfter, err := userTime(workers)
	if err != nil {
		return wrkResult{}, err
	}
	backendsAfter, err := cpuTime([]int{backendPID})
	if err != nil {
		return wrkResult{}, err
	}
	machineAfter, stolenAfter, err := machineBusy()
	if err != nil {
		return wrkResult{}, err
	}
	if now := v.nginx.WorkerPIDs(); !slices.Equal(now, workers) {
		return wrkResult{}, fmt.Errorf("nginx workers changed from %v to %v during the run", workers, now)
	}
	r, err := parseWrk(out)
	if err != nil {
		return wrkResult{}, err
	}
	r.duration = d
	r.workerCPU = after - before
	r.workerUser = userAfter - userBefore
	r.loadCPU = backendsAfter - backendsBefore + cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	r.othersCPU = max(0, machineAfter-machineBefore-r.workerCPU-r.loadCPU)
	r.stolenCPU = stolenAfter - stolenBefore
	return r, nil
}

func parseWrk(out []byte) (wrkResult, error) {
	var r wrkResult
	if m := wrkNon2xx.FindSubmatch(out); m != nil {
		return r, fmt.Errorf("wrk saw %s non-2xx answers\n%s", m[1], out)
	}
	if m := wrkErrors.FindSubmatch(out); m != nil && string(bytes.Join(m[1:], nil)) != "0000" {
		return r, fmt.Errorf("wrk saw socket errors\n%s", out)
	}
	m := wrkRPS.FindSubmatch(out)
	if m == nil {
		return r, fmt.Errorf("no Requests/sec in wrk's output\n%s", out)
	}
	r.rps, _ = strconv.ParseFloat(string(m[1]), 64)
	m = wrkRequests.FindSubmatch(out)
	if m == nil {
		return r, fmt.Errorf("no request count in wrk's output\n%s", out)
	}
	r.requests, _ = strconv.ParseInt(string(m[1]), 10, 64)
	m = wrkP99.FindSubmatch(out)
	if m == nil {
		return r, fmt.Errorf("no 99%% latency in wrk's output\n%s", out)
	}
	value, _ := strconv.ParseFloat(string(m[1]), 64)
	unit := map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second, "m": time.Minute, "h": time.Hour}[string(m[2])]
	r.p99 = time.Duration(value * float64(unit))
	if r.rps <= 0 || r.requests <= 0 || r.p99 <= 0 {
		return r, fmt.Errorf("wrk measured nothing\n%s", out)
	}
	return r, nil
}

// cpuTime sums the CPU time the processes have used, all their threads,
// from /proc/PID/task/TID/schedstat (nanoseconds on a CPU). Threads that
// exit between two readings are lost; nginx workers and Go keep theirs.
func cpuTime(pids []int) (time.Duration, error) {
	if len(pids) == 0 {
		return 0, errors.New("no processes to measure")
	}
	var total time.Duration
	for _, pid := range pids {
		tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
		if err != nil || len(tasks) == 0 {
			return 0, fmt.Errorf("CPU time of pid %d: no threads found", pid)
		}
		for _, task := range tasks {
			data, err := os.ReadFile(task)
			if err != nil {
				continue // the thread exited
			}
			f := strings.Fields(string(data))
			if len(f) == 0 {
				return 0, fmt.Errorf("%s: %q", task, data)
			}
			ns, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %q: %w", task, data, err)
			}
			total += time.Duration(ns)
		}
	}
	return total, nil
}

// userTickHz is the unit of utime in /proc/PID/stat (USER_HZ: 100 on
// every Linux architecture's user ABI).
const userTickHz = 100

// userTime sums the user-space CPU time of the processes, all their
// threads, from utime in /proc/PID/stat.
func userTime(pids []int) (time.Duration, error) {
	var total time.Duration
	for _, pid := range pids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0, fmt.Errorf("user CPU time of pid %d: %w", pid, err)
		}
		// The fields after the command, which may hold spaces, in ().
		end := bytes.LastIndexByte(data, ')')
		if end < 0 {
			return 0, fmt.Errorf("/proc/%d/stat: %q", pid, data)
		}
		f := strings.Fields(string(data[end+1:]))
		if len(f) < 12 {
			return 0, fmt.Errorf("/proc/%d/stat: %q", pid, data)
		}
		// f[0] is the state (field 3); utime is field 14.
		ticks, err := strconv.ParseInt(f[11], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: utime %q: %w", pid, f[11], err)
		}
		total += time.Duration(ticks) * time.Second / userTickHz
	}
	return total, nil
}

// median of an odd number of values is the middle one; of an even number,
// the mean of the two in the middle.
func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func mapSlice[T any](in []T, f func(T) float64) []float64 {
	out := make([]float64, len(in))
	for i, x := range in {
		out[i] = f(x)
	}
	return out
}

// floor3 and ceil3 print a ratio to three decimals, rounded down (for a
// "≥" target) or up (for a "≤" target).
func floor3(x float64) string { return fmt.Sprintf("%.3f", math.Floor(x*1000)/1000) }
func ceil3(x float64) string  { return fmt.Sprintf("%.3f", math.Ceil(x*1000)/1000) }

func secondsString(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(10 * time.Microsecond).String()
}

func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "|", "/")
	line, _, _ := strings.Cut(s, "\n")
	return line
}
