package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/restysync/restysync/agent/internal/model"
)

// --gateway-controller-name is checked as the Gateway API checks a
// GatewayClass's controllerName.
func TestParseGatewayController(t *testing.T) {
	for _, ok := range []string{model.GatewayControllerName, "example.com/gateway", "a.b-c.example/x/y_z~1%20:=", "x/y"} {
		if got, err := parseGatewayController(ok); err != nil || got != ok {
			t.Errorf("parseGatewayController(%q) = %q, %v; want it taken", ok, got, err)
		}
	}
	tests := []struct{ value, reason string }{
		{"", "must not be empty"},
		{"example.com", "want a domain-prefixed path"},
		{"example.com/", "want a domain-prefixed path"},
		{"Example.com/gateway", "is not a lowercase DNS domain"},
		{"/gateway", "is not a lowercase DNS domain"},
		{"exa_mple.com/gateway", "is not a lowercase DNS domain"},
		{"example.com/gate way", "the path may hold only"},
		{"example.com/gate\"way", "the path may hold only"},
		{"example.com/" + strings.Repeat("a", 242), "longer than 253 characters"},
	}
	for _, tt := range tests {
		if _, err := parseGatewayController(tt.value); err == nil || !strings.Contains(err.Error(), tt.reason) ||
			!strings.HasPrefix(err.Error(), "--gateway-controller-name") {
			t.Errorf("parseGatewayController(%q) = %v, want an error naming the flag: ...%s...", tt.value, err, tt.reason)
		}
	}
}

// --gateway-addresses takes IP addresses, each once, normalised; a
// range, a CIDR or an address no Gateway can have is a start-up error.
func TestParseGatewayAddresses(t *testing.T) {
	got, err := parseGatewayAddresses([]string{" 127.0.50.1", "127.0.50.2", "", "::ffff:10.0.0.1", "2001:DB8::1"})
	if want := []string{"127.0.50.1", "127.0.50.2", "10.0.0.1", "2001:db8::1"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("parseGatewayAddresses = %q, %v; want %q", got, err, want)
	}
	if got, err := parseGatewayAddresses(nil); err != nil || got != nil {
		t.Errorf("no addresses: %q, %v; want none", got, err)
	}
	tests := []struct{ values, reason string }{
		{"gateway.example.com", "want an IP address"},
		{"127.0.50.0/24", "ranges and CIDRs are not taken"},
		{"127.0.50.1-127.0.50.9", "ranges and CIDRs are not taken"},
		{"fe80::1%eth0", "want an IP address"},
		{"0.0.0.0", "not an unspecified or multicast one"},
		{"::", "not an unspecified or multicast one"},
		{"224.0.0.1", "not an unspecified or multicast one"},
		{"127.0.50.1,127.0.50.1", "listed twice"},
		{"127.0.50.1,::ffff:127.0.50.1", "listed twice"},
	}
	for _, tt := range tests {
		_, err := parseGatewayAddresses(strings.Split(tt.values, ","))
		if err == nil || !strings.Contains(err.Error(), tt.reason) || !strings.HasPrefix(err.Error(), "--gateway-addresses") {
			t.Errorf("parseGatewayAddresses(%q) = %v, want an error naming the flag: ...%s...", tt.values, err, tt.reason)
		}
	}
}
