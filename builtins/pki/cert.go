package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"strings"
	"time"
)

// KeyType names the key algorithm and size of a certificate or key pair.
type KeyType string

// The supported key types.
const (
	RSA2048   KeyType = "rsa2048"
	RSA4096   KeyType = "rsa4096"
	ECDSAP256 KeyType = "ecdsa-p256"
)

// KeyTypes lists the supported key types, for argument choices.
func KeyTypes() []string { return []string{string(RSA2048), string(RSA4096), string(ECDSAP256)} }

// ParseKeyType checks a key_type argument.
func ParseKeyType(s string) (KeyType, error) {
	switch kt := KeyType(strings.ToLower(strings.TrimSpace(s))); kt {
	case RSA2048, RSA4096, ECDSAP256:
		return kt, nil
	case "":
		return RSA2048, nil
	}
	return "", fmt.Errorf("key type %q is not supported; use one of %s", s, strings.Join(KeyTypes(), ", "))
}

// GenerateKey makes a new private key of type kt.
func GenerateKey(kt KeyType) (crypto.Signer, error) {
	switch kt {
	case RSA2048:
		return rsa.GenerateKey(rand.Reader, 2048)
	case RSA4096:
		return rsa.GenerateKey(rand.Reader, 4096)
	case ECDSAP256:
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	return nil, fmt.Errorf("key type %q is not supported", kt)
}

// KeyTypeOf tells the type of a public key, or "" for one kubexm does not make.
func KeyTypeOf(pub crypto.PublicKey) KeyType {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		switch k.N.BitLen() {
		case 2048:
			return RSA2048
		case 4096:
			return RSA4096
		}
	case *ecdsa.PublicKey:
		if k.Curve == elliptic.P256() {
			return ECDSAP256
		}
	}
	return ""
}

// Usage is what a leaf certificate is for.
type Usage string

// The leaf usages; peer is a member talking to other members, so both ends.
const (
	UsageServer Usage = "server"
	UsageClient Usage = "client"
	UsagePeer   Usage = "peer"
)

// ParseUsages checks a usages argument and returns the extended key usages it
// stands for, deduplicated, server before client.
func ParseUsages(names []string) ([]x509.ExtKeyUsage, error) {
	var server, client bool
	for _, n := range names {
		switch Usage(strings.ToLower(strings.TrimSpace(n))) {
		case UsageServer:
			server = true
		case UsageClient:
			client = true
		case UsagePeer:
			server, client = true, true
		default:
			return nil, fmt.Errorf("usage %q is not known; use server, client or peer", n)
		}
	}
	var out []x509.ExtKeyUsage
	if server {
		out = append(out, x509.ExtKeyUsageServerAuth)
	}
	if client {
		out = append(out, x509.ExtKeyUsageClientAuth)
	}
	return out, nil
}

// SANs are the subject alternative names of a certificate.
type SANs struct {
	DNS []string
	IPs []net.IP
}

// ParseSANs sorts entries into IP addresses and DNS names. An entry may hold
// several names separated by commas or spaces, since templated lists are often
// joined into one string. Duplicates are dropped.
func ParseSANs(entries []string) (SANs, error) {
	var s SANs
	for _, e := range entries {
		for _, f := range strings.FieldsFunc(e, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
			if ip := net.ParseIP(f); ip != nil {
				if !slices.ContainsFunc(s.IPs, ip.Equal) {
					s.IPs = append(s.IPs, ip)
				}
				continue
			}
			if err := checkDNSName(f); err != nil {
				return SANs{}, err
			}
			name := strings.ToLower(f)
			if !slices.Contains(s.DNS, name) {
				s.DNS = append(s.DNS, name)
			}
		}
	}
	return s, nil
}

// checkDNSName accepts host names and one leading wildcard label ("*.svc").
func checkDNSName(name string) error {
	rest := strings.TrimSuffix(name, ".")
	rest = strings.TrimPrefix(rest, "*.")
	if rest == "" || len(rest) > 253 {
		return fmt.Errorf("SAN %q is neither an IP address nor a DNS name", name)
	}
	for _, label := range strings.Split(rest, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("SAN %q is neither an IP address nor a DNS name", name)
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return fmt.Errorf("SAN %q is neither an IP address nor a DNS name (character %q)", name, r)
			}
		}
	}
	return nil
}

// Includes reports whether s holds every name of want, and names the first
// one missing.
func (s SANs) Includes(want SANs) (bool, string) {
	for _, d := range want.DNS {
		if !slices.ContainsFunc(s.DNS, func(x string) bool { return strings.EqualFold(x, d) }) {
			return false, d
		}
	}
	for _, ip := range want.IPs {
		if !slices.ContainsFunc(s.IPs, ip.Equal) {
			return false, ip.String()
		}
	}
	return true, ""
}

// Strings returns the names as text, DNS names first.
func (s SANs) Strings() []string {
	out := slices.Clone(s.DNS)
	for _, ip := range s.IPs {
		out = append(out, ip.String())
	}
	return out
}

// Request describes a certificate to issue.
type Request struct {
	CommonName   string
	Organization []string
	SANs         SANs
	IsCA         bool
	ExtKeyUsage  []x509.ExtKeyUsage // leaves only
	Validity     time.Duration
}

// Pair is a certificate with its private key.
type Pair struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// clockSkew backdates NotBefore so that hosts whose clocks lag the control
// machine a little accept a certificate issued moments ago.
const clockSkew = 5 * time.Minute

// Issue signs a certificate for key: self-signed when ca is nil (req.IsCA
// must then be set), else by ca. It returns the parsed certificate and its DER.
func Issue(req Request, key crypto.Signer, ca *Pair, now time.Time) (*x509.Certificate, []byte, error) {
	if ca == nil && !req.IsCA {
		return nil, nil, errors.New("a leaf certificate needs a signing CA")
	}
	if req.Validity <= 0 {
		return nil, nil, fmt.Errorf("validity %s must be positive", req.Validity)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, fmt.Errorf("serial number: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial.Add(serial, big.NewInt(1)), // never zero
		Subject:      pkix.Name{CommonName: req.CommonName, Organization: req.Organization},
		NotBefore:    now.Add(-clockSkew).UTC(),
		NotAfter:     now.Add(req.Validity).UTC(),
		DNSNames:     req.SANs.DNS,
		IPAddresses:  req.SANs.IPs,
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	if _, isRSA := key.Public().(*rsa.PublicKey); isRSA {
		tmpl.KeyUsage |= x509.KeyUsageKeyEncipherment
	}
	parent, signer := tmpl, key
	if req.IsCA {
		tmpl.IsCA = true
		tmpl.BasicConstraintsValid = true
		tmpl.KeyUsage |= x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	} else {
		tmpl.BasicConstraintsValid = true
		tmpl.ExtKeyUsage = req.ExtKeyUsage
	}
	if ca != nil {
		parent, signer = ca.Cert, ca.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	if err != nil {
		return nil, nil, fmt.Errorf("sign certificate %q: %w", req.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("parse new certificate: %w", err)
	}
	return cert, der, nil
}

// Misfit tells why an existing certificate does not fit req, or "" when it
// does: signed by ca (self-signed for a CA), same subject, key type and
// usages, SANs including the wanted ones, and not expiring before
// now+renewBefore. key is the private key found beside the certificate.
func Misfit(cert *x509.Certificate, key crypto.Signer, kt KeyType, req Request, ca *x509.Certificate, now time.Time, renewBefore time.Duration) string {
	if key == nil || !publicKeysEqual(cert.PublicKey, key.Public()) {
		return "the private key does not match the certificate"
	}
	if got := KeyTypeOf(cert.PublicKey); got != kt {
		return fmt.Sprintf("key type is %s, want %s", orUnknown(string(got)), kt)
	}
	if req.IsCA {
		if !cert.IsCA {
			return "it is not a CA certificate"
		}
		ca = cert
	} else if cert.IsCA {
		return "it is a CA certificate, want a leaf"
	}
	if err := cert.CheckSignatureFrom(ca); err != nil || !slices.Equal(cert.RawIssuer, ca.RawSubject) {
		return fmt.Sprintf("it is not signed by the CA %q", ca.Subject.CommonName)
	}
	if cert.Subject.CommonName != req.CommonName {
		return fmt.Sprintf("common name is %q, want %q", cert.Subject.CommonName, req.CommonName)
	}
	if !sameSet(cert.Subject.Organization, req.Organization) {
		return fmt.Sprintf("organization is %q, want %q", cert.Subject.Organization, req.Organization)
	}
	if ok, missing := (SANs{DNS: cert.DNSNames, IPs: cert.IPAddresses}).Includes(req.SANs); !ok {
		return fmt.Sprintf("SAN %s is missing", missing)
	}
	for _, u := range req.ExtKeyUsage {
		if !slices.Contains(cert.ExtKeyUsage, u) && !slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageAny) {
			return fmt.Sprintf("usage %s is missing", extKeyUsageName(u))
		}
	}
	if now.Before(cert.NotBefore) {
		return fmt.Sprintf("it is not valid before %s", cert.NotBefore.UTC().Format(time.RFC3339))
	}
	if !now.Add(renewBefore).Before(cert.NotAfter) {
		if !now.Before(cert.NotAfter) {
			return fmt.Sprintf("it expired on %s", cert.NotAfter.UTC().Format(time.RFC3339))
		}
		return fmt.Sprintf("it expires on %s, within the renew window of %s", cert.NotAfter.UTC().Format(time.RFC3339), formatDuration(renewBefore))
	}
	return ""
}

func orUnknown(s string) string {
	if s == "" {
		return "unsupported"
	}
	return s
}

func extKeyUsageName(u x509.ExtKeyUsage) string {
	switch u {
	case x509.ExtKeyUsageServerAuth:
		return "server"
	case x509.ExtKeyUsageClientAuth:
		return "client"
	}
	return fmt.Sprintf("ext-key-usage-%d", u)
}

func sameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(slices.Compact(x), slices.Compact(y))
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	k, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && k.Equal(b)
}

// EncodeCert returns the PEM form of a DER certificate.
func EncodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// EncodeKey returns the PEM form of a private key in the encoding kubeadm
// writes: PKCS#1 for RSA, SEC 1 for ECDSA.
func EncodeKey(key crypto.Signer) ([]byte, error) {
	switch k := key.(type) {
	case *rsa.PrivateKey:
		return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}), nil
	case *ecdsa.PrivateKey:
		der, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			return nil, fmt.Errorf("encode EC key: %w", err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
	}
	return nil, fmt.Errorf("cannot encode a %T private key", key)
}

// EncodePublicKey returns the PEM (PKIX) form of a public key, as in sa.pub.
func EncodePublicKey(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("encode public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// ParseCerts returns every certificate in PEM data, in order.
func ParseCerts(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", len(out)+1, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM CERTIFICATE block found")
	}
	return out, nil
}

// ParseCert returns the first certificate in PEM data.
func ParseCert(data []byte) (*x509.Certificate, error) {
	certs, err := ParseCerts(data)
	if err != nil {
		return nil, err
	}
	return certs[0], nil
}

// ParseKey reads a PEM private key in PKCS#1, SEC 1 or PKCS#8 form.
func ParseKey(data []byte) (crypto.Signer, error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, errors.New("no PEM private key block found")
		}
		switch block.Type {
		case "RSA PRIVATE KEY":
			return x509.ParsePKCS1PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			return x509.ParseECPrivateKey(block.Bytes)
		case "PRIVATE KEY":
			k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
			if err != nil {
				return nil, err
			}
			s, ok := k.(crypto.Signer)
			if !ok {
				return nil, fmt.Errorf("a %T private key cannot sign", k)
			}
			return s, nil
		case "ENCRYPTED PRIVATE KEY":
			return nil, errors.New("the private key is encrypted; kubexm needs it unencrypted")
		}
	}
}
