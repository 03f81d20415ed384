package main

import (
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// The agent's soft memory limit. Go's GC lets the heap grow to twice what
// is live before it collects (GOGC=100), and a full sync makes about as
// much garbage as the model it replaces: at 10,000 Ingresses the agent
// peaks near 230 MB during one, close to the chart's 256Mi limit, where
// the kernel would kill it rather than the GC collect sooner. So when
// GOMEMLIMIT is not set, the agent sets Go's soft memory limit to
// memoryLimitShare of its cgroup's memory limit (as automemlimit does):
// the GC then works harder only as the heap nears the limit. Without a
// cgroup limit nothing changes; GOMEMLIMIT, Go's own variable, overrides
// it ("off" included).

// memoryLimitShare is the share of the cgroup's limit Go may use: the rest
// is for what Go does not count (thread stacks outside the heap, the
// kernel's page cache of the files the agent writes is the cgroup's too).
const memoryLimitShare = 0.9

// cgroupMemoryFiles hold the memory limit of the agent's cgroup: cgroup
// v2 ("max" when none), then v1 (a number near 2^63 when none).
var cgroupMemoryFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// cgroupMemoryLimit returns the memory limit of the agent's cgroup in
// bytes, read with read from the first of files that exists, and false
// when there is none.
func cgroupMemoryLimit(read func(string) ([]byte, error), files []string) (int64, bool) {
	for _, name := range files {
		data, err := read(name)
		if err != nil {
			continue
		}
		limit, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		// "max", or v1's "no limit" (the largest multiple of a page).
		if err != nil || limit <= 0 || limit >= 1<<62 {
			return 0, false
		}
		return limit, true
	}
	return 0, false
}

// setMemoryLimit sets Go's soft memory limit from the cgroup's when
// GOMEMLIMIT is not set, and logs what holds.
func setMemoryLimit(logger *slog.Logger) {
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		logger.Info("memory limit from GOMEMLIMIT", "gomemlimit", v)
		return
	}
	limit, ok := cgroupMemoryLimit(os.ReadFile, cgroupMemoryFiles)
	if !ok {
		return
	}
	soft := int64(float64(limit) * memoryLimitShare)
	debug.SetMemoryLimit(soft)
	logger.Info("memory limit from the cgroup", "cgroup_bytes", limit, "go_soft_limit_bytes", soft)
}

// startGCPercent is Go's GC percent while the source lists its objects,
// unless GOGC is set. The listing decodes every object once and leaves
// about as much garbage as it keeps; at GOGC=100 the heap peaks near twice
// what is live there, and the spans of that peak stay mapped, partly used,
// for good. Collecting sooner while it lists costs more collections of a
// heap that is still growing, once; the first sync's build and render run
// at Go's percent again (at 50, they took half as long again).
const startGCPercent = 50

// leanStart sets startGCPercent unless GOGC is set, and returns what puts
// the GC percent back (the syncer calls it once the source has listed).
func leanStart(logger *slog.Logger) (restore func()) {
	return lowerGCPercent(startGCPercent, "after the listing", logger)
}

// fullSyncGCPercent is Go's GC percent while a sync that builds the whole
// model builds and renders it (syncer.Options.LeanFullSync), unless GOGC
// is set; its push runs at Go's percent (the collector's idle workers
// would take the CPU nginx needs to read it). The new model,
// its views and routes live beside the last ones until the sync ends
// (at 50,000 Ingresses the live heap goes from 172 to about 290 MB), and
// the sync makes about a gigabyte of garbage there: at GOGC=100 the heap
// peaked near 500 MB, over twice the settled RSS (issue 31 wants a full
// sync not to double it); at 25, near 340 MB, for about four times the
// collections during that one sync (full syncs come with a new ConfigMap
// or IngressClass, not with a tenant's change). After the sync the
// memory releaser (releaseMemory) hands the garbage back.
const fullSyncGCPercent = 25

// leanFullSync sets fullSyncGCPercent unless GOGC is set, and returns
// what puts the GC percent back.
func leanFullSync(logger *slog.Logger) func() (restore func()) {
	return func() func() { return lowerGCPercent(fullSyncGCPercent, "after a full sync", logger) }
}

// lowerGCPercent sets Go's GC percent to percent unless GOGC is set, and
// returns what puts it back.
func lowerGCPercent(percent int, after string, logger *slog.Logger) (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	previous := debug.SetGCPercent(percent)
	return func() {
		debug.SetGCPercent(previous)
		logger.Debug("GC percent restored "+after, "gogc", previous)
	}
}
