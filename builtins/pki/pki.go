// Package pki provides the certificate builtins: gen_cert makes CAs, signed
// certificates and key pairs on the control machine, kubeconfig writes a
// kubeconfig with embedded credentials, and cert_info reports on existing
// certificates. Everything is done with Go's crypto/x509; no openssl or
// cfssl binary is needed on any machine. ca_trust keeps a CA's trust bundle
// and steps a rotation of the CA.
package pki

import "github.com/mensylisir/kubexm/engine/step"

// Builtins returns gen_cert, ca_trust, kubeconfig and cert_info.
func Builtins() []step.Builtin {
	return []step.Builtin{genCert{}, caTrust{}, kubeconfigBuiltin{}, certInfo{}}
}
