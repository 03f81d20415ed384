// Package lua holds the data plane's Lua modules, which apply, the last
// stage of the pipeline (source → model → render → plan → apply), drives:
// the agent pushes backends, routes and certificates to them over the config
// API; they route and balance every request and pick the certificate of
// every TLS handshake.
//
// The modules are embedded in the agent binary and written into the shared
// dir at start, so the stock OpenResty image needs nothing but the volume.
// nginx finds them through lua_package_path "<shared dir>/lua/?.lua".
//
// One concern per module (restysync/<module>.lua), and where it is tested:
// the Lua unit tests of a module are test/<module>_test.lua, run in a real
// nginx by TestLuaUnit (agent/internal/apply/luaunit_test.go, subtests
// <module>/<function>); the Go data-plane tests run the rendered nginx.conf
// with every module (agent/internal/render/*_dataplane_test.go).
//
//	init        state every module shares, loads them all in the master
//	            (TestInitLoadsEveryModule here; TestDataPlane)
//	api         the config API: dispatch, who may ask (api_test.lua;
//	            TestConfigAPIAnswersOnlyTheAgent in apply, TestDataPlane)
//	backends    the backends in the shared dict: checks, writes, listings
//	            (backends_test.lua; TestDataPlane, TestDataPlaneMetrics)
//	routes      the route table: checks, writes, lookup, the path matcher
//	            (routes_test.lua; TestDataPlaneRoutedHosts)
//	certs       certificates: checks, writes, the SNI pick
//	            (TestDataPlaneTLS, TestDataPlaneTLSDictFull)
//	state       the agent's saved state, loaded by the master at a cold
//	            start (state_test.lua; TestNginxColdRestartUnderLoad in e2e)
//	store       the update lock and all-or-nothing writes every table
//	            uses (store_test.lua; TestDataPlaneDictFull)
//	check       shape checks of the config API's JSON (through the
//	            tables' tests)
//	fileaccess  which files the workers cannot use, POST /access
//	            (fileaccess_test.lua; TestAccessCheckNamesAnUnreadableFile
//	            in apply)
//	router      the request's location: redirects, limits, profiles, then
//	            the balancer (TestDataPlaneRoutedHosts, TestDataPlaneProfiles)
//	loop        the loop guard's tokens (loop_test.lua; TestLoopGuard in e2e)
//	balancer    picks the endpoint of a request, retries, counts
//	            (TestDataPlaneBalancing)
//	policy      a backend's balancing policy (policy_test.lua)
//	chash       the consistent-hash ring (chash_test.lua)
//	ewma        peak-EWMA scores (ewma_test.lua)
//	affinity    the affinity cookie (affinity_test.lua;
//	            TestDataPlaneBalancingKeys)
//	canary      the canary split (TestDataPlaneBalancingKeys; TestCanary
//	            in e2e)
//	health      passive health (TestDataPlaneBalancing)
//	access      CORS and the auth cookie of a profile (TestAccessCORS in
//	            e2e)
//
// The tests and their harness (test/testing.lua) are not embedded: the
// agent ships restysync/ only.
package lua

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// FS holds the modules under restysync/ (require "restysync",
// "restysync.api", "restysync.router", ...), and nothing else.
//
//go:embed restysync
var FS embed.FS

// WriteTo writes every module under dir/lua/ with writeFile, in 0644
// files and 0755 folders: nginx workers run as nobody and must read them.
// The agent passes apply.WriteFileAtomic, so that nginx never reads half a
// module; a test may pass os.WriteFile.
func WriteTo(dir string, writeFile func(path string, data []byte, perm fs.FileMode) error) error {
	root := filepath.Join(dir, "lua")
	return fs.WalkDir(FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("reading embedded %s: %w", path, err)
		}
		target := filepath.Join(root, filepath.FromSlash(path))
		if d.IsDir() {
			return makeDir(target)
		}
		data, err := FS.ReadFile(path)
		if err != nil {
			return fmt.Errorf("reading embedded %s: %w", path, err)
		}
		return writeFile(target, data, 0o644)
	})
}

// makeDir creates dir if needed and sets its mode, which MkdirAll leaves to
// the umask and never changes on an existing folder.
func makeDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return fmt.Errorf("setting mode of %s: %w", dir, err)
	}
	return nil
}
