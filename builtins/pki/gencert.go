package pki

import (
	"context"
	"crypto"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mensylisir/kubexm/engine/step"
)

// Default lifetimes, as kubeadm uses them.
const (
	defaultCAValidity   = 10 * 365 * day
	defaultLeafValidity = 365 * day
)

type genCert struct{}

func (genCert) Spec() step.Spec {
	return step.Spec{
		Name:    "gen_cert",
		Summary: "Create or renew a CA, a CA-signed certificate, or a bare key pair on the control machine",
		Doc: `Makes X.509 certificates with Go's crypto/x509 on the control machine
(never openssl or cfssl) and keeps them: a run only reissues a certificate
that no longer fits.

An existing NAME.crt/NAME.key pair is kept when the key matches the
certificate, the key type is the wanted one, it is signed by the given CA
(self-signed for ` + "`ca: true`" + `), common name and organizations are the
wanted ones, its SANs include every wanted SAN (extra SANs are fine), its
usages include the wanted ones, and it does not expire within
` + "`renew_before`" + `, unless ` + "`force`" + ` asks for a renewal. Otherwise a new key and certificate are written and the
old files are kept as NAME.crt.<UTC timestamp>.bak and NAME.key.<...>.bak;
the task reports changed. Reissuing a CA makes every leaf signed by it
misfit, so the next gen_cert of each leaf reissues it too.

Relative paths are taken from the cluster's work directory
(.kubexm/<cluster>). Keys are written 0600, certificates and public keys
0644, directories 0755, each file atomically. In check mode nothing is
written and the message says what would be done and why.

Results: ` + "`cert`, `key` (and `pub` with `key_only`)" + ` are the file paths;
` + "`serial`, `not_after` (RFC3339) and `common_name`" + ` describe the certificate.`,
		Control: true,
		Args: []step.Arg{
			{Name: "path", Type: step.String, Required: true, Aliases: []string{"dir"},
				Doc: "Directory of the files, on the control machine; relative to the cluster work directory."},
			{Name: "name", Type: step.String, Required: true,
				Doc: "Base name: writes NAME.crt and NAME.key (NAME.key and NAME.pub with `key_only`)."},
			{Name: "ca", Type: step.Bool, Default: false,
				Doc: "Make a self-signed CA instead of a leaf signed by `ca_path`/`ca_name`."},
			{Name: "ca_path", Type: step.String,
				Doc: "Directory of the signing CA for a leaf; defaults to `path`."},
			{Name: "ca_name", Type: step.String, Default: "ca",
				Doc: "Base name of the signing CA: CA_NAME.crt and CA_NAME.key in `ca_path`."},
			{Name: "common_name", Type: step.String, Aliases: []string{"cn"},
				Doc: "Subject common name (CN). Required unless `key_only`."},
			{Name: "organization", Type: step.List, Aliases: []string{"organizations", "o"},
				Doc: "Subject organizations (O), e.g. [system:masters]. Order does not matter."},
			{Name: "sans", Type: step.List, Aliases: []string{"alt_names"},
				Doc: "Subject alternative names. Each entry that parses as an IP address becomes an IP SAN, anything else a DNS name (a leading `*.` wildcard is allowed); an entry may hold several names separated by commas."},
			{Name: "usages", Type: step.List, Aliases: []string{"usage"},
				Doc: "What a leaf is for: `server` (TLS server auth), `client` (client auth), `peer` (both). Required for a leaf."},
			{Name: "key_type", Type: step.String, Default: string(RSA2048), Choices: KeyTypes(),
				Doc: "Key algorithm. A change of key type reissues the pair."},
			{Name: "validity", Type: step.Any,
				Doc: "Lifetime of a new certificate: a Go duration (\"8760h\"), days (\"365d\") or years (\"10y\"). Defaults to 10y for a CA and 1y for a leaf."},
			{Name: "renew_before", Type: step.Any, Default: "30d",
				Doc: "Reissue a certificate that expires within this time; same forms as `validity`."},
			{Name: "force", Type: step.Bool, Default: false,
				Doc: "Reissue a leaf certificate even when it fits: a new key and certificate from the same CA, the old files kept as backups. For an explicit renewal (the certs-renew playbook); not allowed with `ca` or `key_only`, since a new CA or service-account key would invalidate everything signed or verified with the old one."},
			{Name: "key_only", Type: step.Bool, Default: false,
				Doc: "Make only a key pair, NAME.key and NAME.pub (PEM, PKIX), e.g. the service-account signing key. An existing key of the right type is kept."},
		},
		Examples: []string{
			`- name: etcd CA
  gen_cert:
    path: certs/etcd
    name: ca
    ca: true
    common_name: etcd-ca`,
			`- name: etcd member certificate for each etcd host
  gen_cert:
    path: certs/etcd
    name: "member-{{ .inventory_hostname }}"
    common_name: "{{ .inventory_hostname }}"
    usages: [peer]
    sans: ["{{ .inventory_hostname }}", "{{ .internal_address }}", localhost, 127.0.0.1]`,
			`- name: service-account signing key
  gen_cert:
    path: certs/kubernetes
    name: sa
    key_only: true`,
		},
	}
}

// certPlan is a gen_cert task after its arguments are checked.
type certPlan struct {
	dir, name         string
	certPath, keyPath string
	pubPath           string // key_only
	caCert, caKey     string // leaves
	keyOnly           bool
	keyType           KeyType
	req               Request
	renewBefore       time.Duration
	force             bool
	checkMode         bool
	displayName       string
}

func parseGenCert(env *step.Env, args step.Args) (*certPlan, error) {
	p := &certPlan{
		dir:       controlPath(env, args.String("path")),
		name:      args.String("name"),
		keyOnly:   args.Bool("key_only"),
		force:     args.Bool("force"),
		checkMode: env.Check,
	}
	if p.dir == "" {
		return nil, fmt.Errorf("path is required: the directory for %s.crt and %s.key", p.name, p.name)
	}
	if p.name == "" || strings.ContainsAny(p.name, `/\`) || p.name == "." || p.name == ".." {
		return nil, fmt.Errorf("name %q must be a plain file base name such as \"apiserver\"", p.name)
	}
	p.certPath = filepath.Join(p.dir, p.name+".crt")
	p.keyPath = filepath.Join(p.dir, p.name+".key")
	p.pubPath = filepath.Join(p.dir, p.name+".pub")
	p.displayName = filepath.Join(filepath.Base(p.dir), p.name)
	kt, err := ParseKeyType(args.String("key_type"))
	if err != nil {
		return nil, err
	}
	p.keyType = kt
	if p.force && (p.keyOnly || args.Bool("ca")) {
		return nil, fmt.Errorf("force reissues leaf certificates only, not %s: a new CA or signing key invalidates everything made with the old one", p.name)
	}
	if p.keyOnly {
		if args.Bool("ca") {
			return nil, fmt.Errorf("key_only and ca exclude each other: key_only makes no certificate")
		}
		return p, nil
	}

	p.req.IsCA = args.Bool("ca")
	p.req.CommonName = strings.TrimSpace(args.String("common_name"))
	if p.req.CommonName == "" {
		return nil, fmt.Errorf("common_name is required for certificate %s", p.name)
	}
	for _, o := range flatStrings(args.List("organization")) {
		if o = strings.TrimSpace(o); o != "" {
			p.req.Organization = append(p.req.Organization, o)
		}
	}
	if p.req.SANs, err = ParseSANs(flatStrings(args.List("sans"))); err != nil {
		return nil, fmt.Errorf("sans: %w", err)
	}
	if p.req.ExtKeyUsage, err = ParseUsages(flatStrings(args.List("usages"))); err != nil {
		return nil, fmt.Errorf("usages: %w", err)
	}
	if p.req.IsCA && len(p.req.ExtKeyUsage) > 0 {
		return nil, fmt.Errorf("usages apply to leaf certificates, not to the CA %s", p.name)
	}
	if !p.req.IsCA && len(p.req.ExtKeyUsage) == 0 {
		return nil, fmt.Errorf("usages is required for leaf certificate %s: server, client or peer", p.name)
	}

	p.req.Validity = defaultLeafValidity
	if p.req.IsCA {
		p.req.Validity = defaultCAValidity
	}
	if args.Has("validity") {
		d, err := ParseValidity(args["validity"])
		if err != nil {
			return nil, fmt.Errorf("validity: %w", err)
		}
		if d <= 0 {
			return nil, fmt.Errorf("validity must be positive, got %v", args["validity"])
		}
		p.req.Validity = d
	}
	if p.renewBefore, err = ParseValidity(args["renew_before"]); err != nil {
		return nil, fmt.Errorf("renew_before: %w", err)
	}
	if p.renewBefore < 0 {
		return nil, fmt.Errorf("renew_before must not be negative, got %v", args["renew_before"])
	}
	if p.renewBefore >= p.req.Validity {
		return nil, fmt.Errorf("renew_before (%s) must be shorter than validity (%s), or every run would reissue %s",
			formatDuration(p.renewBefore), formatDuration(p.req.Validity), p.name)
	}

	if !p.req.IsCA {
		caDir := args.String("ca_path")
		if caDir == "" {
			caDir = p.dir
		} else {
			caDir = controlPath(env, caDir)
		}
		caName := args.String("ca_name")
		p.caCert = filepath.Join(caDir, caName+".crt")
		p.caKey = filepath.Join(caDir, caName+".key")
		if p.caCert == p.certPath {
			return nil, fmt.Errorf("leaf %s would overwrite its own CA %s; pick another name or set ca: true", p.name, p.caCert)
		}
	}
	return p, nil
}

// state is what is on disk now and whether it fits.
type state struct {
	misfit  string // "" when the files fit
	oldCert []byte // existing content, backed up before a reissue
	oldKey  []byte
	oldPub  []byte
	cert    *x509.Certificate // the fitting certificate
	key     crypto.Signer     // the fitting key (key_only), or the existing key
	ca      *Pair             // the signing CA of a leaf
}

// inspect reads the files and decides whether they fit the plan.
func (p *certPlan) inspect(now time.Time) (*state, error) {
	s := &state{}
	var err error
	if s.oldKey, err = readOptional(p.keyPath); err != nil {
		return nil, err
	}
	if s.oldKey != nil {
		if s.key, err = ParseKey(s.oldKey); err != nil {
			s.misfit = fmt.Sprintf("%s cannot be read (%v)", p.keyPath, err)
		}
	}
	if p.keyOnly {
		if s.oldPub, err = readOptional(p.pubPath); err != nil {
			return nil, err
		}
		switch {
		case s.oldKey == nil:
			s.misfit = "it does not exist"
		case s.misfit != "":
		case KeyTypeOf(s.key.Public()) != p.keyType:
			s.misfit = fmt.Sprintf("key type is %s, want %s", orUnknown(string(KeyTypeOf(s.key.Public()))), p.keyType)
		}
		return s, nil
	}

	if s.oldCert, err = readOptional(p.certPath); err != nil {
		return nil, err
	}
	if !p.req.IsCA {
		ca, err := loadCA(p.caCert, p.caKey)
		if err != nil {
			if p.checkMode && errors.Is(err, fs.ErrNotExist) {
				// An earlier task in this check run would have made the CA.
				s.misfit = fmt.Sprintf("its CA %s does not exist yet", p.caCert)
				return s, nil
			}
			return nil, err
		}
		s.ca = ca
	}
	switch {
	case s.oldCert == nil && s.oldKey == nil:
		s.misfit = "it does not exist"
	case s.oldCert == nil:
		s.misfit = p.certPath + " is missing"
	case s.oldKey == nil:
		s.misfit = p.keyPath + " is missing"
	case s.misfit != "":
	default:
		cert, err := ParseCert(s.oldCert)
		if err != nil {
			s.misfit = fmt.Sprintf("%s cannot be read (%v)", p.certPath, err)
			break
		}
		var caCert *x509.Certificate
		if s.ca != nil {
			caCert = s.ca.Cert
		}
		s.misfit = Misfit(cert, s.key, p.keyType, p.req, caCert, now, p.renewBefore)
		switch {
		case s.misfit == "" && p.force:
			s.misfit = "renewal forced (force: true)"
		case s.misfit == "":
			s.cert = cert
		}
	}
	return s, nil
}

// loadCA reads a signing CA; a missing file is returned as an os.ErrNotExist
// error.
func loadCA(certPath, keyPath string) (*Pair, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, fmt.Errorf("signing CA: %w (generate it first with gen_cert ca: true, or set ca_path/ca_name)", err)
	}
	cert, err := ParseCert(certPEM)
	if err != nil {
		return nil, fmt.Errorf("signing CA %s: %w", certPath, err)
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("signing CA %s is not a CA certificate (basic constraints CA:FALSE)", certPath)
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, fmt.Errorf("signing CA key: %w (a leaf can only be signed with the CA's private key)", err)
	}
	key, err := ParseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("signing CA key %s: %w", keyPath, err)
	}
	if !publicKeysEqual(cert.PublicKey, key.Public()) {
		return nil, fmt.Errorf("signing CA key %s does not belong to %s", keyPath, certPath)
	}
	return &Pair{Cert: cert, Key: key}, nil
}

func (g genCert) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	p, err := parseGenCert(env, args)
	if err != nil {
		return step.Result{}, err
	}
	now := time.Now()
	s, err := p.inspect(now)
	if err != nil {
		return step.Result{}, err
	}
	if s.misfit == "" {
		return p.keep(s)
	}
	if env.Check {
		return step.Result{Changed: true, Msg: p.verb(s, "would ") + ": " + s.misfit, Data: p.paths()}, nil
	}

	// Keys are made before taking the lock so that hosts generating their
	// own certificates in one directory do not wait for each other's RSA.
	key, err := GenerateKey(p.keyType)
	if err != nil {
		return step.Result{}, fmt.Errorf("generate %s key for %s: %w", p.keyType, p.name, err)
	}
	unlock, err := lockDir(ctx, p.dir)
	if err != nil {
		return step.Result{}, err
	}
	defer unlock()
	// Another host's run may have written the files meanwhile.
	if s, err = p.inspect(now); err != nil {
		return step.Result{}, err
	}
	if s.misfit == "" {
		return p.keep(s)
	}
	if p.keyOnly {
		return p.writeKeyPair(env, s, key, now)
	}
	return p.writeCert(env, s, key, now)
}

// verb says what happens to the files: issue or reissue.
func (p *certPlan) verb(s *state, prefix string) string {
	what := "certificate"
	if p.keyOnly {
		what = "key pair"
	}
	if s.oldCert == nil && s.oldKey == nil {
		return fmt.Sprintf("%screate %s %s", prefix, what, p.displayName)
	}
	return fmt.Sprintf("%sreissue %s %s", prefix, what, p.displayName)
}

func (p *certPlan) paths() map[string]any {
	if p.keyOnly {
		return map[string]any{"key": p.keyPath, "pub": p.pubPath}
	}
	return map[string]any{"cert": p.certPath, "key": p.keyPath}
}

func (p *certPlan) certData(cert *x509.Certificate) map[string]any {
	d := p.paths()
	d["serial"] = serialHex(cert)
	d["not_after"] = cert.NotAfter.UTC().Format(time.RFC3339)
	d["common_name"] = cert.Subject.CommonName
	return d
}

// keep reports fitting files. For a key pair the public half is still
// rewritten when it is missing or stale, since it is derived from the key.
func (p *certPlan) keep(s *state) (step.Result, error) {
	if !p.keyOnly {
		return step.Result{Msg: p.displayName + " fits", Data: p.certData(s.cert)}, nil
	}
	pub, err := EncodePublicKey(s.key.Public())
	if err != nil {
		return step.Result{}, err
	}
	if string(pub) == string(s.oldPub) {
		return step.Result{Msg: p.displayName + " key pair fits", Data: p.paths()}, nil
	}
	if p.checkMode {
		return step.Result{Changed: true, Msg: "would rewrite " + p.pubPath + " from " + p.keyPath, Data: p.paths()}, nil
	}
	if err := writeAtomic(p.pubPath, pub, modeCert); err != nil {
		return step.Result{}, fmt.Errorf("write public key: %w", err)
	}
	return step.Result{Changed: true, Msg: "rewrote " + p.pubPath + " from " + p.keyPath, Data: p.paths()}, nil
}

// backup copies the old files aside before they are replaced.
func (p *certPlan) backup(s *state, now time.Time) ([]string, error) {
	var kept []string
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{{p.certPath, s.oldCert, modeCert}, {p.keyPath, s.oldKey, modeKey}, {p.pubPath, s.oldPub, modeCert}} {
		if f.data == nil {
			continue
		}
		name := backupName(f.path, now)
		if err := writeAtomic(name, f.data, f.mode); err != nil {
			return nil, fmt.Errorf("back up %s: %w", f.path, err)
		}
		kept = append(kept, filepath.Base(name))
	}
	return kept, nil
}

func (p *certPlan) writeKeyPair(env *step.Env, s *state, key crypto.Signer, now time.Time) (step.Result, error) {
	keyPEM, err := EncodeKey(key)
	if err != nil {
		return step.Result{}, err
	}
	pubPEM, err := EncodePublicKey(key.Public())
	if err != nil {
		return step.Result{}, err
	}
	kept, err := p.backup(s, now)
	if err != nil {
		return step.Result{}, err
	}
	if err := writeAtomic(p.keyPath, keyPEM, modeKey); err != nil {
		return step.Result{}, fmt.Errorf("write key: %w", err)
	}
	if err := writeAtomic(p.pubPath, pubPEM, modeCert); err != nil {
		return step.Result{}, fmt.Errorf("write public key: %w", err)
	}
	logf(env, "gen_cert: wrote %s and %s", p.keyPath, p.pubPath)
	return step.Result{Changed: true, Msg: p.verb(s, "") + ": " + s.misfit + backupNote(kept), Data: p.paths()}, nil
}

func (p *certPlan) writeCert(env *step.Env, s *state, key crypto.Signer, now time.Time) (step.Result, error) {
	cert, der, err := Issue(p.req, key, s.ca, now)
	if err != nil {
		return step.Result{}, err
	}
	keyPEM, err := EncodeKey(key)
	if err != nil {
		return step.Result{}, err
	}
	kept, err := p.backup(s, now)
	if err != nil {
		return step.Result{}, err
	}
	// The key goes first: if the run stops between the two writes, the
	// mismatch is seen next time and the pair is reissued.
	if err := writeAtomic(p.keyPath, keyPEM, modeKey); err != nil {
		return step.Result{}, fmt.Errorf("write key: %w", err)
	}
	if err := writeAtomic(p.certPath, EncodeCert(der), modeCert); err != nil {
		return step.Result{}, fmt.Errorf("write certificate: %w", err)
	}
	logf(env, "gen_cert: wrote %s (serial %s, until %s)", p.certPath, serialHex(cert), cert.NotAfter.UTC().Format(time.RFC3339))
	return step.Result{Changed: true, Msg: p.verb(s, "") + ": " + s.misfit + backupNote(kept), Data: p.certData(cert)}, nil
}

// flatStrings turns a list argument into strings, flattening nested lists:
// a templated entry such as "{{ .groups.etcd }}" may itself be a list.
func flatStrings(l []any) []string {
	var out []string
	for _, v := range l {
		switch x := v.(type) {
		case nil:
		case []any:
			out = append(out, flatStrings(x)...)
		case []string:
			out = append(out, x...)
		default:
			out = append(out, fmt.Sprint(x))
		}
	}
	return out
}

func backupNote(kept []string) string {
	if len(kept) == 0 {
		return ""
	}
	return "; old files kept as " + strings.Join(kept, ", ")
}

func serialHex(c *x509.Certificate) string {
	return strings.ToUpper(c.SerialNumber.Text(16))
}

func logf(env *step.Env, format string, args ...any) {
	if env.Logf != nil {
		env.Logf(format, args...)
	}
}
