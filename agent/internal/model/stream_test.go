package model

import (
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func passthrough(value string) ingressOption {
	return annotation("nginx.ingress.kubernetes.io/ssl-passthrough", value)
}

// problemsWith returns the reasons of problems that contain part.
func problemsWith(problems []Problem, part string) []string {
	var out []string
	for _, p := range problems {
		if strings.Contains(p.Reason, part) {
			out = append(out, p.Reason)
		}
	}
	return out
}

func TestPassthrough(t *testing.T) {
	s := snapshotOf(
		newIngress("default", "argo", passthrough("true"), createdAt(1),
			rule("argo.example.com", prefix("/", "web", "http")),
			rule("*.wild.example.com", prefix("/", "web", 80)),
			rule("nopath.example.com", prefix("/api", "web", 80)),
			rule("", prefix("/", "web", 80))),
		// A younger Ingress cannot take a host passed through already.
		newIngress("default", "late", passthrough("true"), createdAt(2), rule("argo.example.com", prefix("/", "web", 80))),
		newIngress("default", "defaulted", passthrough("true"), createdAt(3),
			defaultBackendTo(backend("web", 80)), rule("d.example.com", prefix("/x", "gone", 80))),
		newIngress("default", "off", passthrough("false"), rule("off.example.com", prefix("/", "web", 80))),
		newIngress("default", "bad", passthrough("yes"), rule("bad.example.com", prefix("/", "web", 80))),
	)
	s.SSLPassthrough = true
	m, problems := Build(s)
	want := []PassthroughHost{
		{Host: "*.wild.example.com", Backend: "tcp:default/web:80", Ingress: "default/argo"},
		{Host: "argo.example.com", Backend: "tcp:default/web:http", Ingress: "default/argo"},
		{Host: "d.example.com", Backend: "tcp:default/web:80", Ingress: "default/defaulted"},
	}
	if !reflect.DeepEqual(m.Stream.Passthrough, want) {
		t.Errorf("passthrough hosts:\n got %+v\nwant %+v", m.Stream.Passthrough, want)
	}
	wantBackends := []StreamBackend{
		{Name: "tcp:default/web:80", Namespace: "default", Service: "web", Endpoints: webEndpoints},
		{Name: "tcp:default/web:http", Namespace: "default", Service: "web", Endpoints: webEndpoints},
	}
	if !reflect.DeepEqual(m.Stream.Backends, wantBackends) {
		t.Errorf("stream backends:\n got %+v\nwant %+v", m.Stream.Backends, wantBackends)
	}
	for _, part := range []string{
		`host "nopath.example.com" has no path "/"`,
		`spec.rules[3] has no host`,
		`host "argo.example.com" is passed through by Ingress default/argo already`,
		`"yes": is not true or false`,
	} {
		if len(problemsWith(problems, part)) != 1 {
			t.Errorf("want one problem with %q in %v", part, problems)
		}
	}
	// Plain HTTP is still served as the Ingress says.
	if m.Servers.Len() == 0 || m.Servers.At(slices.IndexFunc(m.Servers.Slice(), func(s *Server) bool { return s.Host == "argo.example.com" })).Locations[0].Backend != "default/web:http" {
		t.Errorf("argo.example.com lost its HTTP locations: %+v", m.Servers)
	}

	// Without --enable-ssl-passthrough it is a Problem and nothing passes.
	s.SSLPassthrough = false
	m, problems = Build(s)
	if len(m.Stream.Passthrough) != 0 || len(m.Stream.Backends) != 0 {
		t.Errorf("passthrough without the flag: %+v", m.Stream)
	}
	if got := problemsWith(problems, "needs the agent's --enable-ssl-passthrough"); len(got) != 3 {
		t.Errorf("want a problem per Ingress that asks for passthrough, got %v", got)
	}
}

func servicesConfigMap(name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ingress", Name: name}, Data: data}
}

func TestStreamServices(t *testing.T) {
	s := snapshotOf()
	dns := service("kube-system", "dns", corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
		corev1.ServicePort{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP})
	udp := corev1.ProtocolUDP
	udpPort := slicePort("dns", 5353)
	udpPort.Protocol = &udp
	s.Services = ListOf(append(s.Services.Slice(), dns)...)
	s.EndpointSlices = ListOf(append(s.EndpointSlices.Slice(), endpointSlice("kube-system", "dns-1", "dns", discoveryv1.AddressTypeIPv4,
		ports(udpPort, slicePort("dns-tcp", 5353)), ready("10.0.0.53")))...)
	s.ReservedPorts = []int32{80, 443}
	s.TCPServices = servicesConfigMap("tcp", map[string]string{
		"9000":  "default/web:80",
		"9001":  "default/web:http:PROXY",
		"9002":  "default/web:80::PROXY",
		"5353":  "kube-system/dns:53",
		"9003":  "default/gone:80",
		"80":    "default/web:80",
		"x":     "default/web:80",
		"09004": "default/web:80",
		"9005":  "default/web",
		"9006":  "default/web:80:TLS",
		"9007":  "default/web;x:80",
		"9008":  "default/web:80:PROXY:PROXY:PROXY",
		"9009":  "Default/web:80",
	})
	s.UDPServices = servicesConfigMap("udp", map[string]string{
		"53":   "kube-system/dns:53",
		"5354": "kube-system/dns:dns",
		"5355": "kube-system/dns:53:PROXY",
		"5356": "default/web:80", // web has no UDP port
	})
	m, problems := Build(s)
	var got []string
	for _, svc := range m.Stream.Services {
		got = append(got, strings.Join([]string{string(svc.Protocol), strconv.Itoa(int(svc.Port)), svc.Backend, boolWord(svc.AcceptProxyProtocol), boolWord(svc.SendProxyProtocol)}, " "))
	}
	want := []string{
		"UDP 53 udp:kube-system/dns:53 - -",
		"TCP 5353 tcp:kube-system/dns:53 - -",
		"UDP 5354 udp:kube-system/dns:dns - -",
		"UDP 5356 udp:default/web:80 - -",
		"TCP 9000 tcp:default/web:80 - -",
		"TCP 9001 tcp:default/web:http proxy -",
		"TCP 9002 tcp:default/web:80 - proxy",
		"TCP 9003 tcp:default/gone:80 - -",
	}
	if !slices.Equal(got, want) {
		t.Errorf("services:\n got %q\nwant %q", got, want)
	}
	backends := map[string][]Endpoint{}
	for _, b := range m.Stream.Backends {
		backends[b.Name] = b.Endpoints
	}
	if e := backends["udp:kube-system/dns:53"]; len(e) != 1 || e[0] != (Endpoint{"10.0.0.53", 5353}) {
		t.Errorf("the UDP backend's endpoints: %+v", e)
	}
	if e := backends["tcp:default/gone:80"]; e == nil || len(e) != 0 {
		t.Errorf("a missing Service's backend has no endpoints: %+v", e)
	}
	for _, part := range []string{
		`TCP service "80": nginx listens on that port for HTTP already`,
		`TCP service "x": the key must be a port number`,
		`TCP service "09004": the key must be a port number`,
		`TCP service "9005": value "default/web": want namespace/service:port`,
		`TCP service "9006": value "default/web:80:TLS": field 3 "TLS": want PROXY or nothing`,
		`TCP service "9007": value "default/web;x:80": service "web;x"`,
		`TCP service "9008"`,
		`TCP service "9009": value "Default/web:80": namespace "Default"`,
		`UDP service "5355": value "kube-system/dns:53:PROXY": the PROXY protocol is for TCP services only`,
		`UDP service "5356": value "default/web:80".service.port.number 80: Service default/web has no UDP port 80`,
		`TCP service "9003": value "default/gone:80".service.name "gone": Service default/gone not found`,
	} {
		if len(problemsWith(problems, part)) != 1 {
			t.Errorf("want one problem with %q in %v", part, problems)
		}
	}
	for _, p := range problems {
		if strings.Contains(p.Reason, `"9003"`) && p.Missing != "Service default/gone" {
			t.Errorf("the missing Service's problem names it as Missing: %+v", p)
		}
	}
	if !m.Stream.UsesService("kube-system", "dns") || m.Stream.UsesService("kube-system", "other") {
		t.Errorf("UsesService")
	}
}

func boolWord(b bool) string {
	if b {
		return "proxy"
	}
	return "-"
}

// FuzzStreamTarget: whatever the value, an accepted target names a
// namespace and Service of DNS labels and a port, nothing nginx could read
// as syntax.
func FuzzStreamTarget(f *testing.F) {
	for _, v := range []string{"default/web:80", "a/b:http:PROXY:PROXY", "a/b:c:d", "a/b;c:80", "a/b:80\n", "a/$b:80", "/:", "a/b:0", "a/b:65536:", "a/b:x-y::PROXY"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, value string) {
		ref, _, _, reason := parseStreamTarget(value)
		if reason != "" {
			return
		}
		if strings.ContainsAny(ref.name, "\"'\\ ;{}$#\r\n\t") {
			t.Fatalf("accepted %q as %q", value, ref.name)
		}
		if ref.port.Number == 0 && ref.port.Name == "" {
			t.Fatalf("accepted %q without a port", value)
		}
	})
}
