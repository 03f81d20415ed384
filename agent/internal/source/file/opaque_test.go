package file

import (
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// Opaque Secrets (the htpasswd of basic auth) are read, with stringData
// folded into data and no type meaning Opaque, as the API server has it.
func TestOpaqueSecrets(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "auth.yaml"), "apiVersion: v1\nkind: Secret\nmetadata:\n  name: users\n  namespace: web\n"+
		"type: Opaque\nstringData:\n  auth: \"alice:{PLAIN}secret\\n\"\n---\n"+
		"apiVersion: v1\nkind: Secret\nmetadata:\n  name: untyped\n  namespace: web\ndata:\n  auth: Ym9iOntQTEFJTn14Cg==\n")
	s := New(dir)
	s.readAll()
	s.publish()
	snap, problems := s.Snapshot()
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	got := map[string]*corev1.Secret{}
	for secret := range snap.Secrets.All() {
		got[secret.Namespace+"/"+secret.Name] = secret
	}
	if s := got["web/users"]; s == nil || string(s.Data["auth"]) != "alice:{PLAIN}secret\n" || s.StringData != nil {
		t.Errorf("web/users = %+v, want data.auth from stringData", s)
	}
	if s := got["web/untyped"]; s == nil || s.Type != corev1.SecretTypeOpaque || string(s.Data["auth"]) != "bob:{PLAIN}x\n" {
		t.Errorf("web/untyped = %+v, want an Opaque Secret with data.auth", s)
	}
}
