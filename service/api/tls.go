package api

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
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
// certificates use: a leaf for hosts (serverAuth, no CA), signed by a CA
// made for it alone, whose key is never written: the CA signs nothing else,
// and the server's key cannot sign certificates. cert.pem holds the leaf and
// the CA (a client pinning it trusts the CA), ca.pem the CA.
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
	now := time.Now()
	validity := 3 * 365 * 24 * time.Hour
	caKey, err := pki.GenerateKey(pki.ECDSAP256)
	if err != nil {
		return err
	}
	caCert, caDER, err := pki.Issue(pki.Request{CommonName: "kubexm server CA", IsCA: true, Validity: validity + 24*time.Hour}, caKey, nil, now)
	if err != nil {
		return err
	}
	key, err := pki.GenerateKey(pki.ECDSAP256)
	if err != nil {
		return err
	}
	_, der, err := pki.Issue(pki.Request{CommonName: "kubexm server", SANs: sans, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, Validity: validity},
		key, &pki.Pair{Cert: caCert, Key: caKey}, now)
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
	caPEM := pki.EncodeCert(caDER)
	if err := os.WriteFile(filepath.Join(filepath.Dir(certFile), "ca.pem"), caPEM, 0o644); err != nil {
		return err
	}
	return os.WriteFile(certFile, append(pki.EncodeCert(der), caPEM...), 0o644)
}
