package imagepush

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Auth is how to reach and log in to a registry (registry.auths.<host>).
type Auth struct {
	Username, Password string
	// CertsDir holds the registry's CA (*.crt) and a client certificate
	// (*.cert with the *.key of the same name), as docker's and
	// containerd's certs.d directories do.
	CertsDir string
	// CAFile is one more CA (PEM), e.g. the cluster CA of the registry
	// kubexm deploys.
	CAFile        string
	SkipTLSVerify bool
	PlainHTTP     bool
}

// errPlainHTTP is a plain-HTTP request to a registry not marked plainHTTP:
// go-containerregistry falls back to http for loopback and private
// addresses, which would send the password in clear.
var errPlainHTTP = errors.New("refusing plain HTTP to a registry not marked plainHTTP")

type httpsOnly struct {
	inner     http.RoundTripper
	plainHTTP bool
}

func (h httpsOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" && !h.plainHTTP {
		return nil, errPlainHTTP
	}
	return h.inner.RoundTrip(req)
}

func (a Auth) transport() (http.RoundTripper, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: a.SkipTLSVerify} //nolint:gosec // only when the user sets skipTLSVerify
	if a.CertsDir != "" {
		pool, certs, err := LoadCertsDir(a.CertsDir)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
		cfg.Certificates = certs
	}
	if a.CAFile != "" {
		data, err := os.ReadFile(a.CAFile)
		if err != nil {
			return nil, fmt.Errorf("CA: %w", err)
		}
		if cfg.RootCAs == nil {
			if cfg.RootCAs, err = x509.SystemCertPool(); err != nil || cfg.RootCAs == nil {
				cfg.RootCAs = x509.NewCertPool()
			}
		}
		if !cfg.RootCAs.AppendCertsFromPEM(data) {
			return nil, fmt.Errorf("CA: %s holds no PEM certificate", a.CAFile)
		}
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = cfg
	t.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	t.ResponseHeaderTimeout = 2 * time.Minute
	return httpsOnly{inner: t, plainHTTP: a.PlainHTTP}, nil
}

// LoadCertsDir reads a certs.d directory: every *.crt is a CA added to
// the system's, every *.cert a client certificate whose key is the *.key
// of the same name.
func LoadCertsDir(dir string) (*x509.CertPool, []tls.Certificate, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("certsPath: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	var certs []tls.Certificate
	cas := 0
	for _, n := range names {
		p := filepath.Join(dir, n)
		switch filepath.Ext(n) {
		case ".crt":
			data, err := os.ReadFile(p)
			if err != nil {
				return nil, nil, fmt.Errorf("certsPath: %w", err)
			}
			if !pool.AppendCertsFromPEM(data) {
				return nil, nil, fmt.Errorf("certsPath: %s holds no PEM certificate", p)
			}
			cas++
		case ".cert":
			key := strings.TrimSuffix(p, ".cert") + ".key"
			c, err := tls.LoadX509KeyPair(p, key)
			if err != nil {
				return nil, nil, fmt.Errorf("certsPath: client certificate %s with key %s: %w", p, key, err)
			}
			certs = append(certs, c)
		}
	}
	if cas == 0 && len(certs) == 0 {
		return nil, nil, fmt.Errorf("certsPath: %s has no *.crt (CA) nor *.cert/*.key (client certificate)", dir)
	}
	return pool, certs, nil
}

func transportFor(ctx context.Context, c *client, repo name.Repository) (http.RoundTripper, error) {
	return transport.NewWithContext(ctx, c.reg, c.auth, c.base, []string{repo.Scope(transport.PushScope)})
}

type statusError struct{ code int }

func (e *statusError) Error() string {
	return fmt.Sprintf("HTTP %d %s", e.code, http.StatusText(e.code))
}

func httpStatus(err error) int {
	var te *transport.Error
	if errors.As(err, &te) {
		return te.StatusCode
	}
	var se *statusError
	if errors.As(err, &se) {
		return se.code
	}
	return 0
}

// Error is a push or login that failed, naming the registry, the image
// (when one was being pushed) and what to do.
type Error struct {
	Registry, Image, Hint string
	Err                   error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("registry " + e.Registry)
	if e.Image != "" {
		b.WriteString(": image " + e.Image)
	}
	b.WriteString(": " + e.Err.Error())
	if e.Hint != "" {
		b.WriteString(" (hint: " + e.Hint + ")")
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

func (c *client) explain(image string, err error) error {
	host := c.reg.RegistryStr()
	auths := fmt.Sprintf("registry.auths[%q]", host)
	var hint string
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var certErr *tls.CertificateVerificationError
	var dnsErr *net.DNSError
	var opErr *net.OpError
	msg := err.Error()
	code := httpStatus(err)
	switch {
	case errors.Is(err, context.Canceled):
		return err
	case code == http.StatusUnauthorized:
		hint = "the username or password is wrong: check " + auths + " (username, password or passwordFile)"
	case code == http.StatusForbidden:
		hint = "the account may not push here: give it push rights on the project (Harbor: a robot account with push permission)"
	case code == http.StatusInsufficientStorage || strings.Contains(msg, "no space left on device") || errors.Is(err, syscall.ENOSPC):
		hint = "the registry's disk is full: free space in its storage (registry.registryDataDir) and push again"
	case errors.As(err, &hostErr):
		hint = "the registry's certificate does not name " + c.reg.RegistryStr() + ": use a name its certificate holds in privateRegistry"
	case errors.As(err, &unknownCA) || errors.As(err, &certErr) || strings.Contains(msg, "x509:") || strings.Contains(msg, "certificate signed by unknown authority"):
		hint = "the registry's certificate is not signed by a CA this machine trusts: put the registry's CA as ca.crt in " + auths + ".certsPath (or set skipTLSVerify)"
	case errors.As(err, &dnsErr):
		hint = "the registry's name does not resolve on this machine: check registry.privateRegistry"
	case errors.As(err, &opErr) || errors.Is(err, syscall.ECONNREFUSED) || strings.Contains(msg, "connection refused") || strings.Contains(msg, "i/o timeout"):
		hint = "the registry is unreachable: check registry.privateRegistry's host and port and that the registry runs"
	case errors.Is(err, errPlainHTTP) || strings.Contains(msg, "server gave HTTP response to HTTPS client"):
		hint = "the registry speaks plain HTTP: set " + auths + ".plainHTTP: true if that is meant"
	case code >= 500:
		hint = "the registry failed: read its log"
	}
	return &Error{Registry: host, Image: image, Hint: hint, Err: err}
}
