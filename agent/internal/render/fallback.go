package render

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// The default certificate nginx serves to clients without SNI or with a
// host that has no certificate, relative to the shared dir.
const (
	FallbackCertName = "tls/fallback.crt"
	FallbackKeyName  = "tls/fallback.key"
)

// fallbackValidity is how long the generated default certificate is valid.
const fallbackValidity = 10 * 365 * 24 * time.Hour

// WriteFallbackCertificate makes sure sharedDir holds the default
// certificate and key that nginx.conf names: a self-signed ECDSA P-256
// certificate for "restysync default certificate", generated when either
// file is missing. Existing files are kept, so a restart of the agent does
// not change what nginx serves. The key is 0600: only the nginx master
// reads it, as it loads the config. It returns whether it generated them.
func WriteFallbackCertificate(sharedDir string) (bool, error) {
	certPath := filepath.Join(sharedDir, FallbackCertName)
	keyPath := filepath.Join(sharedDir, FallbackKeyName)
	_, certErr := os.Stat(certPath)
	_, keyErr := os.Stat(keyPath)
	if certErr == nil && keyErr == nil {
		return false, nil
	}
	for _, err := range []error{certErr, keyErr} {
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("looking for the default certificate: %w", err)
		}
	}
	certPEM, keyPEM, err := newFallbackCertificate(time.Now())
	if err != nil {
		return false, err
	}
	if err := os.MkdirAll(filepath.Dir(certPath), 0o755); err != nil {
		return false, fmt.Errorf("creating the folder of the default certificate: %w", err)
	}
	// The key first: nginx never sees a new certificate beside an old key.
	if err := writeFileAtomic(keyPath, keyPEM, 0o600); err != nil {
		return false, fmt.Errorf("writing the default certificate key: %w", err)
	}
	if err := writeFileAtomic(certPath, certPEM, 0o644); err != nil {
		return false, fmt.Errorf("writing the default certificate: %w", err)
	}
	return true, nil
}

func newFallbackCertificate(now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating the default certificate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, fmt.Errorf("generating the default certificate serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "restysync default certificate", Organization: []string{"restysync"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(fallbackValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("signing the default certificate: %w", err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the default certificate key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}), nil
}

// writeFileAtomic writes data to a temp file in path's folder and renames
// it over path. (apply has the same helper; apply imports render.)
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
