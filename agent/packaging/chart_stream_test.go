package packaging

import (
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// streamValues turn on what nginx's stream module serves: two TCP services
// (one sending the PROXY protocol to its backend), one UDP service, and SSL
// passthrough; nginx, not root, may bind port 53 through the sysctl the
// chart's README shows.
var streamValues = map[string]any{
	"tcp":   map[string]any{"9000": "default/echo:80", "9001": "default/echo:80::PROXY"},
	"udp":   map[string]any{"53": "kube-system/dns:53"},
	"agent": map[string]any{"enableSSLPassthrough": true},
	"podSecurityContext": map[string]any{"sysctls": []any{
		map[string]any{"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"},
	}},
}

// streamArgPrefixes are the agent flags that only tcp, udp and
// agent.enableSSLPassthrough pass.
var streamArgPrefixes = []string{"--enable-ssl-passthrough", "--tcp-services-configmap", "--udp-services-configmap"}

// tcp and udp: the chart creates one ConfigMap each with the values' data,
// points the agent's --tcp-services-configmap and --udp-services-configmap
// at them, opens a port per entry on the nginx container and on the
// Service (same protocol, the Service's port targeting the container port
// by name), and passes --enable-ssl-passthrough; with the defaults, none
// of it is rendered.
func TestChartStreamServices(t *testing.T) {
	t.Run("on", func(t *testing.T) {
		objs, notes := mustRender(t, streamValues)
		full := fullname("stream")

		wantData := map[string]map[string]string{
			full + "-tcp": {"9000": "default/echo:80", "9001": "default/echo:80::PROXY"},
			full + "-udp": {"53": "kube-system/dns:53"},
		}
		for name, want := range wantData {
			cm := configMapNamed(t, objs, name)
			if cm.Namespace != releaseNamespace {
				t.Errorf("ConfigMap %s in namespace %q, want %s", name, cm.Namespace, releaseNamespace)
			}
			if !maps.Equal(cm.Data, want) {
				t.Errorf("ConfigMap %s data %v, want %v", name, cm.Data, want)
			}
		}

		spec := podSpec(t, objs)
		agent, _ := agentContainer(t, spec)
		for _, want := range []string{
			"--enable-ssl-passthrough",
			"--tcp-services-configmap=" + releaseNamespace + "/" + full + "-tcp",
			"--udp-services-configmap=" + releaseNamespace + "/" + full + "-udp",
		} {
			if n := countArgs(agent.Args, want); n != 1 {
				t.Errorf("agent args %q carry %s %d times, want once", agent.Args, want, n)
			}
		}
		// The HTTPS port stays where it is: passthrough shares it.
		for _, want := range []string{"--https-port=8443", "--https-redirect-port=443"} {
			if !slices.Contains(agent.Args, want) {
				t.Errorf("agent args %q lack %s", agent.Args, want)
			}
		}

		if psc := spec.SecurityContext; psc == nil || len(psc.Sysctls) != 1 || psc.RunAsUser == nil || *psc.RunAsUser != 65532 {
			t.Errorf("pod securityContext %+v: want the sysctl added to the chart's UID", psc)
		}

		nginx := container(t, spec, "openresty")
		wantContainer := []corev1.ContainerPort{
			{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
			{Name: "https", ContainerPort: 8443, Protocol: corev1.ProtocolTCP},
			{Name: "status", ContainerPort: 10246, Protocol: corev1.ProtocolTCP},
			{Name: "tcp-9000", ContainerPort: 9000, Protocol: corev1.ProtocolTCP},
			{Name: "tcp-9001", ContainerPort: 9001, Protocol: corev1.ProtocolTCP},
			{Name: "udp-53", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
		}
		if !slices.Equal(nginx.Ports, wantContainer) {
			t.Errorf("nginx ports\n got %+v\nwant %+v", nginx.Ports, wantContainer)
		}
		if len(agent.Ports) != 1 || agent.Ports[0].Name != "metrics" {
			t.Errorf("agent ports %+v: want only metrics (nginx listens on the stream ports)", agent.Ports)
		}

		svc := serviceNamed(t, objs, full)
		var gotService []corev1.ServicePort
		for _, p := range svc.Spec.Ports {
			gotService = append(gotService, corev1.ServicePort{Name: p.Name, Port: p.Port, TargetPort: p.TargetPort, Protocol: p.Protocol})
		}
		wantService := []corev1.ServicePort{
			{Name: "http", Port: 80, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP},
			{Name: "https", Port: 443, TargetPort: intstr.FromString("https"), Protocol: corev1.ProtocolTCP},
			{Name: "tcp-9000", Port: 9000, TargetPort: intstr.FromString("tcp-9000"), Protocol: corev1.ProtocolTCP},
			{Name: "tcp-9001", Port: 9001, TargetPort: intstr.FromString("tcp-9001"), Protocol: corev1.ProtocolTCP},
			{Name: "udp-53", Port: 53, TargetPort: intstr.FromString("udp-53"), Protocol: corev1.ProtocolUDP},
		}
		if !slices.Equal(gotService, wantService) {
			t.Errorf("Service ports\n got %+v\nwant %+v", gotService, wantService)
		}
		// Every Service port targets a port of the nginx container with
		// the same protocol.
		for _, sp := range svc.Spec.Ports {
			i := slices.IndexFunc(nginx.Ports, func(cp corev1.ContainerPort) bool { return cp.Name == sp.TargetPort.String() })
			if i < 0 || nginx.Ports[i].Protocol != sp.Protocol {
				t.Errorf("Service port %s targets %s/%s, which the nginx container does not have", sp.Name, sp.TargetPort.String(), sp.Protocol)
			}
		}

		for _, want := range []string{"9000/TCP -> default/echo:80", "53/UDP -> kube-system/dns:53", "SSL passthrough is on"} {
			if !strings.Contains(notes, want) {
				t.Errorf("NOTES.txt lacks %q:\n%s", want, notes)
			}
		}
	})

	t.Run("defaults", func(t *testing.T) {
		objs, notes := mustRender(t, nil)
		for _, cm := range find(objs, "ConfigMap") {
			if strings.HasSuffix(cm.GetName(), "-tcp") || strings.HasSuffix(cm.GetName(), "-udp") {
				t.Errorf("defaults render ConfigMap %s", cm.GetName())
			}
		}
		spec := podSpec(t, objs)
		agent, _ := agentContainer(t, spec)
		for _, arg := range agent.Args {
			for _, prefix := range streamArgPrefixes {
				if strings.HasPrefix(arg, prefix) {
					t.Errorf("defaults pass the agent %s", arg)
				}
			}
		}
		nginx := container(t, spec, "openresty")
		if names := portNames(nginx.Ports); !slices.Equal(names, []string{"http", "https", "status"}) {
			t.Errorf("nginx ports %v, want http, https, status", names)
		}
		svc := serviceNamed(t, objs, fullname("defaults"))
		var names []string
		for _, p := range svc.Spec.Ports {
			names = append(names, p.Name)
		}
		if !slices.Equal(names, []string{"http", "https"}) {
			t.Errorf("Service ports %v, want http, https", names)
		}
		if strings.Contains(notes, "TCP and UDP services") || strings.Contains(notes, "passthrough") {
			t.Errorf("defaults: NOTES.txt mentions stream services:\n%s", notes)
		}
	})

	// Each can be set alone.
	for _, c := range []struct {
		name       string
		values     map[string]any
		want       []string
		configMaps int // the settings' included
	}{
		{"tcp only", map[string]any{"tcp": map[string]any{"9000": "default/echo:80"}}, []string{"--tcp-services-configmap"}, 2},
		{"udp only", map[string]any{"udp": map[string]any{"53": "kube-system/dns:53"}}, []string{"--udp-services-configmap"}, 2},
		{"passthrough only", map[string]any{"agent": map[string]any{"enableSSLPassthrough": true}}, []string{"--enable-ssl-passthrough"}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			objs, _ := mustRender(t, c.values)
			agent, _ := agentContainer(t, podSpec(t, objs))
			var got []string
			for _, arg := range agent.Args {
				for _, prefix := range streamArgPrefixes {
					if strings.HasPrefix(arg, prefix) {
						got = append(got, prefix)
					}
				}
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("stream flags %v, want %v", got, c.want)
			}
			if n := len(find(objs, "ConfigMap")); n != c.configMaps {
				t.Errorf("%d ConfigMaps rendered, want %d", n, c.configMaps)
			}
		})
	}
}

// A TCP or UDP service on a port nginx serves HTTP on, a TCP one on the
// agent's metrics port or on a port the Service uses for HTTP, stops the
// render with a message naming both values; the same port numbers with the
// other protocol are fine.
func TestChartStreamPortConflicts(t *testing.T) {
	refused := []struct {
		name   string
		values map[string]any
		want   []string
	}{
		{"tcp on nginx's http port", map[string]any{"tcp": map[string]any{"8080": "default/echo:80"}}, []string{"tcp.8080", "containerPorts.http"}},
		{"udp on nginx's https port", map[string]any{"udp": map[string]any{"8443": "default/dns:53"}}, []string{"udp.8443", "containerPorts.https"}},
		{"tcp on nginx's status port", map[string]any{"tcp": map[string]any{"10246": "default/echo:80"}}, []string{"tcp.10246", "containerPorts.status"}},
		{"tcp on the agent's metrics port", map[string]any{"tcp": map[string]any{"10254": "default/echo:80"}}, []string{"tcp.10254", "agent.metricsPort"}},
		{"tcp on the Service's https port", map[string]any{"tcp": map[string]any{"443": "default/echo:443"}}, []string{"tcp.443", "service.httpsPort"}},
		{"moved http port", map[string]any{"containerPorts": map[string]any{"http": 9000}, "tcp": map[string]any{"9000": "default/echo:80"}}, []string{"tcp.9000", "containerPorts.http"}},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			_, err := renderChart(c.values)
			if err == nil {
				t.Fatalf("values %v rendered; want a port conflict", c.values)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q: %v", w, err)
				}
			}
		})
	}
	// UDP on the Service's HTTPS port (HTTP/3's) and on the metrics port.
	objs, _ := mustRender(t, map[string]any{"udp": map[string]any{"443": "default/quic:443", "10254": "default/dns:53"}})
	svc := serviceNamed(t, objs, fullname("defaults"))
	if len(svc.Spec.Ports) != 4 {
		t.Errorf("Service ports %+v: want http, https, udp-443, udp-10254", svc.Spec.Ports)
	}
}

func configMapNamed(t *testing.T, objs []*unstructured.Unstructured, name string) *corev1.ConfigMap {
	t.Helper()
	for _, o := range find(objs, "ConfigMap") {
		if o.GetName() == name {
			return convert[corev1.ConfigMap](t, o)
		}
	}
	t.Fatalf("no ConfigMap %s", name)
	return nil
}

func countArgs(args []string, want string) int {
	n := 0
	for _, a := range args {
		if a == want {
			n++
		}
	}
	return n
}

func portNames(ports []corev1.ContainerPort) []string {
	var names []string
	for _, p := range ports {
		names = append(names, p.Name)
	}
	return names
}
