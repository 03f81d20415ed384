package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/render"
	"github.com/restysync/restysync/agent/internal/testenv/nginxproc"
)

// snapshotConfigMap is the agent's ConfigMap of every world of
// TestSnapshotSameForAgentCheckAndInspect: global snippets, snippet
// annotations off and a limit, which inspect --source and check once left
// out of their snapshots while the agent applied them.
var snapshotConfigMap = configMap(map[string]string{
	"http-snippet":              `add_header X-Global "http";`,
	"server-snippet":            `add_header X-Global-Server "server";`,
	"allow-snippet-annotations": "false",
	"load-balance":              "ewma",
	"max-regex-paths-per-host":  "3",
})

// snapshotWorlds are the manifests the snapshot test runs on: the e2e
// tests' worlds (examples/local, and worlds built as the e2e tests build
// theirs: snippets, TLS, canary, classes), and the migration corpus when
// there is one.
func snapshotWorlds(t *testing.T) map[string]map[string]string {
	worlds := map[string]map[string]string{}
	local := map[string]string{}
	for _, name := range []string{"ingress.yaml", "service.yaml", "endpointslice.yaml"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "examples", "local", name))
		if err != nil {
			t.Fatal(err)
		}
		local[name] = string(data)
	}
	worlds["examples-local"] = local
	pair := newTLSKeyPair(t, 1, "tls.test")
	worlds["built"] = map[string]string{
		"classes.yaml":  ingressClasses,
		"services.yaml": service("app", 18080, ep("127.0.0.161"), notReady("127.0.0.162")) + "---\n" + service("canary", 18080, ep("127.0.0.163")),
		"snippet.yaml": appIngress("snippet", "snippet.test", map[string]string{
			"nginx.ingress.kubernetes.io/configuration-snippet": `more_set_headers "X-Snippet: on";`,
			"nginx.ingress.kubernetes.io/server-snippet":        `add_header X-Server "on";`}),
		"regex.yaml": ingress("regex", ingressOpts{class: "restysync", host: "regex.test",
			annotations: map[string]string{"nginx.ingress.kubernetes.io/use-regex": "true"},
			paths:       []path{prefix("/a.*", "app"), prefix("/b.*", "app"), prefix("/c.*", "app"), prefix("/d.*", "app")}}),
		"tls.yaml": ingress("tls", ingressOpts{class: "restysync", host: "tls.test", paths: []path{prefix("/", "app")},
			tls: []ingressTLS{{secret: "tls-cert", hosts: []string{"tls.test"}}}}) + "---\n" + tlsSecret("tls-cert", pair.cert, pair.key),
		"canary.yaml": ingress("main", ingressOpts{class: "restysync", host: "canary.test", paths: []path{prefix("/", "app")}}) + "---\n" +
			ingress("canary", ingressOpts{class: "restysync", host: "canary.test", paths: []path{prefix("/", "canary")},
				annotations: map[string]string{"nginx.ingress.kubernetes.io/canary": "true", "nginx.ingress.kubernetes.io/canary-weight": "30"}}),
		"other.yaml":   ingress("other", ingressOpts{class: "other", host: "other.test", paths: []path{prefix("/", "app")}}),
		"noclass.yaml": ingress("noclass", ingressOpts{host: "noclass.test", paths: []path{prefix("/", "app")}}),
	}
	dir := corpusDir(t)
	if dir == "" && isCI() {
		t.Fatal("no shared/migration-corpus to compare snapshots over (CI=true; set RESTYSYNC_MIGRATION_CORPUS)")
	}
	if dir != "" {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		corpus := map[string]string{}
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".yaml") {
				data, err := os.ReadFile(filepath.Join(dir, e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				corpus[e.Name()] = string(data)
			}
		}
		worlds["migration-corpus"] = corpus
	} else if isCI() {
		t.Fatal("no shared/migration-corpus (CI=true)")
	}
	return worlds
}

// Issue 26: the agent, restysync check and restysync inspect --source
// build their model from one snapshot assembly (package snapshot). Over the
// same manifests and ConfigMap, each binary's snapshot (written by the
// e2ehooks build) is the same, and so is the model built from it, but for
// what each deliberately judges otherwise: the Targets (the agent knows the
// pod's addresses and its admin ports; check judges for a cluster), and
// check builds every Ingress as ours (snapshot.Options.EveryIngressOurs).
func TestSnapshotSameForAgentCheckAndInspect(t *testing.T) {
	for name, files := range snapshotWorlds(t) {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			files["configmap.yaml"] = snapshotConfigMap
			for file, content := range files {
				if err := os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			classArgs := []string{"--ingress-class", "restysync"}
			if name == "migration-corpus" {
				// Its Ingresses name ingress-nginx's class, or none.
				classArgs = []string{"--ingress-class", "nginx", "--watch-ingress-without-class"}
			}
			source := []string{"--source", "file:" + dir, "--configmap", cmName}

			agent := agentSnapshot(t, append(append(source, classArgs...),
				"--http-port", "80", "--https-port", "443", "--enable-ssl-passthrough",
				"--load-module", render.DebianModSecurityModule)...)
			inspect := cliSnapshot(t, append(append([]string{"inspect", "-o", "json", "--enable-ssl-passthrough"}, source...), classArgs...)...)
			check := cliSnapshot(t, append([]string{"check", "-o", "json"}, source...)...)
			if agent.Ingresses.Len() == 0 {
				t.Fatal("the world holds no Ingress")
			}

			if !agent.Targets.Local || !inspect.Targets.Local || check.Targets.Local {
				t.Errorf("targets local: agent %v, inspect %v, check %v; want a folder's for the agent and inspect, a cluster's for check",
					agent.Targets.Local, inspect.Targets.Local, check.Targets.Local)
			}
			sameSnapshot(t, "inspect --source", agent, inspect)
			// check: every Ingress as ours, in the one class it names.
			want := agent
			want.IngressClass, want.WatchWithoutClass = "restysync-check", false
			want.IngressClasses = model.ListOf(&networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: want.IngressClass},
				Spec: networkingv1.IngressClassSpec{Controller: model.ControllerName}})
			want.Ingresses = model.List[*networkingv1.Ingress]{}
			for ing := range agent.Ingresses.All() {
				ours := ing.DeepCopy()
				ours.Spec.IngressClassName = &want.IngressClass
				delete(ours.Annotations, "kubernetes.io/ingress.class") // else a second class
				want.Ingresses = model.ListOf(append(want.Ingresses.Slice(), ours)...)
			}
			sameSnapshot(t, "check", want, check)
		})
	}
}

// sameSnapshot fails unless got is want but for Targets and Now, and builds
// both with want's Targets and one clock to the same model.
func sameSnapshot(t *testing.T, who string, want, got model.Snapshot) {
	t.Helper()
	now := time.Now()
	got.Targets, got.Now, want.Now = want.Targets, now, now
	w, g := reflect.ValueOf(want), reflect.ValueOf(got)
	for i := range w.NumField() {
		if !reflect.DeepEqual(w.Field(i).Interface(), g.Field(i).Interface()) {
			t.Errorf("%s: snapshot field %s differs from the agent's:\n%+v\nagent's:\n%+v", who, w.Type().Field(i).Name, g.Field(i), w.Field(i))
		}
	}
	wantModel, wantProblems := model.Build(want)
	gotModel, gotProblems := model.Build(got)
	if !reflect.DeepEqual(wantModel, gotModel) || !reflect.DeepEqual(wantProblems, gotProblems) {
		t.Errorf("%s: the model differs from the agent's", who)
	}
}

// e2eSnapshotFile is snapshot.E2ESnapshotFile, of the e2ehooks build.
const e2eSnapshotFile = "RESTYSYNC_E2E_SNAPSHOT_FILE"

// agentSnapshot runs the agent with args, no nginx beside it, until its
// first full build, and returns that build's snapshot.
func agentSnapshot(t *testing.T, args ...string) model.Snapshot {
	t.Helper()
	file := filepath.Join(t.TempDir(), "snapshot.json")
	t.Setenv(e2eSnapshotFile, file)
	args = append(append([]string{"run"}, args...), "--shared-dir", t.TempDir(),
		"--metrics-address", "127.0.0.1:"+strconv.Itoa(nginxproc.FreePort(t)))
	a := startAgent(t, args...)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(file); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent built no snapshot:\n%s", a.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	a.stop(t)
	return readSnapshot(t, file)
}

// cliSnapshot runs the agent binary with args (check or inspect) and
// returns the snapshot it built.
func cliSnapshot(t *testing.T, args ...string) model.Snapshot {
	t.Helper()
	file := filepath.Join(t.TempDir(), "snapshot.json")
	cmd := exec.Command(agentBinary, args...)
	cmd.Env = append(os.Environ(), e2eSnapshotFile+"="+file)
	out, _ := cmd.CombinedOutput() // check exits 1 when anything does not move
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("restysync %s built no snapshot:\n%s", args[0], out)
	}
	return readSnapshot(t, file)
}

func readSnapshot(t *testing.T, file string) model.Snapshot {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var snap model.Snapshot
	if err := json.Unmarshal(data, &snap); err != nil {
		t.Fatalf("decoding %s: %v", file, err)
	}
	return snap
}
