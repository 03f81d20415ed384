package luaapi

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// EnsureSecret writes a private secret once and keeps a valid one (a
// running master holds it); a file that is no secret is replaced.
func TestEnsureSecret(t *testing.T) {
	dir := t.TempDir()
	first, created, err := EnsureSecret(dir)
	if err != nil || !created || !validSecret(first) {
		t.Fatalf("first: %q, created %v, %v", first, created, err)
	}
	path := filepath.Join(dir, SecretName)
	assertPrivate(t, path)

	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	again, created, err := EnsureSecret(dir)
	if err != nil || created || again != first {
		t.Fatalf("again: %q, created %v, %v; want the first kept", again, created, err)
	}
	assertPrivate(t, path)

	for _, content := range []string{"", "short", first + "0", "ABCDEF" + first[6:]} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadSecret(dir); err == nil {
			t.Errorf("ReadSecret took %q", content)
		}
		s, created, err := EnsureSecret(dir)
		if err != nil || !created || !validSecret(s) || s == first {
			t.Errorf("over %q: %q, created %v, %v; want a new secret", content, s, created, err)
		}
		assertPrivate(t, path)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("files left in the dir: %v", entries)
	}
}

func assertPrivate(t *testing.T, path string) {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode() != fs.FileMode(0o600) {
		t.Errorf("%s has mode %v, want 0600", path, info.Mode())
	}
}

// WithSecret sends the secret once the file is there, and none before.
func TestWithSecret(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get(SecretHeader))
	}))
	defer srv.Close()
	dir := t.TempDir()
	client := &http.Client{Transport: WithSecret(http.DefaultTransport, dir)}
	get := func() {
		resp, err := client.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	get()
	secret, _, err := EnsureSecret(dir)
	if err != nil {
		t.Fatal(err)
	}
	get()
	if len(got) != 2 || got[0] != "" || got[1] != secret {
		t.Errorf("sent %q, want none, then the secret", got)
	}
}
