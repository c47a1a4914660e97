package ssh

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// credentials is what one SSH login may use.
type credentials struct {
	user       string
	password   string
	keyPath    string
	passphrase string
}

// authMethods builds the methods in the order OpenSSH tries them: public
// keys (the configured key, the agent's, the default identities), then
// password and keyboard-interactive. closeFn releases the agent socket.
func authMethods(c credentials, agentSock string) (methods []gossh.AuthMethod, closeFn func(), err error) {
	closeFn = func() {}
	var signers []gossh.Signer
	if c.keyPath != "" {
		s, err := loadKey(expandHome(c.keyPath), c.passphrase)
		if err != nil {
			return nil, closeFn, err
		}
		signers = append(signers, s)
	}
	var agentSigners func() ([]gossh.Signer, error)
	if agentSock != "" {
		if conn, err := net.Dial("unix", agentSock); err == nil {
			closeFn = func() { conn.Close() }
			agentSigners = agent.NewClient(conn).Signers
		}
	}
	if c.keyPath == "" {
		// Like OpenSSH, fall back to the default identities; encrypted ones
		// are skipped since there is no one to ask for their passphrase.
		home, _ := os.UserHomeDir()
		for _, name := range []string{"id_ed25519", "id_ecdsa", "id_rsa"} {
			if home == "" {
				break
			}
			if s, err := loadKey(filepath.Join(home, ".ssh", name), c.passphrase); err == nil {
				signers = append(signers, s)
			}
		}
	}
	if len(signers) > 0 || agentSigners != nil {
		methods = append(methods, gossh.PublicKeysCallback(func() ([]gossh.Signer, error) {
			out := append([]gossh.Signer(nil), signers...)
			if agentSigners != nil {
				if as, err := agentSigners(); err == nil {
					out = append(out, as...)
				}
			}
			return out, nil
		}))
	}
	if c.password != "" {
		pw := c.password
		methods = append(methods, gossh.Password(pw),
			gossh.KeyboardInteractive(func(_, _ string, questions []string, _ []bool) ([]string, error) {
				answers := make([]string, len(questions))
				for i := range answers {
					answers[i] = pw
				}
				return answers, nil
			}))
	}
	if len(methods) == 0 {
		closeFn()
		return nil, func() {}, errors.New("no credentials: no private key, password or ssh-agent for this host")
	}
	return methods, closeFn, nil
}

func loadKey(path, passphrase string) (gossh.Signer, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("private key: %w", err)
	}
	s, err := gossh.ParsePrivateKey(pem)
	var missing *gossh.PassphraseMissingError
	if errors.As(err, &missing) {
		if passphrase == "" {
			return nil, fmt.Errorf("private key %s is encrypted and no passphrase is set", path)
		}
		s, err = gossh.ParsePrivateKeyWithPassphrase(pem, []byte(passphrase))
		if err != nil {
			return nil, fmt.Errorf("private key %s: wrong passphrase? %w", path, err)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("private key %s: %w", path, err)
	}
	return s, nil
}

func expandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, p[1:])
		}
	}
	return p
}
