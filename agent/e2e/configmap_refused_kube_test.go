//go:build linux

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// With the kube source, what the agent isolates is a Warning Event on the
// object to blame: on the Ingress render refuses (the e2e render hook), and
// on the agent's ConfigMap when nginx refuses it.
func TestRefusedEventsKube(t *testing.T) {
	const refused = "evil.b.test"
	t.Setenv(renderRefusesHost, refused)
	e := startKubeEnv(t)
	e.create(ingressClass("restysync", controllerRef))
	configMaps := e.admin.CoreV1().ConfigMaps(agentNS)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "restysync", Namespace: agentNS},
		Data: map[string]string{"enable-access-log": "true", "access-log-path": "logs/access.log"}}
	if _, err := configMaps.Create(e.ctx(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s := &stack{t: t}
	s.start("--source", "kube", "--kubeconfig", e.kubeconfig, "--namespace", appsNS, "--configmap", agentNS+"/restysync")

	e.create(kubeIngress(appsNS, "b", "restysync", refused, map[string]string{"/": "b"}))
	s.eventually("a Warning Event on the Ingress render refuses", func() error {
		return e.warningOn("b", "quarantined: the agent cannot render nginx.conf")
	})

	if err := os.Mkdir(filepath.Join(s.shared, "logs", "blocked"), 0o755); err != nil {
		t.Fatal(err)
	}
	cm.Data["access-log-path"] = "logs/blocked"
	if _, err := configMaps.Update(e.ctx(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.eventually("a Warning Event on the ConfigMap nginx refuses", func() error {
		list, err := e.admin.EventsV1().Events(agentNS).List(e.ctx(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, ev := range list.Items {
			if ev.Regarding.Kind == "ConfigMap" && ev.Regarding.Name == "restysync" && ev.Type == corev1.EventTypeWarning &&
				strings.Contains(ev.Note, "nginx rejected the config") && strings.Contains(ev.Note, "Is a directory") {
				return nil
			}
		}
		return fmt.Errorf("no Warning on ConfigMap %s/restysync among %d events", agentNS, len(list.Items))
	})
	if err := s.expectAdmin("/readyz", 503); err != nil {
		t.Error(err)
	}
	if q := s.debugState().Quarantined; len(q) != 1 || q[0] != appsNS+"/b" {
		t.Errorf("quarantined %v, want only %s/b", q, appsNS)
	}
}
