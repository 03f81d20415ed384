package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// The lines inspect prints for the Ingresses it does not serve.
const (
	notServedNginx     = "Ingress apps/legacy: not served: class nginx is not restysync's (controller k8s.io/ingress-nginx)"
	notServedClassless = "Ingress apps/classless: not served: names no class: restysync serves those only with " +
		"--watch-ingress-without-class, or when IngressClass restysync is the default one"
	twoClassesWarning = `spec.ingressClassName: "restysync" and the annotation kubernetes.io/ingress.class "nginx" name two classes; ` +
		"the field wins, as in ingress-nginx and the Kubernetes API: restysync serves it"
	classControllerWarning = `spec.controller is "k8s.io/ingress-nginx", not restysync's "restysync.io/ingress-controller"`
)

// TestKubeClassDecisions runs the agent on a real API server and checks
// that every class decision is explained: the Ingresses it does not serve
// are listed with why by inspect (live and --source kube), and an
// IngressClass named like ours of another controller, and an Ingress that
// names two classes, get a Warning in the log and as a Kubernetes Event.
func TestKubeClassDecisions(t *testing.T) {
	e := startKubeEnv(t)
	e.create(ingressClass("nginx", "k8s.io/ingress-nginx"))
	// Ours, by name, but of ingress-nginx's controller: a mistake.
	e.create(ingressClass("restysync", "k8s.io/ingress-nginx"))
	e.create(kubeService("web")) // no endpoints: a served path answers 503
	e.create(kubeIngress(appsNS, "legacy", "nginx", "legacy.test", map[string]string{"/": "web"}))
	classless := kubeIngress(appsNS, "classless", "", "classless.test", map[string]string{"/": "web"})
	classless.Spec.IngressClassName = nil
	e.create(classless)
	// The API server refuses to create an Ingress whose annotation differs
	// from its field; an update may add one.
	e.create(kubeIngress(appsNS, "both", "restysync", "both.test", map[string]string{"/": "web"}))

	s := newKubeStack(t, e, "agent-a", publishA)

	t.Run("IngressClass restysync of ingress-nginx's controller", func(t *testing.T) {
		s.eventually("a Warning Event on the IngressClass", func() error { return e.classWarning("restysync", classControllerWarning) })
		if log := s.agent.log.String(); !strings.Contains(log, "IngressClass restysync") || !strings.Contains(log, "not restysync's") {
			t.Errorf("the agent log has no warning about IngressClass restysync")
		}
		if err := s.expect("both.test", "/", "404"); err != nil {
			t.Errorf("an Ingress of a class whose controller is not ours: %v", err)
		}
		out := inspectText(t, "--admin", s.admin)
		for _, want := range []string{"Ingress apps/both: not served: IngressClass restysync has controller k8s.io/ingress-nginx, not restysync's restysync.io/ingress-controller",
			"IngressClass restysync: " + classControllerWarning} {
			if !strings.Contains(out, want) {
				t.Errorf("inspect lacks %q:\n%s", want, out)
			}
		}
		// spec.controller cannot change: the class is made again.
		if err := e.admin.NetworkingV1().IngressClasses().Delete(e.ctx(), "restysync", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		e.create(ingressClass("restysync", controllerRef))
		s.eventually("both.test is served", func() error { return s.expect("both.test", "/", "503") })
	})

	t.Run("an Ingress naming two classes: the field wins, with a Warning", func(t *testing.T) {
		// The agent writes the Ingress's status meanwhile: a conflict is
		// read again.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			ing, err := e.admin.NetworkingV1().Ingresses(appsNS).Get(e.ctx(), "both", metav1.GetOptions{})
			if err != nil {
				return err
			}
			ing.Annotations = map[string]string{"kubernetes.io/ingress.class": "nginx"}
			_, err = e.admin.NetworkingV1().Ingresses(appsNS).Update(e.ctx(), ing, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		s.eventually("a Warning Event on the Ingress", func() error { return e.warningOn("both", twoClassesWarning) })
		if err := s.expect("both.test", "/", "503"); err != nil {
			t.Errorf("the field names our class, so it is served: %v", err)
		}
		if !strings.Contains(s.agent.log.String(), "name two classes") {
			t.Errorf("the agent log has no warning about the two classes")
		}
	})

	t.Run("inspect lists the Ingresses not served and why, live and with --source kube", func(t *testing.T) {
		live := inspectText(t, "--admin", s.admin)
		dry := inspectText(t, "--source", "kube", "--kubeconfig", e.kubeconfig, "--namespace", appsNS)
		for name, out := range map[string]string{"live": live, "--source kube": dry} {
			for _, want := range []string{"Ingresses not served (2)", notServedNginx, notServedClassless, "Ingress apps/both: " + twoClassesWarning} {
				if !strings.Contains(out, want) {
					t.Errorf("inspect (%s) lacks %q:\n%s", name, want, out)
				}
			}
		}
		t.Logf("inspect:\n%s", live)
		for _, host := range []string{"legacy.test", "classless.test"} {
			if err := s.expect(host, "/", "404"); err != nil {
				t.Error(err)
			}
		}
	})
}

// TestInspectSourceFileClassDecisions is the --source file: variant: the
// same explanations from a folder, with no agent.
func TestInspectSourceFileClassDecisions(t *testing.T) {
	dir := t.TempDir()
	s := &stack{t: t, manifests: dir}
	s.writeFile("classes.yaml", "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata:\n  name: nginx\nspec:\n  controller: k8s.io/ingress-nginx\n"+
		"---\napiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata:\n  name: restysync\nspec:\n  controller: "+controllerRef+"\n")
	s.writeFile("web.yaml", service("web", 8080))
	s.writeFile("legacy.yaml", ingress("legacy", ingressOpts{class: "nginx", host: "legacy.test", paths: []path{prefix("/", "web")}}))
	s.writeFile("classless.yaml", ingress("classless", ingressOpts{host: "classless.test", paths: []path{prefix("/", "web")}}))
	s.writeFile("both.yaml", ingress("both", ingressOpts{class: "restysync", host: "both.test", paths: []path{prefix("/", "web")},
		legacyClass: "nginx"}))
	out := inspectText(t, "--source", "file:"+filepath.Clean(dir))
	// The folder's objects are in namespace default.
	for _, want := range []string{"Ingresses not served (2)", notServedNginx, notServedClassless, "Ingress apps/both: " + twoClassesWarning, "both.test"} {
		if want = strings.ReplaceAll(want, "apps/", "default/"); !strings.Contains(out, want) {
			t.Errorf("inspect --source file: lacks %q:\n%s", want, out)
		}
	}
	// With --watch-ingress-without-class, the class-less Ingress is served.
	out = inspectText(t, "--source", "file:"+dir, "--watch-ingress-without-class")
	if strings.Contains(out, "default/classless: not served") || !strings.Contains(out, "classless.test") {
		t.Errorf("inspect --watch-ingress-without-class does not serve the class-less Ingress:\n%s", out)
	}
}

// inspectText runs restysync inspect with args and returns its text output.
func inspectText(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(agentBinary, append([]string{"inspect"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("restysync inspect %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// classWarning says whether a Warning Event on the IngressClass name (in
// the default namespace, as for every cluster-scoped object) has a note
// holding fragment.
func (e *kubeEnv) classWarning(name, fragment string) error {
	list, err := e.admin.EventsV1().Events(metav1.NamespaceDefault).List(e.ctx(), metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, ev := range list.Items {
		if ev.Regarding.Kind == "IngressClass" && ev.Regarding.Name == name && ev.Type == corev1.EventTypeWarning &&
			strings.Contains(ev.Note, fragment) {
			return nil
		}
	}
	return errorf("no Warning holding %q on IngressClass %s among %d events", fragment, name, len(list.Items))
}
