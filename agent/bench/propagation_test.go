//go:build bench

package bench

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/restysync/restysync/agent/internal/testenv/podnet"
)

// fillers makes services [from, to) with two endpoints each nothing answers,
// routed by Ingresses of 100 paths each, so the agent holds that many backends.
func fillers(from, to int) []any {
	var objs []any
	var names []string
	flush := func() {
		if len(names) > 0 {
			first := names[0]
			objs = append(objs, ingress("fill-"+first, first+".fill.test", names...))
			names = nil
		}
	}
	for i := from; i < to; i++ {
		name := "f" + strconv.Itoa(i)
		objs = append(objs, service(name), slice(name, fakeAddrs(2*i, 2)...))
		names = append(names, name)
		if len(names) == 100 {
			flush()
		}
	}
	flush()
	return objs
}

// TestB1B2Propagation measures B1 (EndpointSlice update accepted → first
// request served by the new endpoint) and B2 (bytes sent to Lua for a
// one-endpoint change) at several numbers of backends, for the agent's
// incremental push and for the full-push baseline, side by side.
func TestB1B2Propagation(t *testing.T) {
	if !wanted("B1") && !wanted("B2") {
		t.Skip("not selected")
	}
	podnet.Require(t)
	c := startCluster(t)
	pods := []*podnet.Pod{podnet.New(t, "pod-a"), podnet.New(t, "pod-b")}
	c.createAll([]any{service("b1"), slice("b1", pods[0].IP), ingress("b1", "b1.test", "b1")})

	sizes := []int{50, 500, 5000}
	changesAt := map[int]int{50: 200, 500: 50, 5000: 50}
	if *quick {
		sizes = []int{50, 500}
		changesAt = map[int]int{50: 60, 500: 20}
	}
	type result struct {
		latency []time.Duration
		bytes   []int
		cpu     time.Duration
	}
	results := map[string]map[int]result{"changed": {}, "full": {}}
	have := 0
	for _, size := range sizes {
		c.createAll(fillers(have, size))
		have = size
		for _, mode := range []string{"changed", "full"} {
			a := startAgent(t, c, "--push-mode", mode)
			a.waitFor("b1.test", "/", "", 60*time.Second)
			current := 0
			// Settle on pods[0] so every change below moves exactly one endpoint.
			c.setEndpoints("b1", pods[0].IP)
			a.waitFor("b1.test", "/", pods[0].Name, waitBound)
			a.waitIdle(time.Second, 15*time.Second)
			offset, cpu0 := a.log.Len(), a.cpuTime()
			var r result
			for range changesAt[size] {
				current = 1 - current
				c.setEndpoints("b1", pods[current].IP)
				r.latency = append(r.latency, a.waitFor("b1.test", "/", pods[current].Name, waitBound))
			}
			time.Sleep(200 * time.Millisecond) // the last sync's log line
			r.cpu = (a.cpuTime() - cpu0) / time.Duration(changesAt[size])
			r.bytes = a.pushBytes(offset)
			results[mode][size] = r
			a.stop()
			t.Logf("%s, %d backends: %s; push bytes median %d over %d pushes; agent CPU %s per change",
				mode, size, summarize(r.latency), medianInt(r.bytes), len(r.bytes), r.cpu)
		}
	}

	small := sizes[0]
	b1 := summarize(results["changed"][small].latency)
	b1full := summarize(results["full"][small].latency)
	report(t, Row{ID: "B1", What: fmt.Sprintf("endpoint propagation, %d backends", small),
		Target: "p50 ≤ 20 ms, p99 ≤ 50 ms, ≥ 200 changes", Measured: b1.String(),
		Pass: b1.p50 <= 20*time.Millisecond && b1.p99 <= 50*time.Millisecond && (b1.n >= 200 || *quick),
		Note: fmt.Sprintf("full-push baseline: %s%s", b1full, map[bool]string{true: "; quick mode: fewer than 200 changes"}[*quick])})
	var perSize, perSizeFull, cpu []string
	var bytesOK = true
	var first = -1
	for _, size := range sizes {
		changed, full := results["changed"][size], results["full"][size]
		m := medianInt(changed.bytes)
		if first < 0 {
			first = m
		}
		bytesOK = bytesOK && m <= 2048 && m == first
		perSize = append(perSize, fmt.Sprintf("%d: %d B", size, m))
		perSizeFull = append(perSizeFull, fmt.Sprintf("%d: %d B", size, medianInt(full.bytes)))
		cpu = append(cpu, fmt.Sprintf("%d backends: %s vs %s", size, changed.cpu.Round(100*time.Microsecond), full.cpu.Round(100*time.Microsecond)))
		if size != small {
			s, f := summarize(changed.latency), summarize(full.latency)
			report(t, Row{ID: "B1@" + strconv.Itoa(size), What: fmt.Sprintf("endpoint propagation, %d backends", size),
				Target: "p50 ≤ 20 ms, p99 ≤ 50 ms", Measured: s.String(),
				Pass: s.p50 <= 20*time.Millisecond && s.p99 <= 50*time.Millisecond,
				Note: fmt.Sprintf("full-push baseline: %s", f)})
		}
	}
	report(t, Row{ID: "B2", What: "bytes to Lua per one-endpoint change, by backends", Target: "≤ 2 KB, equal at every size",
		Measured: strings.Join(perSize, ", "), Pass: bytesOK,
		Note: "full-push baseline: " + strings.Join(perSizeFull, ", ") + map[bool]string{true: "; quick mode: no 5,000"}[*quick]})
	report(t, Row{ID: "B2-cpu", What: "agent CPU per change (incremental vs full push)", Target: "reference", NoTarget: true,
		Measured: strings.Join(cpu, "; "), Note: "from /proc utime+stime (10 ms ticks) over all changes"})
}

func medianInt(v []int) int {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
