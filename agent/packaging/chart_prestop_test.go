package packaging

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// preStopScript is files/prestop.sh: what the chart's and the sidecar
// example's nginx containers run before they stop, and what agent/e2e's
// TestRolloutDropsNothing runs against real nginx under load.
func preStopScript(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartDir(), "files", "prestop.sh"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// wantPreStop is the preStop command running files/prestop.sh with its
// three arguments.
func wantPreStop(t *testing.T, sleep, drain, pidFile string) []string {
	t.Helper()
	return []string{"sh", "-c", preStopScript(t), "prestop", sleep, drain, pidFile}
}

func preStopCommand(c corev1.Container) []string {
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Exec == nil {
		return nil
	}
	return c.Lifecycle.PreStop.Exec.Command
}

// The nginx container keeps serving for openresty.preStop.sleepSeconds,
// then drains (files/prestop.sh), native sidecar or not, and the pod's
// grace period covers both; the chart refuses a grace period that does not.
func TestChartPreStop(t *testing.T) {
	for _, c := range []struct {
		name               string
		values             map[string]any
		sleep, drain, pid  string
		gracePeriodAtLeast int64
	}{
		{"defaults", nil, "15", "60", "/var/run/restysync/nginx.pid", 76},
		{"plain sidecar, other values", map[string]any{
			"agent":                         map[string]any{"nativeSidecar": false},
			"sharedDir":                     "/srv/shared/",
			"openresty":                     map[string]any{"preStop": map[string]any{"sleepSeconds": 5, "drainSeconds": 20}},
			"terminationGracePeriodSeconds": 30,
		}, "5", "20", "/srv/shared/nginx.pid", 26},
	} {
		t.Run(c.name, func(t *testing.T) {
			objs, _ := mustRender(t, c.values)
			spec := podSpec(t, objs)
			nginx := container(t, spec, "openresty")
			if got, want := preStopCommand(nginx), wantPreStop(t, c.sleep, c.drain, c.pid); !reflect.DeepEqual(got, want) {
				t.Errorf("nginx preStop %q, want %q", got, want)
			}
			if g := spec.TerminationGracePeriodSeconds; g == nil || *g < c.gracePeriodAtLeast {
				t.Errorf("terminationGracePeriodSeconds %v: want at least %d", g, c.gracePeriodAtLeast)
			}
		})
	}

	t.Run("grace period too short", func(t *testing.T) {
		_, err := renderChart(map[string]any{"terminationGracePeriodSeconds": 75})
		if err == nil || !strings.Contains(err.Error(), "terminationGracePeriodSeconds (75) must be larger than openresty.preStop.sleepSeconds + openresty.preStop.drainSeconds (75)") {
			t.Errorf("grace period 75 with preStop 15 + 60: got %v, want the chart to refuse it", err)
		}
	})
	t.Run("schema", func(t *testing.T) {
		_, err := renderChart(map[string]any{"openresty": map[string]any{"preStop": map[string]any{"sleepSeconds": -1}}})
		if err == nil || !strings.Contains(err.Error(), "openresty/preStop/sleepSeconds") {
			t.Errorf("sleepSeconds -1: got %v, want a schema error", err)
		}
	})
}

// The sidecar example's nginx container stops as the chart's does.
func TestSidecarPreStop(t *testing.T) {
	deps := find(buildSidecar(t), "Deployment")
	if len(deps) != 1 {
		t.Fatalf("%d Deployments", len(deps))
	}
	spec := convert[appsv1.Deployment](t, deps[0]).Spec.Template.Spec
	nginx := container(t, spec, "openresty")
	if got, want := preStopCommand(nginx), wantPreStop(t, "15", "60", "/var/run/restysync/nginx.pid"); !reflect.DeepEqual(got, want) {
		t.Errorf("sidecar nginx preStop %q,\nwant the chart's %q", got, want)
	}
	if g := spec.TerminationGracePeriodSeconds; g == nil || *g != 90 {
		t.Errorf("sidecar terminationGracePeriodSeconds %v, want 90 as the chart", g)
	}
}
