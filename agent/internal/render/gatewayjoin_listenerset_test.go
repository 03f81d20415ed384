package render_test

// The ListenerSet tests of the conformance suite that send requests: a
// ListenerSet's listeners are served on its parent Gateway's address, to
// the routes whose parentRef names the ListenerSet only.

func init() {
	joinTests = append(joinTests, listenerSetJoinTests...)
}

var listenerSetJoinTests = []joinTest{
	{name: "ListenerSetHTTPRouting", files: []string{"tests/listenerset-http-routing.yaml"}, cases: listenerSetRoutingCases()},
	{name: "ListenerSetGatewayParentSectionNameNotFound", files: []string{"tests/listenerset-gateway-parent-section-name-not-found.yaml"}, cases: []joinCase{
		{gateway: "gateway-section-name", host: "ls-section-name.com", path: "/goodsection", backend: v1},
		{gateway: "gateway-section-name", host: "gw-section.com", path: "/badsection", status: 404},
	}},
	{name: "ListenerSetDualParentRefIndependence", files: []string{"tests/listenerset-dual-parentref-independence.yaml"}, cases: []joinCase{
		{gateway: "gateway-dual-parentref", host: "gw-dual.com", path: "/dualboth", backend: v1},
		{gateway: "gateway-dual-parentref", host: "ls-dual.com", path: "/dualboth", backend: v1},
		{gateway: "gateway-dual-parentref", host: "ls-dual.com", path: "/dualone", backend: v2},
		{gateway: "gateway-dual-parentref", host: "gw-dual.com", path: "/dualone", status: 404},
	}},
	{name: "ListenerSetAllowedRoutesNamespaces", files: []string{"tests/listenerset-allowed-routes-namespaces.yaml"}, cases: listenerSetAllowedRoutesCases()},
}

// listenerSetRoutingCases are ListenerSetHTTPRouting's: each path's
// backend on each listener's hostname, 404 where the route is not
// attached.
func listenerSetRoutingCases() []joinCase {
	const gw = "gateway-with-listener-sets-http-routing"
	hosts := []string{"gateway-listener-1.com", "gateway-listener-2.com",
		"listener-set-http-routing-1-listener-1.com", "listener-set-http-routing-1-listener-2.com",
		"listener-set-http-routing-2-listener-1.com", "listener-set-http-routing-2-listener-2.com"}
	served := map[string]map[string]string{ // path → host → backend
		"/route":                                     {hosts[0]: v1, hosts[1]: v1, hosts[2]: v1, hosts[3]: v1, hosts[4]: v1, hosts[5]: v1},
		"/gateway-route":                             {hosts[0]: v2, hosts[1]: v2},
		"/gateway-section-route":                     {hosts[0]: v3},
		"/listener-set-http-routing-1-route":         {hosts[2]: v2, hosts[3]: v2},
		"/listener-set-http-routing-1-section-route": {hosts[2]: v3},
		"/listener-set-http-routing-2-route":         {hosts[4]: v2, hosts[5]: v2},
	}
	var cases []joinCase
	for path, byHost := range served {
		for _, host := range hosts {
			c := joinCase{gateway: gw, host: host, path: path, backend: byHost[host]}
			if c.backend == "" {
				c.status = 404
			}
			cases = append(cases, c)
		}
	}
	return cases
}

func listenerSetAllowedRoutesCases() []joinCase {
	const gw = "gateway-with-listener-sets-test-allowed-routes"
	all, same, selector := "listener-set-listener-allowed-routes-all.com", "listener-set-listener-allowed-routes-same.com", "listener-set-listener-allowed-routes-selector.com"
	cross := "listener-set-listener-allowed-routes-cross-ns-same.com"
	return []joinCase{
		{gateway: gw, host: all, path: "/route-in-same-namespace", backend: v1},
		{gateway: gw, host: all, path: "/route-in-selected-namespace", backend: v2},
		{gateway: gw, host: all, path: "/route-not-in-selected-namespace", backend: v3},
		{gateway: gw, host: same, path: "/route-in-same-namespace", backend: v1},
		{gateway: gw, host: same, path: "/route-in-selected-namespace", status: 404},
		{gateway: gw, host: same, path: "/route-not-in-selected-namespace", status: 404},
		{gateway: gw, host: selector, path: "/route-in-same-namespace", status: 404},
		{gateway: gw, host: selector, path: "/route-in-selected-namespace", backend: v2},
		{gateway: gw, host: selector, path: "/route-not-in-selected-namespace", status: 404},
		{gateway: gw, host: cross, path: "/route-in-listenerset-namespace", backend: v1},
		{gateway: gw, host: cross, path: "/route-in-gateway-namespace", status: 404},
	}
}
