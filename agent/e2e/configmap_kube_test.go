//go:build linux

package e2e

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The kube source watches the agent's ConfigMap by name, as the
// least-privilege ServiceAccount of examples/kubernetes: creating, changing
// and deleting it changes nginx.conf.
func TestConfigMapKube(t *testing.T) {
	e := startKubeEnv(t)
	e.create(ingressClass("restysync", controllerRef))
	configMaps := e.admin.CoreV1().ConfigMaps(agentNS)

	s := &stack{t: t}
	s.start("--source", "kube", "--kubeconfig", e.kubeconfig, "--namespace", appsNS,
		"--configmap", agentNS+"/restysync")
	server := func(want func(string) bool) func() error {
		return func() error {
			// No Ingress: the default server answers 404, with the header.
			resp, _, err := s.request("GET", "any.test", "/", nil, nil)
			if err != nil {
				return err
			}
			if got := resp.Header.Get("Server"); !want(got) {
				return fmt.Errorf("Server %q", got)
			}
			return nil
		}
	}
	isBare := func(v string) bool { return v == "nginx" }
	s.eventually("no ConfigMap: no version", server(isBare))
	s.eventually("the missing ConfigMap is a Problem", func() error {
		if reason := s.problemOf("ConfigMap " + agentNS + "/restysync"); !strings.Contains(reason, "not found") {
			return fmt.Errorf("problem %q", reason)
		}
		return nil
	})

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "restysync", Namespace: agentNS},
		Data: map[string]string{"server-tokens": "true", "custom-http-errors": "404"}}
	if _, err := configMaps.Create(e.ctx(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.eventually("created: nginx shows its version", server(func(v string) bool { return strings.HasPrefix(v, "nginx/") }))

	cm.Data["server-tokens"] = "false"
	if _, err := configMaps.Update(e.ctx(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.eventually("updated: no version", server(isBare))
	if reason := s.problemOf("ConfigMap " + agentNS + "/restysync"); reason != "" {
		t.Errorf("problem %q with a good ConfigMap", reason)
	}

	// Another ConfigMap in the namespace is not the agent's.
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: agentNS},
		Data: map[string]string{"server-tokens": "true"}}
	if _, err := configMaps.Create(e.ctx(), other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm.Data["server-tokens"] = "true"
	if _, err := configMaps.Update(e.ctx(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.eventually("updated again: version", server(func(v string) bool { return strings.HasPrefix(v, "nginx/") }))
	if err := configMaps.Delete(e.ctx(), "restysync", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.eventually("deleted: the defaults again", server(isBare))
}
