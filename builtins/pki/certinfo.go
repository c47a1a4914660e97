package pki

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/mensylisir/kubexm/engine/step"
)

type certInfo struct{}

func (certInfo) Spec() step.Spec {
	return step.Spec{
		Name:    "cert_info",
		Summary: "Read certificates on a host or on the control machine and report subject, SANs and expiry",
		Doc: `Reads PEM certificates and reports on them; it never changes anything.
A file holding a chain is described by its first certificate. A kubeconfig
is described by the client certificate of its current context, so admin.conf
and the other kubeconfigs can be checked like certificates. A PEM public
key (the service-account sa.pub) has no expiry: it is reported with its key
type and SHA-256 fingerprint, so a check can list every key pair too.

Files are read on the task's host (with become when the task has it), or
on the control machine with ` + "`local: true`" + ` (relative paths then start
at the cluster's work directory).

Results for one ` + "`path`" + `: ` + "`path`, `exists`, `kind` (`certificate`, `kubeconfig` or `public-key`), `subject`, `common_name`, `organization` (list), `sans` (map of `dns` and `ips` lists), `issuer`, `not_before` and `not_after` (RFC3339), `days_left` (whole days, counted towards zero: negative once expired by a day), `expired`, `is_ca`, `serial` (hex), `subject_key_id` and `authority_key_id` (hex; which CA signed a certificate, where two CAs share a name during a rotation), `fingerprint` (hex SHA-256 of the certificate's DER form) and `fingerprints` (those of every certificate in the file, for a trust bundle); for a public key `key_type`, `fingerprint` and `fingerprints` instead of the certificate fields" + `.
With ` + "`paths`" + ` the same maps are returned in the list ` + "`certs`" + `, in order.
With ` + "`renew_before`" + ` each certificate also reports ` + "`due`" + ` (it expires within
that time, or has expired), and the task ` + "`due`" + ` (any of them is): the test a
renewal timer makes before it renews anything. A missing file is not due.`,
		Args: []step.Arg{
			{Name: "path", Type: step.String,
				Doc: "The certificate (or kubeconfig) to read. Give `path` or `paths`."},
			{Name: "paths", Type: step.List,
				Doc: "Several files to read; results in `certs`."},
			{Name: "local", Type: step.Bool, Default: false,
				Doc: "Read on the control machine instead of the host."},
			{Name: "missing_ok", Type: step.Bool, Default: false,
				Doc: "A missing file is reported with `exists: false` instead of failing the task."},
			{Name: "renew_before", Type: step.Any,
				Doc: "A lifetime as gen_cert takes it (`30d`, `720h`, `1y`): report `due` for what expires within it."},
		},
		Examples: []string{
			`- name: apiserver certificate expiry
  cert_info:
    path: /etc/kubernetes/pki/apiserver.crt
  register: apiserver_cert`,
			`- name: all etcd certificates
  cert_info:
    paths: ["/etc/ssl/etcd/ssl/ca.crt", "/etc/ssl/etcd/ssl/admin.crt"]
    missing_ok: true
  register: etcd_certs`,
			`- name: what expires within 30 days
  cert_info:
    paths: ["/etc/kubernetes/pki/apiserver.crt", "/etc/kubernetes/admin.conf"]
    renew_before: 30d
  register: expiring
- name: renew
  command:
    argv: [kubeadm, certs, renew, all]
  when: expiring.due`,
		},
	}
}

func (certInfo) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	single := args.String("path")
	many := args.Strings("paths")
	switch {
	case single != "" && len(many) > 0:
		return step.Result{}, errors.New("give path or paths, not both")
	case single == "" && len(many) == 0:
		return step.Result{}, errors.New("path (or paths) is required")
	case single != "":
		many = []string{single}
	}
	local := args.Bool("local")
	missingOK := args.Bool("missing_ok")
	var within time.Duration
	checkDue := args["renew_before"] != nil
	if checkDue {
		var err error
		if within, err = ParseValidity(args["renew_before"]); err != nil {
			return step.Result{}, fmt.Errorf("renew_before: %w", err)
		}
		if within < 0 {
			return step.Result{}, fmt.Errorf("renew_before must not be negative, got %v", args["renew_before"])
		}
	}
	anyDue := false
	now := time.Now()
	certs := make([]any, 0, len(many))
	for _, p := range many {
		data, exists, where, err := readForInfo(ctx, env, p, local)
		if err != nil {
			return step.Result{}, err
		}
		if !exists {
			if !missingOK {
				return step.Result{}, fmt.Errorf("%s does not exist on %s (set missing_ok: true to report it instead)", where, hostName(env, local))
			}
			certs = append(certs, map[string]any{"path": where, "exists": false})
			continue
		}
		var info map[string]any
		if bytes.Contains(data, []byte("-----BEGIN PUBLIC KEY-----")) {
			if info, err = describePublicKey(data); err != nil {
				return step.Result{}, fmt.Errorf("%s on %s: %w", where, hostName(env, local), err)
			}
		} else {
			cert, err := certOfFile(data)
			if err != nil {
				return step.Result{}, fmt.Errorf("%s on %s: %w", where, hostName(env, local), err)
			}
			info = Describe(cert, now)
			if checkDue {
				due := !now.Add(within).Before(cert.NotAfter)
				info["due"] = due
				anyDue = anyDue || due
			}
			info["kind"] = "certificate"
			info["fingerprints"] = []any{info["fingerprint"]}
			if !bytes.Contains(data, []byte("-----BEGIN CERTIFICATE-----")) {
				info["kind"] = "kubeconfig"
			} else {
				info["fingerprints"] = bundleFingerprints(data)
			}
		}
		info["path"] = where
		info["exists"] = true
		certs = append(certs, info)
	}
	if single != "" {
		data := certs[0].(map[string]any)
		if checkDue {
			data["due"] = anyDue
		}
		return step.Result{Data: data}, nil
	}
	data := map[string]any{"certs": certs}
	if checkDue {
		data["due"] = anyDue
	}
	return step.Result{Data: data}, nil
}

func hostName(env *step.Env, local bool) string {
	switch {
	case local && env.Control != nil:
		return env.Control.Host()
	case local:
		return "the control machine"
	case env.Target != nil:
		return env.Target.Host()
	}
	return env.Host
}

// readForInfo returns a file's content from the host or the control machine,
// and the path as resolved.
func readForInfo(ctx context.Context, env *step.Env, p string, local bool) ([]byte, bool, string, error) {
	if local {
		p = controlPath(env, p)
		b, err := readOptional(p)
		if err != nil {
			return nil, false, p, err
		}
		return b, b != nil, p, nil
	}
	if !filepath.IsAbs(p) {
		return nil, false, p, fmt.Errorf("path %q on host %s must be absolute (or set local: true)", p, env.Host)
	}
	if env.Target == nil {
		return nil, false, p, fmt.Errorf("host %s has no connection to read %s", env.Host, p)
	}
	fi, err := env.Target.Stat(ctx, p, env.Become)
	if err != nil {
		return nil, false, p, err
	}
	if !fi.Exists {
		return nil, false, p, nil
	}
	if fi.IsDir {
		return nil, false, p, fmt.Errorf("%s on %s is a directory, not a certificate", p, env.Target.Host())
	}
	var buf bytes.Buffer
	if err := env.Target.Get(ctx, p, &buf, env.Become); err != nil {
		return nil, false, p, err
	}
	return buf.Bytes(), true, p, nil
}

// certOfFile finds the certificate in a PEM file or a kubeconfig.
func certOfFile(data []byte) (*x509.Certificate, error) {
	if cert, err := ParseCert(data); err == nil {
		return cert, nil
	} else if bytes.Contains(data, []byte("-----BEGIN CERTIFICATE-----")) {
		return nil, err
	}
	kc, err := ParseKubeConfig(data)
	if err != nil {
		return nil, errors.New("neither a PEM certificate nor a kubeconfig")
	}
	user := ""
	for _, c := range kc.Contexts {
		if c.Name == kc.CurrentContext {
			user = c.Context.User
		}
	}
	for _, u := range kc.Users {
		if u.Name != user || u.User.ClientCertificateData == "" {
			continue
		}
		pemData, err := base64.StdEncoding.DecodeString(u.User.ClientCertificateData)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig user %q: client-certificate-data: %w", user, err)
		}
		cert, err := ParseCert(pemData)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig user %q: %w", user, err)
		}
		return cert, nil
	}
	return nil, fmt.Errorf("kubeconfig: the user %q of current context %q has no client-certificate-data", user, kc.CurrentContext)
}

// describePublicKey reports a PEM public key: it has no subject or expiry,
// only its type and the SHA-256 fingerprint of its DER form (what two copies
// of one key pair share).
func describePublicKey(data []byte) (map[string]any, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PUBLIC KEY" {
		return nil, errors.New("no PEM PUBLIC KEY block")
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	sum := sha256.Sum256(block.Bytes)
	fp := hex.EncodeToString(sum[:])
	return map[string]any{
		"kind":         "public-key",
		"key_type":     orUnknown(string(KeyTypeOf(pub))),
		"fingerprint":  fp,
		"fingerprints": []any{fp},
	}, nil
}

// bundleFingerprints lists the fingerprint of every certificate in a PEM
// file, in order: a trust bundle holds two CAs during a rotation, and "do
// these two files trust a common CA" is a question about all of them.
func bundleFingerprints(data []byte) []any {
	var fps []any
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return fps
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil {
			fps = append(fps, CertFingerprint(c))
		}
	}
}

// Describe returns what cert_info reports about a certificate at time now.
// CertFingerprint is the SHA-256 fingerprint of a certificate's DER form, as
// `openssl x509 -fingerprint -sha256` prints it (without the colons).
func CertFingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}

func Describe(c *x509.Certificate, now time.Time) map[string]any {
	dns := make([]any, len(c.DNSNames))
	for i, d := range c.DNSNames {
		dns[i] = d
	}
	ips := make([]any, len(c.IPAddresses))
	for i, ip := range c.IPAddresses {
		ips[i] = ip.String()
	}
	org := make([]any, len(c.Subject.Organization))
	for i, o := range c.Subject.Organization {
		org[i] = o
	}
	return map[string]any{
		"subject":          c.Subject.String(),
		"common_name":      c.Subject.CommonName,
		"organization":     org,
		"sans":             map[string]any{"dns": dns, "ips": ips},
		"issuer":           c.Issuer.String(),
		"not_before":       c.NotBefore.UTC().Format(time.RFC3339),
		"not_after":        c.NotAfter.UTC().Format(time.RFC3339),
		"days_left":        int(c.NotAfter.Sub(now) / day),
		"expired":          !now.Before(c.NotAfter),
		"is_ca":            c.IsCA,
		"serial":           serialHex(c),
		"subject_key_id":   hex.EncodeToString(c.SubjectKeyId),
		"authority_key_id": hex.EncodeToString(c.AuthorityKeyId),
		"fingerprint":      CertFingerprint(c),
	}
}
