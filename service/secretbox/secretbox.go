// Package secretbox encrypts what service mode keeps at rest (the
// registered cluster.yaml files, secrets included) with AES-256-GCM.
package secretbox

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
)

// KeyEnv names the environment variable holding the key (base64 of 32
// bytes); it wins over a key file.
const KeyEnv = "KUBEXM_SECRET_KEY"

const version = 1

// Box seals and opens with one key.
type Box struct{ aead cipher.AEAD }

// New makes a Box from a 32-byte key.
func New(key []byte) (*Box, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("the secret key must be 32 bytes (AES-256), not %d", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Box{aead: aead}, nil
}

// Seal encrypts plain; aad (the row it belongs to) must be given again to
// open it, so a sealed value moved to another row does not open.
func (b *Box) Seal(plain, aad []byte) ([]byte, error) {
	nonce := make([]byte, b.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	out := append([]byte{version}, nonce...)
	return b.aead.Seal(out, nonce, plain, aad), nil
}

// Open decrypts what Seal made.
func (b *Box) Open(sealed, aad []byte) ([]byte, error) {
	n := b.aead.NonceSize()
	if len(sealed) < 1+n || sealed[0] != version {
		return nil, errors.New("sealed value: unknown format")
	}
	plain, err := b.aead.Open(nil, sealed[1:1+n], sealed[1+n:], aad)
	if err != nil {
		return nil, errors.New("sealed value does not open with this key: give the key the server was started with (" + KeyEnv + " or --secret-key-file)")
	}
	return plain, nil
}

// LoadKey reads the key from $KUBEXM_SECRET_KEY, else from file (base64
// text). With neither and create set, it writes a new random key to file
// (mode 0600): the embedded setup works out of the box, and the file is
// what to back up and to hand to other workers.
func LoadKey(file string, create bool) ([]byte, error) {
	if v := os.Getenv(KeyEnv); v != "" {
		k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("%s: not base64: %w", KeyEnv, err)
		}
		return k, nil
	}
	if file == "" {
		return nil, fmt.Errorf("no secret key: set %s (base64 of 32 random bytes: head -c32 /dev/urandom | base64) or give --secret-key-file", KeyEnv)
	}
	data, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) && create {
		k := make([]byte, 32)
		if _, err := rand.Read(k); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, fmt.Errorf("secret key file: %w", err)
		}
		if _, err := f.WriteString(base64.StdEncoding.EncodeToString(k) + "\n"); err != nil {
			f.Close()
			return nil, fmt.Errorf("secret key file %s: %w", file, err)
		}
		return k, f.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("secret key file: %w", err)
	}
	k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(data)))
	if err != nil {
		return nil, fmt.Errorf("secret key file %s: not base64: %w", file, err)
	}
	return k, nil
}
