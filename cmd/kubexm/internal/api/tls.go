package api

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/mensylisir/kubexm/builtins/pki"
)

// SelfSigned returns the certificate in dir (cert.pem, key.pem), making a
// self-signed one for hosts when there is none: kept, so that clients that
// pinned it (kubexm get --ca dir/cert.pem) go on trusting the server.
func SelfSigned(dir string, hosts []string) (tls.Certificate, string, error) {
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if _, err := os.Stat(certFile); errors.Is(err, os.ErrNotExist) {
		if err := writeSelfSigned(certFile, keyFile, hosts); err != nil {
			return tls.Certificate{}, "", err
		}
	}
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return c, "", fmt.Errorf("TLS certificate: %w", err)
	}
	sum := sha256.Sum256(c.Certificate[0])
	return c, hex.EncodeToString(sum[:]), nil
}

// writeSelfSigned issues the certificate with the PKI code the cluster
// certificates use (a self-signed CA certificate that is also the server's).
func writeSelfSigned(certFile, keyFile string, hosts []string) error {
	var entries []string
	for _, h := range append(hosts, "localhost", "127.0.0.1", "::1") {
		if h != "" {
			entries = append(entries, h)
		}
	}
	sans, err := pki.ParseSANs(entries)
	if err != nil {
		return fmt.Errorf("--tls-host: %w", err)
	}
	key, err := pki.GenerateKey(pki.ECDSAP256)
	if err != nil {
		return err
	}
	_, der, err := pki.Issue(pki.Request{CommonName: "kubexm server", SANs: sans, IsCA: true, Validity: 3 * 365 * 24 * time.Hour}, key, nil, time.Now())
	if err != nil {
		return err
	}
	keyPEM, err := pki.EncodeKey(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(certFile), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return err
	}
	return os.WriteFile(certFile, pki.EncodeCert(der), 0o644)
}
