package file

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/restysync/restysync/agent/internal/model"
	"github.com/restysync/restysync/agent/internal/source"
)

func serviceYAML(name string, port int) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: %s
spec:
  ports:
    - name: http
      port: %d
`, name, port)
}

func ingressYAML(name, service string) string {
	return fmt.Sprintf(`apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: %s
  namespace: default
spec:
  ingressClassName: restysync
  rules:
    - host: %s.example.com
      http:
        paths:
          - path: /
            pathType: Prefix
            backend:
              service:
                name: %s
                port:
                  number: 80
`, name, name, service)
}

// indentItem writes a manifest as one item of a list's items.
func indentItem(manifest string) string {
	lines := strings.Split(strings.TrimSuffix(manifest, "\n"), "\n")
	for i, line := range lines {
		if i == 0 {
			lines[i] = "- " + line
		} else {
			lines[i] = "  " + line
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

func endpointSliceYAML(name, service string) string {
	return fmt.Sprintf(`apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: %s
  namespace: default
  labels:
    kubernetes.io/service-name: %s
addressType: IPv4
ports:
  - name: http
    port: 8080
endpoints:
  - addresses: ["10.0.0.1"]
`, name, service)
}

const tlsSecretYAML = `apiVersion: v1
kind: Secret
metadata:
  name: tls
  namespace: web
type: kubernetes.io/tls
data:
  tls.crt: Y2VydA==
  tls.key: a2V5
`

const ingressClassYAML = `apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: restysync
  namespace: ignored
spec:
  controller: restysync.io/ingress-controller
`

const configMapYAML = `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  a: b
`

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeAtomic saves a file as editors do: a temp file renamed over it.
func writeAtomic(t testing.TB, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	writeFile(t, tmp, content)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// objectNames lists what a source serves as "Kind namespace/name", in order.
func objectNames(s *Source) []string {
	snap, _ := s.Snapshot()
	var names []string
	add := func(kind, namespace, name string) {
		if namespace == "" {
			names = append(names, kind+" "+name)
		} else {
			names = append(names, kind+" "+namespace+"/"+name)
		}
	}
	for o := range snap.IngressClasses.All() {
		add("IngressClass", o.Namespace, o.Name)
	}
	for o := range snap.Ingresses.All() {
		add("Ingress", o.Namespace, o.Name)
	}
	for o := range snap.Services.All() {
		add("Service", o.Namespace, o.Name)
	}
	for o := range snap.EndpointSlices.All() {
		add("EndpointSlice", o.Namespace, o.Name)
	}
	for o := range snap.Secrets.All() {
		add("Secret", o.Namespace, o.Name)
	}
	for _, o := range s.ConfigMaps() {
		add("ConfigMap", o.Namespace, o.Name)
	}
	return names
}

// relativeProblems returns the problems with dir cut from their names.
func relativeProblems(dir string, problems []model.Problem) []model.Problem {
	out := slices.Clone(problems)
	for i := range out {
		out[i].Name = strings.TrimPrefix(out[i].Name, dir+string(filepath.Separator))
	}
	return out
}

type wantProblem struct {
	name   string // relative to the folder: "x.yaml#2"
	reason string // a part of the reason
}

func TestDecodeFolder(t *testing.T) {
	tests := []struct {
		name         string
		files        map[string]string
		opts         []Option
		wantObjects  []string
		wantProblems []wantProblem
		check        func(t *testing.T, snap model.Snapshot)
	}{
		{
			name: "all kinds in one file, in any order",
			files: map[string]string{"all.yaml": strings.Join([]string{
				configMapYAML, tlsSecretYAML, endpointSliceYAML("web-1", "web"),
				serviceYAML("web", 80), ingressYAML("web", "web"), ingressClassYAML,
			}, "---\n")},
			wantObjects: []string{
				"IngressClass restysync", "Ingress default/web", "Service default/web",
				"EndpointSlice default/web-1", "Secret web/tls", "ConfigMap default/settings",
			},
		},
		{
			name: "empty documents and comments are skipped",
			files: map[string]string{"x.yaml": "---\n---\n# only a comment\n\n---\n" +
				serviceYAML("a", 80) + "---\n# trailing comment\n"},
			wantObjects: []string{"Service default/a"},
		},
		{
			name:        "json",
			files:       map[string]string{"x.json": `{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "j"}, "spec": {"ports": [{"port": 80}]}}`},
			wantObjects: []string{"Service default/j"},
		},
		{
			name:         "unknown kind",
			files:        map[string]string{"x.yaml": serviceYAML("a", 80) + "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n"},
			wantObjects:  []string{"Service default/a"},
			wantProblems: []wantProblem{{"x.yaml#2", `kind "Pod" of apiVersion "v1" is not read`}},
		},
		{
			name:         "unknown apiVersion",
			files:        map[string]string{"x.yaml": strings.Replace(serviceYAML("a", 80), "apiVersion: v1", "apiVersion: example.com/v9", 1)},
			wantProblems: []wantProblem{{"x.yaml#1", `Service of apiVersion "example.com/v9" is not read: the file source reads it as v1`}},
		},
		{
			// Not a document of another kind: an Ingress nothing would serve.
			name:         "v1beta1 Ingress",
			files:        map[string]string{"x.yaml": strings.Replace(ingressYAML("a", "a"), "networking.k8s.io/v1", "networking.k8s.io/v1beta1", 1)},
			wantProblems: []wantProblem{{"x.yaml#1", `Ingress of apiVersion "networking.k8s.io/v1beta1" is not read: that API was removed in Kubernetes 1.22`}},
		},
		{
			name:         "other kind",
			files:        map[string]string{"x.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n"},
			wantProblems: []wantProblem{{"x.yaml#1", `kind "Deployment" of apiVersion "apps/v1" is not read`}},
		},
		{
			name:         "Helm template",
			files:        map[string]string{"x.yaml": "apiVersion: v1\nkind: Service\nmetadata:\n  name: {{ .Release.Name }}\n  labels:\n    {{- toYaml .Values.labels | nindent 4 }}\n"},
			wantProblems: []wantProblem{{"x.yaml#1", "a template, not a manifest ({{ }} is Helm's or Go's): render it first (helm template)"}},
		},
		{
			name:         "backend port written as a number",
			files:        map[string]string{"x.yaml": strings.Replace(ingressYAML("a", "a"), "port:\n                  number: 80", "port: 80", 1)},
			wantProblems: []wantProblem{{"x.yaml#1", "a backend's service.port is written as a number or a name (port: 80); networking.k8s.io/v1 wants port: {number: 80}"}},
		},
		{
			// As `kubectl get -o yaml` writes it; items of other kinds are
			// left out as any such document.
			name: "kind: List",
			files: map[string]string{"x.yaml": "apiVersion: v1\nkind: List\nitems:\n" +
				indentItem(ingressYAML("a", "a")) + indentItem(serviceYAML("a", 80)) +
				indentItem("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n") +
				indentItem(strings.Replace(ingressYAML("b", "b"), "networking.k8s.io/v1", "extensions/v1beta1", 1)) +
				"---\n" + serviceYAML("after", 80)},
			wantObjects: []string{"Ingress default/a", "Service default/a", "Service default/after"},
			wantProblems: []wantProblem{
				{"x.yaml#1", `items[2]: kind "Deployment" of apiVersion "apps/v1" is not read`},
				{"x.yaml#1", `items[3]: Ingress of apiVersion "extensions/v1beta1" is not read`},
			},
		},
		{
			name: "typed list, as JSON",
			files: map[string]string{"x.json": `{"apiVersion": "networking.k8s.io/v1", "kind": "IngressList", "items": [` +
				`{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "j"}, "spec": {"ports": [{"port": 80}]}}]}`},
			wantObjects: []string{"Service default/j"},
		},
		{
			name:         "secret that is neither TLS nor Opaque",
			files:        map[string]string{"x.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\ntype: kubernetes.io/basic-auth\ndata:\n  password: cHc=\n"},
			wantProblems: []wantProblem{{"x.yaml#1", "only kubernetes.io/tls and Opaque Secrets are read"}},
		},
		{
			name:         "TLS secret without a key",
			files:        map[string]string{"x.yaml": strings.Replace(tlsSecretYAML, "  tls.key: a2V5\n", "", 1)},
			wantProblems: []wantProblem{{"x.yaml#1", `has no "tls.key"`}},
		},
		{
			name: "TLS secret with stringData",
			files: map[string]string{"x.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\ntype: kubernetes.io/tls\n" +
				"stringData:\n  tls.crt: CERT\n  tls.key: KEY\n"},
			wantObjects: []string{"Secret default/s"},
			check: func(t *testing.T, snap model.Snapshot) {
				s := snap.Secrets.At(0)
				if string(s.Data[corev1.TLSCertKey]) != "CERT" || string(s.Data[corev1.TLSPrivateKeyKey]) != "KEY" || s.StringData != nil {
					t.Errorf("stringData not folded into data: %+v", s)
				}
			},
		},
		{
			name: "malformed document 2 of 3",
			files: map[string]string{"x.yaml": serviceYAML("a", 80) + "---\nkind: Service\n  bad: [indent\n---\n" +
				serviceYAML("c", 80)},
			wantObjects:  []string{"Service default/a", "Service default/c"},
			wantProblems: []wantProblem{{"x.yaml#2", "yaml"}},
		},
		{
			name:         "malformed separator",
			files:        map[string]string{"x.yaml": serviceYAML("a", 80) + "---junk\n" + serviceYAML("b", 80)},
			wantProblems: []wantProblem{{"x.yaml#1", "invalid Yaml document separator"}},
			wantObjects:  []string{"Service default/b"},
		},
		{
			name:         "unknown field",
			files:        map[string]string{"x.yaml": serviceYAML("a", 80) + "  colour: blue\n"},
			wantProblems: []wantProblem{{"x.yaml#1", `unknown field "spec.colour"`}},
		},
		{
			name:         "duplicate key",
			files:        map[string]string{"x.yaml": serviceYAML("a", 80) + "metadata:\n  name: b\n"},
			wantProblems: []wantProblem{{"x.yaml#1", `"metadata" already set`}},
		},
		{
			name:         "missing kind",
			files:        map[string]string{"x.yaml": "apiVersion: v1\nmetadata:\n  name: a\n"},
			wantProblems: []wantProblem{{"x.yaml#1", "kind is not set"}},
		},
		{
			name:         "missing name",
			files:        map[string]string{"x.yaml": "apiVersion: v1\nkind: Service\nmetadata:\n  generateName: a-\n"},
			wantProblems: []wantProblem{{"x.yaml#1", "Service has no metadata.name"}},
		},
		{
			name:         "invalid names",
			files:        map[string]string{"x.yaml": serviceYAML("Web_1", 80) + "---\n" + strings.Replace(serviceYAML("a", 80), "name: a", "name: a\n  namespace: \"a/b\"", 1)},
			wantProblems: []wantProblem{{"x.yaml#1", `metadata.name "Web_1"`}, {"x.yaml#2", `metadata.namespace "a/b"`}},
		},
		{
			name:        "missing namespace is default, cluster-scoped has none",
			files:       map[string]string{"x.yaml": serviceYAML("a", 80) + "---\n" + ingressClassYAML},
			wantObjects: []string{"IngressClass restysync", "Service default/a"},
		},
		{
			name: "duplicate objects across files: first path wins",
			files: map[string]string{
				"a.yaml":     serviceYAML("web", 80),
				"b.yaml":     serviceYAML("web", 81) + "---\n" + serviceYAML("other", 80),
				"sub/c.yaml": strings.Replace(serviceYAML("web", 82), "name: web", "name: web\n  namespace: default", 1),
			},
			wantObjects: []string{"Service default/other", "Service default/web"},
			wantProblems: []wantProblem{
				{"b.yaml#1", "Service default/web is also defined in"},
				{"sub/c.yaml#1", "Service default/web is also defined in"},
			},
			check: func(t *testing.T, snap model.Snapshot) {
				if port := snap.Services.At(1).Ports[0].Port; port != 80 {
					t.Errorf("Service web has port %d, want 80 from a.yaml", port)
				}
			},
		},
		{
			name: "objects sorted by namespace and name",
			files: map[string]string{
				"a.yaml": serviceYAML("zeta", 80) + "---\n" + strings.Replace(serviceYAML("alpha", 80), "name: alpha", "name: alpha\n  namespace: zz", 1),
				"b.yaml": serviceYAML("beta", 80),
			},
			wantObjects: []string{"Service default/beta", "Service default/zeta", "Service zz/alpha"},
		},
		{
			name:         "too many documents",
			files:        map[string]string{"x.yaml": serviceYAML("a", 80) + "---\n" + serviceYAML("b", 80) + "---\n" + serviceYAML("c", 80)},
			opts:         []Option{WithMaxDocuments(2)},
			wantObjects:  []string{"Service default/a", "Service default/b"},
			wantProblems: []wantProblem{{"x.yaml#3", "more than 2 documents"}},
		},
		{
			name:         "file too large",
			files:        map[string]string{"big.yaml": serviceYAML("big", 80) + "#" + strings.Repeat("-", 100), "small.yml": serviceYAML("s", 1)},
			opts:         []Option{WithMaxFileSize(150)},
			wantObjects:  []string{"Service default/s"},
			wantProblems: []wantProblem{{"big.yaml", "more than the limit of 150"}},
		},
		{
			name: "hidden, temp and other files are not read",
			files: map[string]string{
				"x.yaml~": "junk", ".x.yaml": "junk", ".#x.yaml": "junk", "x.yaml.swp": "junk",
				"4913": "junk", "#x.yaml#": "junk", "README.md": "junk", ".hidden/x.yaml": "junk",
				"..2024_01_01/x.yaml": "junk", "X.YAML": serviceYAML("upper", 80),
			},
			wantObjects: []string{"Service default/upper"},
		},
		{
			name:        "subfolders",
			files:       map[string]string{"a/b/c/x.yaml": serviceYAML("deep", 80), "a/y.yml": serviceYAML("shallow", 80)},
			wantObjects: []string{"Service default/deep", "Service default/shallow"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tt.files {
				writeFile(t, filepath.Join(dir, name), content)
			}
			s := New(dir, tt.opts...)
			s.readAll()
			s.publish()

			if got := objectNames(s); !slices.Equal(got, tt.wantObjects) {
				t.Errorf("objects:\n got %q\nwant %q", got, tt.wantObjects)
			}
			snap, problems := s.Snapshot()
			problems = relativeProblems(dir, problems)
			if len(problems) != len(tt.wantProblems) {
				t.Fatalf("problems:\n got %v\nwant %v", problems, tt.wantProblems)
			}
			for i, want := range tt.wantProblems {
				got := problems[i]
				if got.Kind != "File" || got.Name != want.name || !strings.Contains(got.Reason, want.reason) {
					t.Errorf("problem %d = %v, want File %s: ...%s...", i, got, want.name, want.reason)
				}
				// Only a document of another kind is one check lets pass.
				if other := strings.Contains(want.reason, `kind "`); OtherKind(got) != other {
					t.Errorf("problem %d = %v: OtherKind %v, want %v", i, got, !other, other)
				}
			}
			if tt.check != nil {
				tt.check(t, snap)
			}
		})
	}
}

// OtherKinds counts the documents of kinds the source does not read, by
// kind and apiVersion, and leaves every other problem.
func TestOtherKinds(t *testing.T) {
	_, problems := ReadBytes("x.yaml", []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\n---\n"+
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: b}\n---\n"+
		"apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: r}\n---\n"+
		"apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ServiceAccount\n  metadata: {name: s}\n---\n"+
		strings.Replace(ingressYAML("a", "a"), "networking.k8s.io/v1", "networking.k8s.io/v1beta1", 1)))
	counts, rest := OtherKinds(problems)
	want := map[string]int{"Deployment (apps/v1)": 2, "Role (rbac.authorization.k8s.io/v1)": 1, "ServiceAccount (v1)": 1}
	if !maps.Equal(counts, want) {
		t.Errorf("counts %v, want %v", counts, want)
	}
	if len(rest) != 1 || rest[0].Name != "x.yaml#5" || !strings.Contains(rest[0].Reason, "v1beta1") {
		t.Errorf("other problems %v, want the v1beta1 Ingress alone", rest)
	}
}

// ReadBytes reads one file's bytes as a folder's file is read.
func TestReadBytes(t *testing.T) {
	snap, problems := ReadBytes("stdin", []byte(ingressYAML("a", "web")+"---\n"+serviceYAML("web", 80)+"---\nkind: x\n"))
	if snap.Ingresses.Len() != 1 || snap.Services.Len() != 1 {
		t.Errorf("read %d Ingresses and %d Services, want 1 and 1", snap.Ingresses.Len(), snap.Services.Len())
	}
	if len(problems) != 1 || problems[0].Name != "stdin#3" {
		t.Errorf("problems %v, want one of stdin#3", problems)
	}
	_, problems = ReadBytes("big.yaml", []byte(serviceYAML("a", 80)), WithMaxFileSize(10))
	if len(problems) != 1 || !strings.Contains(problems[0].Reason, "more than the limit of 10") {
		t.Errorf("problems %v, want the file too large", problems)
	}
}

// Snapshot's lists are the view's, shared and read-only: a publish, patched
// or whole, makes new ones, so a snapshot handed out stays as it was. Its
// problems are the caller's.
func TestSnapshotSlicesStayAsHandedOut(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "x.yaml"), serviceYAML("a", 80)+"---\n"+serviceYAML("c", 80)+"---\nkind: Pod\napiVersion: v1\n")
	s := New(dir)
	s.readAll()
	s.publish()

	snap, problems := s.Snapshot()
	problems[0].Reason = "changed"
	if _, again := s.Snapshot(); again[0].Reason == "changed" {
		t.Error("Snapshot returned problems that share memory with the source")
	}
	names := func(snap model.Snapshot) string {
		var out []string
		for svc := range snap.Services.All() {
			out = append(out, svc.Name)
		}
		return strings.Join(out, ",")
	}
	for _, step := range []struct{ what, file, content, want string }{
		{"a new file (patched)", "y.yaml", serviceYAML("b", 80), "a,b,c"},
		{"an edit (patched)", "y.yaml", serviceYAML("b", 81), "a,b,c"},
		{"a deleted file (patched)", "y.yaml", "", "a,c"},
		{"its problem gone (whole)", "x.yaml", serviceYAML("a", 80), "a"},
	} {
		path := filepath.Join(dir, step.file)
		writeOrRemove(t, path, step.content)
		before := names(snap)
		held := snap.Services.Slice()
		s.readFile(path)
		s.publish()
		if names(snap) != before || !slices.Equal(held, snap.Services.Slice()) {
			t.Errorf("%s: a snapshot handed out changed from %s to %s", step.what, before, names(snap))
		}
		snap, _ = s.Snapshot()
		if got := names(snap); got != step.want {
			t.Errorf("%s: Services %s, want %s", step.what, got, step.want)
		}
	}
}

// recorder collects the kinds passed to the changed callback.
type recorder struct{ kinds chan source.Kind }

func (r *recorder) changed(c source.Change) {
	select {
	case r.kinds <- c.Kind:
	default:
		panic("recorder full")
	}
}

// drain forgets the calls so far.
func (r *recorder) drain() {
	for {
		select {
		case <-r.kinds:
		default:
			return
		}
	}
}

func startSource(t *testing.T, dir string, opts ...Option) (*Source, *recorder) {
	t.Helper()
	s := New(dir, opts...)
	rec := &recorder{kinds: make(chan source.Kind, 1000)}
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.Start(ctx, rec.changed); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			t.Error("watch goroutine did not stop")
		}
	})
	return s, rec
}

const waitTimeout = 5 * time.Second

// waitChange waits until changed was called with kind and the source then
// satisfies cond.
func waitChange(t *testing.T, s *Source, rec *recorder, kind source.Kind, what string, cond func(model.Snapshot, []model.Problem) bool) {
	t.Helper()
	deadline := time.After(waitTimeout)
	called := false
	for {
		if called {
			if snap, problems := s.Snapshot(); cond(snap, problems) {
				return
			}
		}
		select {
		case k := <-rec.kinds:
			called = called || k == kind
		case <-deadline:
			snap, problems := s.Snapshot()
			t.Fatalf("after %v: changed(%s) called: %v; waiting for %s; services %v, problems %v",
				waitTimeout, kind, called, what, serviceSummary(snap), problems)
		}
	}
}

func serviceSummary(snap model.Snapshot) []string {
	var out []string
	for s := range snap.Services.All() {
		port := int32(0)
		if len(s.Ports) > 0 {
			port = s.Ports[0].Port
		}
		out = append(out, fmt.Sprintf("%s/%s:%d", s.Namespace, s.Name, port))
	}
	return out
}

// servicePort returns the first port of Service default/name, or 0.
func servicePort(snap model.Snapshot, name string) int32 {
	for s := range snap.Services.All() {
		if s.Namespace == "default" && s.Name == name && len(s.Ports) > 0 {
			return s.Ports[0].Port
		}
	}
	return 0
}

func hasPort(name string, port int32) func(model.Snapshot, []model.Problem) bool {
	return func(snap model.Snapshot, _ []model.Problem) bool { return servicePort(snap, name) == port }
}

func hasProblem(name string) func(model.Snapshot, []model.Problem) bool {
	return func(_ model.Snapshot, problems []model.Problem) bool {
		return slices.ContainsFunc(problems, func(p model.Problem) bool { return p.Name == name })
	}
}

func TestWatch(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "start.yaml"), serviceYAML("start", 80))
	s, rec := startSource(t, dir)
	if port := servicePort(func() model.Snapshot { snap, _ := s.Snapshot(); return snap }(), "start"); port != 80 {
		t.Fatalf("after Start: Service start has port %d, want 80", port)
	}
	select {
	case k := <-rec.kinds:
		t.Fatalf("changed(%s) called for the first read", k)
	default:
	}
	path := filepath.Join(dir, "web.yaml")

	t.Run("create", func(t *testing.T) {
		rec.drain()
		writeFile(t, path, serviceYAML("web", 80))
		waitChange(t, s, rec, source.KindService, "web:80", hasPort("web", 80))
	})
	t.Run("modify in place", func(t *testing.T) {
		rec.drain()
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		// Two writes, as an editor may do; both land in one read or two.
		if _, err := f.WriteString(serviceYAML("web", 81)[:20]); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(serviceYAML("web", 81)[20:]); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		waitChange(t, s, rec, source.KindService, "web:81", hasPort("web", 81))
	})
	t.Run("save by rename", func(t *testing.T) {
		rec.drain()
		tmp := filepath.Join(dir, ".web.yaml.tmp")
		writeFile(t, tmp, serviceYAML("web", 82))
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
		waitChange(t, s, rec, source.KindService, "web:82", hasPort("web", 82))
	})
	t.Run("save by delete and create, with vim's probe and backup", func(t *testing.T) {
		rec.drain()
		writeFile(t, filepath.Join(dir, "4913"), "")
		os.Remove(filepath.Join(dir, "4913"))
		if err := os.Rename(path, path+"~"); err != nil {
			t.Fatal(err)
		}
		writeFile(t, path, serviceYAML("web", 83))
		os.Remove(path + "~")
		waitChange(t, s, rec, source.KindService, "web:83", hasPort("web", 83))
	})
	t.Run("delete", func(t *testing.T) {
		rec.drain()
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		waitChange(t, s, rec, source.KindService, "web gone", hasPort("web", 0))
		if port := servicePort(func() model.Snapshot { snap, _ := s.Snapshot(); return snap }(), "start"); port != 80 {
			t.Errorf("Service start has port %d, want 80", port)
		}
	})
}

func TestWatchBrokenFileDoesNotStopOthers(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	writeFile(t, a, serviceYAML("a", 80))
	writeFile(t, b, serviceYAML("b", 80))
	s, rec := startSource(t, dir)

	// A broken save keeps the last good version of a (lastgood.go).
	writeFile(t, a, "apiVersion: v1\nkind: Service\nmetadata: [broken\n")
	waitChange(t, s, rec, source.KindUnknown, "a kept and reported", func(snap model.Snapshot, problems []model.Problem) bool {
		return servicePort(snap, "a") == 80 && hasProblem(a+"#1")(snap, problems)
	})

	rec.drain()
	writeFile(t, b, serviceYAML("b", 81))
	waitChange(t, s, rec, source.KindService, "b:81", hasPort("b", 81))
	if _, problems := s.Snapshot(); !hasProblem(a+"#1")(model.Snapshot{}, problems) {
		t.Errorf("problem of a.yaml is gone: %v", problems)
	}

	rec.drain()
	writeFile(t, a, serviceYAML("a", 82))
	waitChange(t, s, rec, source.KindService, "a:82 and no problems", func(snap model.Snapshot, problems []model.Problem) bool {
		return servicePort(snap, "a") == 82 && len(problems) == 0
	})
}

func TestWatchOnlyProblemsChanged(t *testing.T) {
	dir := t.TempDir()
	s, rec := startSource(t, dir)
	writeFile(t, filepath.Join(dir, "x.yaml"), "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n")
	waitChange(t, s, rec, source.KindUnknown, "a problem", hasProblem(filepath.Join(dir, "x.yaml#1")))
}

func TestWatchIdenticalContentIsQuiet(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	writeFile(t, a, serviceYAML("a", 80))
	writeFile(t, b, ingressYAML("b", "b"))
	s, rec := startSource(t, dir)

	// The same bytes, then the same objects written differently; each
	// saved by rename, so that no read can see a half-written file.
	writeAtomic(t, a, serviceYAML("a", 80))
	writeAtomic(t, a, "# a comment\n"+serviceYAML("a", 80))
	// A later change to another file shows that a.yaml was read by then.
	writeFile(t, b, ingressYAML("b", "c"))
	waitChange(t, s, rec, source.KindIngress, "Ingress b to c", func(snap model.Snapshot, _ []model.Problem) bool {
		return snap.Ingresses.Len() == 1 && snap.Ingresses.At(0).Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name == "c"
	})
	for {
		select {
		case k := <-rec.kinds:
			if k != source.KindIngress {
				t.Errorf("changed(%s) called, but only the Ingress changed", k)
			}
		default:
			return
		}
	}
}

func TestWatchSubfolder(t *testing.T) {
	dir := t.TempDir()
	s, rec := startSource(t, dir)
	sub := filepath.Join(dir, "team", "app")
	writeFile(t, filepath.Join(sub, "x.yaml"), serviceYAML("sub", 80))
	waitChange(t, s, rec, source.KindService, "sub:80", hasPort("sub", 80))

	rec.drain()
	writeFile(t, filepath.Join(sub, "x.yaml"), serviceYAML("sub", 81))
	waitChange(t, s, rec, source.KindService, "sub:81", hasPort("sub", 81))

	rec.drain()
	if err := os.RemoveAll(filepath.Join(dir, "team")); err != nil {
		t.Fatal(err)
	}
	waitChange(t, s, rec, source.KindService, "sub gone", hasPort("sub", 0))
}

// TestWatchConfigMapVolume swaps files the way kubelet updates a ConfigMap
// volume: visible names are symlinks through "..data", which is replaced
// by renaming a new symlink over it.
func TestWatchConfigMapVolume(t *testing.T) {
	dir := t.TempDir()
	version := func(name string, port int) {
		writeFile(t, filepath.Join(dir, name, "svc.yaml"), serviceYAML("cm", port))
		if err := os.Symlink(name, filepath.Join(dir, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	version("..2024_01_01_00_00_00.1", 80)
	if err := os.Symlink(filepath.Join("..data", "svc.yaml"), filepath.Join(dir, "svc.yaml")); err != nil {
		t.Fatal(err)
	}
	s, rec := startSource(t, dir)
	if snap, problems := s.Snapshot(); servicePort(snap, "cm") != 80 || len(problems) != 0 {
		t.Fatalf("after Start: services %v, problems %v", serviceSummary(snap), problems)
	}

	version("..2024_01_01_00_00_01.2", 81)
	if err := os.RemoveAll(filepath.Join(dir, "..2024_01_01_00_00_00.1")); err != nil {
		t.Fatal(err)
	}
	waitChange(t, s, rec, source.KindService, "cm:81", hasPort("cm", 81))
}

func TestWatchFolderRecreated(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "manifests")
	writeFile(t, filepath.Join(dir, "x.yaml"), serviceYAML("old", 80))
	s, rec := startSource(t, dir, WithRetryInterval(20*time.Millisecond))

	// Renamed away: what was read is kept, and the folder is reported.
	if err := os.Rename(dir, dir+".old"); err != nil {
		t.Fatal(err)
	}
	waitChange(t, s, rec, source.KindUnknown, "the folder reported, objects kept", func(snap model.Snapshot, problems []model.Problem) bool {
		return hasProblem(dir)(snap, problems) && servicePort(snap, "old") == 80
	})

	// A new folder under the name is read whole.
	rec.drain()
	writeFile(t, filepath.Join(dir, "y.yaml"), serviceYAML("new", 80))
	waitChange(t, s, rec, source.KindService, "old gone, new read, no problems", func(snap model.Snapshot, problems []model.Problem) bool {
		return servicePort(snap, "old") == 0 && servicePort(snap, "new") == 80 && len(problems) == 0
	})

	// It is watched, and the old one is not.
	rec.drain()
	writeFile(t, filepath.Join(dir+".old", "x.yaml"), serviceYAML("old", 81))
	writeFile(t, filepath.Join(dir, "y.yaml"), serviceYAML("new", 81))
	waitChange(t, s, rec, source.KindService, "new:81", hasPort("new", 81))
	if snap, _ := s.Snapshot(); servicePort(snap, "old") != 0 {
		t.Errorf("a change in the renamed folder was read: %v", serviceSummary(snap))
	}

	// Deleted and created again.
	rec.drain()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "z.yaml"), serviceYAML("newer", 80))
	waitChange(t, s, rec, source.KindService, "only newer, no problems", func(snap model.Snapshot, problems []model.Problem) bool {
		return snap.Services.Len() == 1 && servicePort(snap, "newer") == 80 && len(problems) == 0
	})
}

func TestStartErrors(t *testing.T) {
	dir := t.TempDir()
	notDir := filepath.Join(dir, "file.yaml")
	writeFile(t, notDir, "")
	for _, path := range []string{filepath.Join(dir, "missing"), notDir} {
		s := New(path)
		if err := s.Start(t.Context(), func(source.Change) {}); err == nil {
			t.Errorf("Start(%s) succeeded, want an error", path)
		}
	}

	s, _ := startSource(t, dir)
	if err := s.Start(t.Context(), func(source.Change) {}); err == nil {
		t.Error("second Start succeeded, want an error")
	}
}

// publishes counts the publishes a watching Source makes, by the Services
// list each change callback sees (one list per publish), and whether any
// publish had a problem.
type publishes struct {
	mu       sync.Mutex
	s        *Source
	seen     []model.List[*model.Service]
	count    int
	problems []model.Problem
}

func (p *publishes) changed(source.Change) {
	p.mu.Lock()
	defer p.mu.Unlock()
	snap, problems := p.s.Snapshot()
	p.problems = append(p.problems, problems...)
	if snap.Services.Len() == 0 {
		return
	}
	// Each publish makes a list of its own; it is seen at each change.
	if !slices.ContainsFunc(p.seen, snap.Services.Same) {
		p.seen = append(p.seen, snap.Services)
		p.count++
	}
}

func (p *publishes) get() (int, []model.Problem) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.count, slices.Clone(p.problems)
}

func watchPublishes(t *testing.T, dir string, opts ...Option) *publishes {
	t.Helper()
	s := New(dir, opts...)
	p := &publishes{s: s}
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.Start(ctx, p.changed); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); <-s.done })
	return p
}

// A file written in place in several writes, each pause shorter than the
// debounce but all of them longer, is read once and whole: each write
// restarts the wait (a window from the first event would read it half
// written, a problem, then again).
func TestWatchReadsAFileWrittenInPiecesWhole(t *testing.T) {
	content := serviceYAML("web", 80) + "---\n" + ingressYAML("web", "web")
	const pieces = 15
	gathered(t, func(dir string, step int) bool {
		f := filepath.Join(dir, "web.yaml")
		flag := os.O_WRONLY | os.O_APPEND
		if step == 0 {
			flag |= os.O_CREATE
		}
		file, err := os.OpenFile(f, flag, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer file.Close()
		if _, err := file.WriteString(content[step*len(content)/pieces : (step+1)*len(content)/pieces]); err != nil {
			t.Fatal(err)
		}
		return step+1 < pieces
	}, func(snap model.Snapshot) bool { return snap.Ingresses.Len() == 1 && snap.Services.Len() == 1 })
}

// A burst of files renamed into the folder, each within the debounce of
// the one before but all of them over more than it (a tool writing many
// files), is read in one batch: one publish, then one sync, for all of
// them (a window from the first event would publish part of the burst).
func TestWatchGathersABurstInOnePublish(t *testing.T) {
	const files = 20
	staging := t.TempDir()
	gathered(t, func(dir string, step int) bool {
		name := fmt.Sprintf("app-%02d.yaml", step)
		writeFile(t, filepath.Join(staging, name), serviceYAML(fmt.Sprintf("app-%02d", step), 80))
		if err := os.Rename(filepath.Join(staging, name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		return step+1 < files
	}, func(snap model.Snapshot) bool { return snap.Services.Len() == files })
}

// gathered runs step (0, 1, … until it returns false) in a watched folder,
// each step a tenth of the debounce after the one before, waits for done,
// and checks the steps made one publish and no problem. A run in which a
// pause came near the debounce (a loaded machine) proves nothing and is
// run again, up to 5 times.
func gathered(t *testing.T, step func(dir string, i int) bool, done func(model.Snapshot) bool) {
	t.Helper()
	const debounce = 100 * time.Millisecond
	for range 5 {
		dir := t.TempDir()
		p := watchPublishes(t, dir, WithDebounce(debounce))
		start, last, longest := time.Now(), time.Now(), time.Duration(0)
		for i := 0; ; i++ {
			more := step(dir, i)
			longest, last = max(longest, time.Since(last)), time.Now()
			if !more {
				break
			}
			time.Sleep(debounce / 10)
		}
		if took := time.Since(start); took < debounce {
			t.Fatalf("the steps took %v, not longer than the debounce %v: the test proves nothing", took, debounce)
		}
		deadline := time.Now().Add(waitTimeout)
		for snap, _ := p.s.Snapshot(); !done(snap); snap, _ = p.s.Snapshot() {
			if time.Now().After(deadline) {
				t.Fatal("the files were not read")
			}
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(2 * debounce) // a publish after the one awaited would show here
		if longest > debounce/2 {
			t.Logf("a pause of %v between steps, near the debounce %v: again", longest, debounce)
			continue
		}
		if count, problems := p.get(); count != 1 || len(problems) != 0 {
			t.Errorf("%d publishes, problems %v; want one publish of everything written", count, problems)
		}
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("every run had a pause near the debounce (a loaded machine): nothing proven")
	}
	t.Skip("every run had a pause near the debounce (a loaded machine)")
}

// report marks the last change of a publish Last, and no other: the
// syncer then syncs the batch without waiting for more.
func TestReportMarksTheLastChangeOfABatch(t *testing.T) {
	dir := t.TempDir()
	s := New(dir)
	s.readAll()
	s.publish()
	var got []source.Change
	collect := func(c source.Change) { got = append(got, c) }
	for _, step := range []struct{ name, content string }{
		{"a.yaml", serviceYAML("a", 80) + "---\n" + ingressYAML("a", "a")},
		{"b.yaml", "kind: [\n"}, // a problem alone
	} {
		got = nil
		path := filepath.Join(dir, step.name)
		writeFile(t, path, step.content)
		s.readFile(path)
		s.report(collect)
		if len(got) == 0 {
			t.Fatalf("%s: no change reported", step.name)
		}
		for i, c := range got {
			if c.Last != (i == len(got)-1) {
				t.Errorf("%s: change %d of %d (%s) has Last %v", step.name, i+1, len(got), c, c.Last)
			}
		}
	}
}
