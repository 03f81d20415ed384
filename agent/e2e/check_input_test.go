package e2e

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Issue 28, point 1: restysync check is a gate that cannot pass by
// checking nothing. Each test runs the CLI on what a user first feeds it.

// checkRun runs restysync check with args (stdin from stdin, "" for none)
// and returns its stdout, stderr and exit code.
func checkRun(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(agentBinary, append([]string{"check"}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("running check: %v", err)
	}
	return out.String(), errOut.String(), code
}

// checkJSON is the part of check's JSON report these tests read.
type checkJSON struct {
	Ingresses []struct {
		Ingress     string `json:"ingress"`
		Annotations []struct {
			Key, Status, Reason, Suggestion string
		} `json:"annotations"`
	} `json:"ingresses"`
	ConfigMap *struct {
		Keys []struct {
			Key, Status, Reason, Suggestion string
		} `json:"keys"`
	} `json:"configMap"`
	Objects []struct {
		Object, Status, Reason string
	} `json:"objects"`
	NotIngressRelated map[string]int `json:"notIngressRelated"`
	Summary           map[string]int `json:"summary"`
}

func decodeCheck(t *testing.T, out string) checkJSON {
	t.Helper()
	var r checkJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("decoding %s: %v", out, err)
	}
	return r
}

// kubectlList is `kubectl get ingress -A -o yaml` of two Ingresses and,
// as `kubectl get all,ingress` gives too, a Deployment and a Service.
func kubectlList() string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: List\nmetadata:\n  resourceVersion: \"\"\nitems:\n")
	for _, doc := range []string{
		ingress("shop", ingressOpts{class: "nginx", host: "shop.test", paths: []path{prefix("/", "web")},
			annotations: map[string]string{"nginx.ingress.kubernetes.io/rewrite-target": "/"}}),
		ingress("blog", ingressOpts{class: "nginx", host: "blog.test", paths: []path{prefix("/", "web")}}),
		"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: default\n",
		service("web", 8080, ep("10.1.2.3")),
	} {
		// service() writes a Service and its EndpointSlice: two documents.
		for _, one := range strings.Split(doc, "---\n") {
			for i, line := range strings.Split(strings.TrimSuffix(one, "\n"), "\n") {
				if i == 0 {
					b.WriteString("- " + line + "\n")
				} else {
					b.WriteString("  " + line + "\n")
				}
			}
		}
	}
	return b.String()
}

// A kind: List, as kubectl writes it, is read item by item: its two
// Ingresses are checked, the Deployment is counted as not
// Ingress-related; from a file, a folder and stdin alike.
func TestCheckReadsKubectlList(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "all.yaml")
	if err := os.WriteFile(file, []byte(kubectlList()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, src := range []struct{ name, source, stdin string }{
		{"file", "file:" + file, ""},
		{"folder", "file:" + dir, ""},
		{"stdin", "-", kubectlList()},
	} {
		t.Run(src.name, func(t *testing.T) {
			out, stderr, code := checkRun(t, src.stdin, "--source", src.source, "-o", "json")
			if code != 0 {
				t.Fatalf("exit %d, want 0\n%s%s", code, out, stderr)
			}
			r := decodeCheck(t, out)
			if s := r.Summary; s["ingresses"] != 2 || s["moves"] != 2 || s["supported"] != 1 || s["not_read"] != 0 {
				t.Errorf("summary %v, want the list's 2 Ingresses, both moving", s)
			}
			if n := r.NotIngressRelated["Deployment (apps/v1)"]; n != 1 || len(r.NotIngressRelated) != 1 {
				t.Errorf("not Ingress-related %v, want the Deployment alone", r.NotIngressRelated)
			}
			text, _, _ := checkRun(t, src.stdin, "--source", src.source)
			for _, want := range []string{"restysync check: 2 Ingresses;", "Not Ingress-related, passed over: 1 Deployment (apps/v1)\n",
				"\n2 of 2 Ingresses move unchanged\n"} {
				if !strings.Contains(text, want) {
					t.Errorf("text report without %q:\n%s", want, text)
				}
			}
		})
	}
}

// A folder of a v1beta1 Ingress, a backend written as port: 80, a Helm
// template and one good Ingress: check lists the three it cannot read,
// naming file and document, and fails, though the good one moves. With no
// Ingress at all, it fails too.
func TestCheckFailsOnWhatItCannotRead(t *testing.T) {
	dir := t.TempDir()
	good := ingress("good", ingressOpts{class: "nginx", host: "good.test", paths: []path{prefix("/", "web")}})
	files := map[string]string{
		"good.yaml": good,
		"old.yaml": strings.Replace(ingress("old", ingressOpts{class: "nginx", host: "old.test", paths: []path{prefix("/", "web")}}),
			"networking.k8s.io/v1", "networking.k8s.io/v1beta1", 1),
		"port.yaml": regexp.MustCompile(`port:\n\s+number: 80`).ReplaceAllString(good, "port: 80"),
		"chart.yaml": "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {{ .Release.Name }}\n  annotations:\n" +
			"    {{- toYaml .Values.annotations | nindent 4 }}\nspec:\n  ingressClassName: nginx\n",
		"rbac.yaml": "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: r\n---\n" +
			"apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: s\n",
	}
	if !strings.Contains(files["port.yaml"], "port: 80\n") {
		t.Fatalf("port.yaml is not written with port: 80:\n%s", files["port.yaml"])
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, stderr, code := checkRun(t, "", "--source", "file:"+dir, "-o", "json")
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, out, stderr)
	}
	r := decodeCheck(t, out)
	if s := r.Summary; s["ingresses"] != 1 || s["moves"] != 1 || s["not_read"] != 3 {
		t.Errorf("summary %v, want 1 Ingress checked and 3 documents not read", s)
	}
	want := map[string]string{
		"File " + filepath.Join(dir, "old.yaml") + "#1":   `Ingress of apiVersion "networking.k8s.io/v1beta1" is not read: that API was removed in Kubernetes 1.22`,
		"File " + filepath.Join(dir, "port.yaml") + "#1":  "a backend's service.port is written as a number or a name (port: 80); networking.k8s.io/v1 wants port: {number: 80}",
		"File " + filepath.Join(dir, "chart.yaml") + "#1": "a template, not a manifest ({{ }} is Helm's or Go's): render it first (helm template)",
	}
	for _, o := range r.Objects {
		if reason, ok := want[o.Object]; !ok || o.Status != "invalid" || !strings.Contains(o.Reason, reason) {
			t.Errorf("object %+v, want one of %v", o, want)
		}
		delete(want, o.Object)
	}
	if len(want) > 0 {
		t.Errorf("not reported: %v", want)
	}
	if len(r.NotIngressRelated) != 2 || r.NotIngressRelated["Role (rbac.authorization.k8s.io/v1)"] != 1 || r.NotIngressRelated["ServiceAccount (v1)"] != 1 {
		t.Errorf("not Ingress-related %v, want the Role and the ServiceAccount", r.NotIngressRelated)
	}
	text, stderr, _ := checkRun(t, "", "--source", "file:"+dir)
	if !strings.Contains(text, "\nNot read: 3 documents cannot be read, each named under File below; an Ingress among them is not checked\n") ||
		!strings.Contains(stderr, "3 documents cannot be read") {
		t.Errorf("text report:\n%s%s", text, stderr)
	}

	// Nothing but documents of other kinds: no Ingress, nothing checked.
	for _, name := range []string{"good.yaml", "old.yaml", "port.yaml", "chart.yaml"} {
		os.Remove(filepath.Join(dir, name))
	}
	out, stderr, code = checkRun(t, "", "--source", "file:"+dir)
	if code != 1 || !strings.Contains(stderr, "no Ingress found in --source file:"+dir+": nothing was checked") {
		t.Errorf("check of a folder with no Ingress: exit %d\n%s%s", code, out, stderr)
	}
	_, stderr, code = checkRun(t, "", "--source", "-")
	if code != 1 || !strings.Contains(stderr, "no Ingress found in --source -") {
		t.Errorf("check of an empty stdin: exit %d\n%s", code, stderr)
	}
}

// A typo'd key is status typo with the key meant, in text and JSON: check
// passes without --strict (ingress-nginx ignores the key too) and fails
// with it. A ConfigMap's keys get the same: use-gzipp is a typo of
// use-gzip, ssl-redirect is an ingress-nginx key restysync does not
// support yet (which fails the check, --strict or not), my-setting is not
// an ingress-nginx key.
func TestCheckTypoAndStrict(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "app.yaml"), []byte(ingress("app", ingressOpts{class: "nginx", host: "app.test",
		paths: []path{prefix("/", "web")}, annotations: map[string]string{
			"nginx.ingress.kubernetes.io/rewrite-targt": "/",
			"restysync.io/upstream-hash-bi":             "$request_uri",
		}})), 0o644); err != nil {
		t.Fatal(err)
	}
	app := "file:" + filepath.Join(dir, "app.yaml")

	// restysync.io/ is ours alone: a typo there stays unknown (and
	// fails), with the suggestion.
	out, stderr, code := checkRun(t, "", "--source", app, "-o", "json")
	if code != 1 || !strings.Contains(stderr, "1 unknown") {
		t.Errorf("exit %d, want 1 for the unknown restysync.io/ key\n%s", code, stderr)
	}
	r := decodeCheck(t, out)
	got := map[string][2]string{}
	for _, a := range r.Ingresses[0].Annotations {
		got[a.Key] = [2]string{a.Status, a.Suggestion}
	}
	if g := got["nginx.ingress.kubernetes.io/rewrite-targt"]; g != [2]string{"typo", "nginx.ingress.kubernetes.io/rewrite-target"} {
		t.Errorf("rewrite-targt: %v", g)
	}
	if g := got["restysync.io/upstream-hash-bi"]; g != [2]string{"unknown", "restysync.io/upstream-hash-by"} {
		t.Errorf("upstream-hash-bi: %v", g)
	}

	// The typo alone: exit 0, and 1 with --strict.
	if err := os.WriteFile(filepath.Join(dir, "app.yaml"), []byte(ingress("app", ingressOpts{class: "nginx", host: "app.test",
		paths: []path{prefix("/", "web")}, annotations: map[string]string{"nginx.ingress.kubernetes.io/rewrite-targt": "/"}})), 0o644); err != nil {
		t.Fatal(err)
	}
	text, stderr, code := checkRun(t, "", "--source", app)
	if code != 0 || !strings.Contains(text, "  nginx.ingress.kubernetes.io/rewrite-targt  typo  not an ingress-nginx annotation; a typo of rewrite-target?\n") {
		t.Errorf("exit %d, want 0 without --strict\n%s%s", code, text, stderr)
	}
	_, stderr, code = checkRun(t, "", "--source", app, "--strict")
	if code != 1 || !strings.Contains(stderr, "--strict: 1 annotations do nothing under either controller (1 typo, 0 ignored-by-ingress-nginx)") {
		t.Errorf("--strict: exit %d, want 1\n%s", code, stderr)
	}

	// The ConfigMap's keys.
	if err := os.WriteFile(filepath.Join(dir, "cm.yaml"), []byte(configMap(map[string]string{"use-gzipp": "true", "my-setting": "x"})), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code = checkRun(t, "", "--source", "file:"+dir, "--configmap", cmName, "-o", "json")
	if code != 0 {
		t.Errorf("ConfigMap with a typo and a key nobody reads: exit %d, want 0 without --strict\n%s", code, stderr)
	}
	r = decodeCheck(t, out)
	keys := map[string][3]string{}
	for _, k := range r.ConfigMap.Keys {
		keys[k.Key] = [3]string{k.Status, k.Suggestion, k.Reason}
	}
	if k := keys["use-gzipp"]; k != [3]string{"typo", "use-gzip", "not an ingress-nginx key; a typo of use-gzip?; it is ignored"} {
		t.Errorf("use-gzipp: %v", k)
	}
	if k := keys["my-setting"]; k[0] != "ignored-by-ingress-nginx" || k[2] != "not an ingress-nginx key (ingress-nginx ignores it too); it is ignored" {
		t.Errorf("my-setting: %v", k)
	}
	_, stderr, code = checkRun(t, "", "--source", "file:"+dir, "--configmap", cmName, "--strict")
	if code != 1 || !strings.Contains(stderr, "--strict: 2 keys do nothing under either controller (1 typo, 1 ignored-by-ingress-nginx)") {
		t.Errorf("ConfigMap --strict: exit %d, want 1\n%s", code, stderr)
	}

	if err := os.WriteFile(filepath.Join(dir, "cm.yaml"), []byte(configMap(map[string]string{
		"ssl-redirect": "false", "enable-real-ip": "true", "log-format-stream": "true"})), 0o644); err != nil {
		t.Fatal(err)
	}
	text, stderr, code = checkRun(t, "", "--source", "file:"+dir, "--configmap", cmName)
	if code != 1 || !strings.Contains(stderr, "3 keys are not supported as written (0 invalid, 0 refused, 3 unknown)") {
		t.Errorf("ConfigMap with ingress-nginx keys restysync lacks: exit %d, want 1\n%s", code, stderr)
	}
	for _, key := range []string{"ssl-redirect", "enable-real-ip", "log-format-stream"} {
		if want := "  " + key; !strings.Contains(text, want) ||
			!strings.Contains(text[strings.Index(text, want):], "unknown  an ingress-nginx key restysync does not support yet; it is ignored\n") {
			t.Errorf("text report does not say %s is an ingress-nginx key restysync does not support yet:\n%s", key, text)
		}
	}
}

// inspect --source on a GitOps folder counts the documents of kinds it
// does not serve on one line, instead of a Problem each, in text and JSON.
func TestInspectSourceCountsOtherKinds(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "app.yaml"), []byte(
		"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n---\n"+
			"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: api\n---\n"+
			"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: r\n---\n"+
			ingress("web", ingressOpts{class: "restysync", host: "web.test", paths: []path{prefix("/", "web")}})), 0o644); err != nil {
		t.Fatal(err)
	}
	text, err := exec.Command(agentBinary, "inspect", "--source", "file:"+dir).CombinedOutput()
	if err != nil {
		t.Fatalf("inspect: %v\n%s", err, text)
	}
	if !strings.Contains(string(text), "\nProblems: none\nNot Ingress-related, passed over: 1 ClusterRole (rbac.authorization.k8s.io/v1), 2 Deployment (apps/v1)\n") {
		t.Errorf("inspect --source:\n%s", text)
	}
	out, err := exec.Command(agentBinary, "inspect", "--source", "file:"+filepath.Join(dir, "app.yaml"), "-o", "json").Output()
	if err != nil {
		t.Fatalf("inspect of a file: %v", err)
	}
	var report struct {
		Problems          []json.RawMessage `json:"problems"`
		NotIngressRelated map[string]int    `json:"not_ingress_related"`
	}
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatal(err)
	}
	if len(report.Problems) != 0 || report.NotIngressRelated["Deployment (apps/v1)"] != 2 {
		t.Errorf("inspect -o json: problems %s, not Ingress-related %v", report.Problems, report.NotIngressRelated)
	}
}
