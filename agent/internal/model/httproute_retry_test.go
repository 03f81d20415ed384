package model

import (
	"reflect"
	"testing"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// withRetry sets a rule's retry: attempts (nil unset), backoff ("" unset)
// and codes.
func withRetry(attempts *int, backoff string, codes ...int) func(*gatewayv1.HTTPRouteRule) {
	return func(r *gatewayv1.HTTPRouteRule) {
		r.Retry = &gatewayv1.HTTPRouteRetry{Attempts: attempts}
		if backoff != "" {
			d := gatewayv1.Duration(backoff)
			r.Retry.Backoff = &d
		}
		for _, c := range codes {
			r.Retry.Codes = append(r.Retry.Codes, gatewayv1.HTTPRouteRetryStatusCode(c))
		}
	}
}

func TestHTTPRouteRetry(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(*gatewayv1.HTTPRouteRule)
		want *RouteRetry
	}{
		{"none", func(*gatewayv1.HTTPRouteRule) {}, nil},
		{"codes and attempts", withRetry(ptrTo(3), "", 500), &RouteRetry{Attempts: 3, Codes: []int{500}}},
		{"codes sorted, each once", withRetry(ptrTo(2), "", 504, 500, 503, 502, 500), &RouteRetry{Attempts: 2, Codes: []int{500, 502, 503, 504}}},
		{"attempts unset", withRetry(nil, "", 429), &RouteRetry{Attempts: defaultRetryAttempts, Codes: []int{429}}},
		{"no codes: errors and timeouts", withRetry(ptrTo(1), ""), &RouteRetry{Attempts: 1}},
		{"a zero backoff", withRetry(ptrTo(1), "0s", 503), &RouteRetry{Attempts: 1, Codes: []int{503}}},
	} {
		rule := routeRule(matchList(pathMatch(gatewayv1.PathMatchPathPrefix, "/r")), backendTo("", "web", 80))
		c.set(&rule)
		m, problems := Build(gwSnapshot(gw80(), newRoute("default", "r", toGW(), nil, rule)))
		if len(problems) != 0 {
			t.Fatalf("%s: problems: %v", c.name, problems)
		}
		route, _ := gatewayRoute(m, front1, "_")
		for _, l := range route.Locations {
			if !reflect.DeepEqual(l.Rule.Retry, c.want) {
				t.Errorf("%s: %s: retry %s, want %s", c.name, l.Path, dump(l.Rule.Retry), dump(c.want))
			}
		}
	}
}

func TestRetryLocation(t *testing.T) {
	for _, c := range []struct {
		codes []int
		want  string
	}{
		{nil, ""},
		{[]int{500}, "@restysync_retry_500"},
		{[]int{429, 500, 503}, "@restysync_retry_429_500_503"},
	} {
		if got := RetryLocation(c.codes); got != c.want {
			t.Errorf("RetryLocation(%v) = %q, want %q", c.codes, got, c.want)
		}
	}
}
