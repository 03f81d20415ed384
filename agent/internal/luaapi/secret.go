package luaapi

// The config API answers only the agent: every request but GET and HEAD
// /status carries SecretHeader with the secret the agent keeps in
// SecretName in the shared dir (mode 0600). nginx's master reads that file
// once per start and HUP (lua/restysync/api.lua says why and how the API
// tells the agent from requests nginx itself sends). An agent restart keeps
// a valid file: the running master holds the secret it read and would
// refuse a new one until its next HUP.

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sync"
)

const (
	// SecretName is the file in the shared dir that holds the secret, as
	// 64 lowercase hex digits; lua/restysync/api.lua reads the same name.
	SecretName = "restysync.secret"
	// SecretHeader is the request header that carries it.
	SecretHeader = "X-Restysync-Secret"
)

// errNotSecret is a secret file that holds something else: EnsureSecret
// replaces it.
var errNotSecret = errors.New("not a config API secret (64 lowercase hex digits)")

// secretBytes is the size of a secret before hex encoding.
const secretBytes = 32

// validSecret says whether s is 64 lowercase hex digits.
func validSecret(s string) bool {
	if len(s) != 2*secretBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}

// ReadSecret returns the secret in dir, or an error if there is none or
// it is not one EnsureSecret writes.
func ReadSecret(dir string) (string, error) {
	path := filepath.Join(dir, SecretName)
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading the config API secret: %w", err)
	}
	if !validSecret(string(data)) {
		return "", fmt.Errorf("%s: %w", path, errNotSecret)
	}
	return string(data), nil
}

// EnsureSecret returns the secret in dir, first writing a new random one
// (mode 0600, atomically) when there is no valid one. A valid one is kept,
// its mode made 0600; created says whether it wrote one.
func EnsureSecret(dir string) (secret string, created bool, err error) {
	path := filepath.Join(dir, SecretName)
	if s, err := ReadSecret(dir); err == nil {
		if err := os.Chmod(path, 0o600); err != nil {
			return "", false, fmt.Errorf("making %s private: %w", path, err)
		}
		return s, false, nil
	} else if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, errNotSecret) {
		return "", false, err
	}
	raw := make([]byte, secretBytes)
	if _, err := rand.Read(raw); err != nil {
		return "", false, fmt.Errorf("making the config API secret: %w", err)
	}
	secret = hex.EncodeToString(raw)
	tmp, err := os.CreateTemp(dir, "."+SecretName+".tmp*") // mode 0600
	if err != nil {
		return "", false, fmt.Errorf("writing the config API secret: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.WriteString(secret); err != nil {
		tmp.Close()
		return "", false, fmt.Errorf("writing the config API secret: %w", err)
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return "", false, fmt.Errorf("writing the config API secret: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", false, fmt.Errorf("writing the config API secret: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", false, fmt.Errorf("writing the config API secret: %w", err)
	}
	return secret, true, nil
}

// WithSecret returns a RoundTripper that sends the secret in dir (the
// shared dir) in SecretHeader on every request through next. It reads the
// file at the first request that finds it there and keeps what it read;
// until then requests go without (GET /status still answers).
func WithSecret(next http.RoundTripper, dir string) http.RoundTripper {
	return &secretTransport{next: next, dir: dir}
}

type secretTransport struct {
	next http.RoundTripper
	dir  string

	mu     sync.Mutex
	secret string
}

func (t *secretTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.mu.Lock()
	if t.secret == "" {
		t.secret, _ = ReadSecret(t.dir)
	}
	secret := t.secret
	t.mu.Unlock()
	if secret == "" {
		return t.next.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	req.Header.Set(SecretHeader, secret)
	return t.next.RoundTrip(req)
}
