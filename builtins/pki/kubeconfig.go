package pki

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"regexp"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/internal/textdiff"
)

// KubeConfig is the subset of client-go's kubeconfig (clientcmd/api/v1) that
// kubexm writes and reads: certificate authentication only. Field order is
// kubeadm's, so files look like the ones kubeadm makes.
type KubeConfig struct {
	APIVersion     string         `yaml:"apiVersion"`
	Clusters       []NamedCluster `yaml:"clusters"`
	Contexts       []NamedContext `yaml:"contexts"`
	CurrentContext string         `yaml:"current-context"`
	Kind           string         `yaml:"kind"`
	Preferences    struct{}       `yaml:"preferences"`
	Users          []NamedUser    `yaml:"users"`
}

// NamedCluster is one entry of clusters.
type NamedCluster struct {
	Cluster Cluster `yaml:"cluster"`
	Name    string  `yaml:"name"`
}

// Cluster is where the API server is and which CA signed its certificate.
type Cluster struct {
	CertificateAuthorityData string `yaml:"certificate-authority-data"`
	Server                   string `yaml:"server"`
}

// NamedContext is one entry of contexts.
type NamedContext struct {
	Context Context `yaml:"context"`
	Name    string  `yaml:"name"`
}

// Context ties a user to a cluster.
type Context struct {
	Cluster string `yaml:"cluster"`
	User    string `yaml:"user"`
}

// NamedUser is one entry of users.
type NamedUser struct {
	Name string `yaml:"name"`
	User User   `yaml:"user"`
}

// User holds the client certificate and key, base64 of their PEM.
type User struct {
	ClientCertificateData string `yaml:"client-certificate-data,omitempty"`
	ClientKeyData         string `yaml:"client-key-data,omitempty"`
}

// ParseKubeConfig reads a kubeconfig.
func ParseKubeConfig(data []byte) (*KubeConfig, error) {
	var kc KubeConfig
	if err := yaml.Unmarshal(data, &kc); err != nil {
		return nil, err
	}
	if kc.Kind != "Config" {
		return nil, fmt.Errorf("kind is %q, not Config", kc.Kind)
	}
	return &kc, nil
}

type kubeconfigBuiltin struct{}

func (kubeconfigBuiltin) Spec() step.Spec {
	return step.Spec{
		Name:    "kubeconfig",
		Summary: "Write a kubeconfig with an embedded CA and client certificate on the control machine",
		Doc: `Writes a kubeconfig (apiVersion v1, kind Config) with one cluster, one
user and one context, the current one. The CA certificate and the client
certificate and key are read from files on the control machine and
embedded base64, so the file stands alone and can be copied to any host.

The file is written atomically and only when its content or mode differs:
a second run with the same inputs reports unchanged. With --diff the change
is shown with the embedded data replaced by a short digest, so no key
material reaches the terminal or the logs. The client key must belong to the
client certificate; a client certificate that the CA did not sign is
written but reported in the message, since the API server would reject it.

Relative paths are taken from the cluster's work directory. Results: ` + "`path`" + `,
` + "`context`" + `.`,
		Control: true,
		Args: []step.Arg{
			{Name: "path", Type: step.String, Required: true, Aliases: []string{"dest"},
				Doc: "File to write on the control machine, e.g. kubeconfig/admin.conf."},
			{Name: "server", Type: step.String, Required: true,
				Doc: "API server URL, https://HOST:PORT."},
			{Name: "ca", Type: step.String, Required: true,
				Doc: "CA certificate (PEM) that signed the API server's certificate, or a bundle of CAs (during a CA rotation, ca_trust's NAME-bundle.crt): every certificate in it is embedded and trusted."},
			{Name: "cert", Type: step.String, Required: true,
				Doc: "Client certificate (PEM)."},
			{Name: "key", Type: step.String, Required: true,
				Doc: "Client private key (PEM)."},
			{Name: "cluster_name", Type: step.String, Default: "kubernetes",
				Doc: "Name of the cluster entry."},
			{Name: "user", Type: step.String, Default: "kubernetes-admin",
				Doc: "Name of the user entry."},
			{Name: "context", Type: step.String,
				Doc: "Name of the context; defaults to USER@CLUSTER_NAME as kubeadm names it."},
			{Name: "mode", Type: step.Mode, Default: "0600",
				Doc: "File mode; the file holds a private key."},
		},
		Examples: []string{
			`- name: admin kubeconfig
  kubeconfig:
    path: kubeconfig/admin.conf
    server: "https://{{ .control_plane_endpoint }}:6443"
    ca: certs/kubernetes/ca.crt
    cert: certs/kubernetes/admin.crt
    key: certs/kubernetes/admin.key`,
		},
	}
}

func (kubeconfigBuiltin) Run(_ context.Context, env *step.Env, args step.Args) (step.Result, error) {
	path := controlPath(env, args.String("path"))
	if path == "" {
		return step.Result{}, errors.New("path is required")
	}
	server := args.String("server")
	u, err := url.Parse(server)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return step.Result{}, fmt.Errorf("server %q is not a URL such as https://10.0.0.10:6443", server)
	}
	caPEM, caCert, err := readCertFile(controlPath(env, args.String("ca")), "ca")
	if err != nil {
		return step.Result{}, err
	}
	// A trust bundle (two CAs during a rotation) verifies with any of them.
	roots, err := ParseCerts(caPEM)
	if err != nil {
		return step.Result{}, fmt.Errorf("ca: %w", err)
	}
	certPEM, clientCert, err := readCertFile(controlPath(env, args.String("cert")), "cert")
	if err != nil {
		return step.Result{}, err
	}
	keyPath := controlPath(env, args.String("key"))
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return step.Result{}, fmt.Errorf("key: %w", err)
	}
	key, err := ParseKey(keyPEM)
	if err != nil {
		return step.Result{}, fmt.Errorf("key %s: %w", keyPath, err)
	}
	if !publicKeysEqual(clientCert.PublicKey, key.Public()) {
		return step.Result{}, fmt.Errorf("key %s does not belong to certificate %s", keyPath, args.String("cert"))
	}

	cluster, user := args.String("cluster_name"), args.String("user")
	ctxName := cmp.Or(args.String("context"), user+"@"+cluster)
	mode := args.Mode("mode")
	kc := KubeConfig{
		APIVersion:     "v1",
		Kind:           "Config",
		Clusters:       []NamedCluster{{Name: cluster, Cluster: Cluster{Server: server, CertificateAuthorityData: base64.StdEncoding.EncodeToString(caPEM)}}},
		Contexts:       []NamedContext{{Name: ctxName, Context: Context{Cluster: cluster, User: user}}},
		CurrentContext: ctxName,
		Users: []NamedUser{{Name: user, User: User{
			ClientCertificateData: base64.StdEncoding.EncodeToString(certPEM),
			ClientKeyData:         base64.StdEncoding.EncodeToString(keyPEM),
		}}},
	}
	content, err := yaml.Marshal(kc)
	if err != nil {
		return step.Result{}, fmt.Errorf("encode kubeconfig: %w", err)
	}

	data := map[string]any{"path": path, "context": ctxName}
	var warn string
	if _, err := clientCert.Verify(x509.VerifyOptions{Roots: certPoolOf(roots...), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		warn = fmt.Sprintf("; warning: client certificate %q does not verify against CA %q (%v)", clientCert.Subject.CommonName, caCert.Subject.CommonName, err)
	}
	old, err := readOptional(path)
	if err != nil {
		return step.Result{}, err
	}
	var oldMode fs.FileMode
	if old != nil {
		fi, err := os.Stat(path)
		if err != nil {
			return step.Result{}, err
		}
		oldMode = fi.Mode().Perm()
	}
	if old != nil && bytes.Equal(old, content) && oldMode == mode {
		return step.Result{Msg: path + " is up to date" + warn, Data: data}, nil
	}
	res := step.Result{Changed: true, Data: data}
	if env.Diff {
		res.Diff = textdiff.Unified(path, maskSecrets(old), maskSecrets(content), old != nil)
	}
	what := "write"
	switch {
	case old == nil:
	case bytes.Equal(old, content):
		what = fmt.Sprintf("change mode %04o -> %04o of", oldMode, mode)
	default:
		what = "update"
	}
	if env.Check {
		res.Msg = "would " + what + " " + path + warn
		return res, nil
	}
	if err := writeAtomic(path, content, mode); err != nil {
		return step.Result{}, fmt.Errorf("write kubeconfig: %w", err)
	}
	res.Msg = pastTense(what) + " " + path + warn
	return res, nil
}

func pastTense(what string) string {
	switch what {
	case "write":
		return "wrote"
	case "update":
		return "updated"
	}
	return strings.Replace(what, "change", "changed", 1)
}

func certPoolOf(certs ...*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return p
}

// readCertFile reads and parses a PEM certificate file named by argument arg.
func readCertFile(path, arg string) ([]byte, *x509.Certificate, error) {
	if path == "" {
		return nil, nil, fmt.Errorf("%s is required", arg)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", arg, err)
	}
	c, err := ParseCert(b)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w", arg, path, err)
	}
	return b, c, nil
}

// secretLine matches the kubeconfig fields that carry embedded material.
var secretLine = regexp.MustCompile(`^(\s*-?\s*(?:client-key-data|client-certificate-data|certificate-authority-data|token|password):\s*)(\S.*)$`)

// maskSecrets replaces embedded keys, certificates and tokens by a digest,
// so a diff shows that they changed without showing them.
func maskSecrets(b []byte) []byte {
	if b == nil {
		return nil
	}
	lines := strings.SplitAfter(string(b), "\n")
	for i, l := range lines {
		nl := strings.HasSuffix(l, "\n")
		m := secretLine.FindStringSubmatch(strings.TrimSuffix(l, "\n"))
		if m == nil {
			continue
		}
		sum := sha256.Sum256([]byte(m[2]))
		lines[i] = fmt.Sprintf("%s<%d bytes, sha256 %s>", m[1], len(m[2]), hex.EncodeToString(sum[:6]))
		if nl {
			lines[i] += "\n"
		}
	}
	return []byte(strings.Join(lines, ""))
}
