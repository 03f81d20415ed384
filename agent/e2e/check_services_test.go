package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// `restysync check --tcp-services-configmap/--udp-services-configmap`
// classifies each entry of ingress-nginx's services ConfigMaps: supported,
// invalid with the reason, or missing-object, and exits 1 on an invalid one.
func TestCheckServicesConfigMaps(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"svc.yaml": service("echo", 9000, ep("127.0.0.1")),
		"tcp.yaml": namedConfigMap("tcp-services", map[string]string{"9000": "default/echo:80", "9001": "default/gone:80", "9002": "default/echo:80:TLS"}),
		"udp.yaml": namedConfigMap("udp-services", map[string]string{"53": "default/echo:80"}),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command(agentBinary, "check", "--source", "file:"+dir, "-o", "json",
		"--tcp-services-configmap", "default/tcp-services", "--udp-services-configmap", "default/udp-services").Output()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 1 {
		t.Fatalf("check with an invalid entry: %v, want exit code 1", err)
	}
	var report struct {
		TCP struct {
			Entries []struct{ Port, Status, Reason string } `json:"entries"`
		} `json:"tcpServices"`
		UDP struct {
			Entries []struct{ Port, Status, Reason string } `json:"entries"`
		} `json:"udpServices"`
	}
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	got := map[string]string{}
	for _, e := range report.TCP.Entries {
		got["tcp "+e.Port] = e.Status + " " + e.Reason
	}
	for _, e := range report.UDP.Entries {
		got["udp "+e.Port] = e.Status + " " + e.Reason
	}
	for key, want := range map[string]string{
		"tcp 9000": "supported",
		"tcp 9001": "missing-object",
		"tcp 9002": `invalid value "default/echo:80:TLS": field 3 "TLS": want PROXY or nothing`,
		"udp 53":   "invalid value \"default/echo:80\".service.port.number 80: Service default/echo has no UDP port 80",
	} {
		if !strings.HasPrefix(got[key], want) {
			t.Errorf("%s: %q, want %q…", key, got[key], want)
		}
	}
}
