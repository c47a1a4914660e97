package confine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/mensylisir/kubexm/cmd/kubexm/internal/secretbox"
)

// Secrets are the server secrets its administrator makes (kubexm server
// secret create NAME) for cluster files to name as ${secret:NAME}: an SSH
// password or private key an API client uses without ever holding it.
// Files of the data directory every worker shares, sealed with the key of
// the cluster files, each bound to its name.
type Secrets struct {
	dir string
	box *secretbox.Box
}

// NewSecrets keeps the secrets in dataDir/secrets.
func NewSecrets(dataDir string, box *secretbox.Box) *Secrets {
	return &Secrets{dir: filepath.Join(dataDir, "secrets"), box: box}
}

var secretNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

func secretAAD(name string) []byte { return []byte("secret/" + name) }

func (s *Secrets) path(name string) (string, error) {
	if !secretNameRE.MatchString(name) {
		return "", fmt.Errorf("secret name %q: lower-case letters, digits, '.', '_' and '-', at most 63", name)
	}
	return filepath.Join(s.dir, name), nil
}

// Put stores value under name, replacing an older value.
func (s *Secrets) Put(name string, value []byte) error {
	p, err := s.path(name)
	if err != nil {
		return err
	}
	if len(value) == 0 {
		return fmt.Errorf("secret %s: empty value", name)
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("secrets: %w", err)
	}
	sealed, err := s.box.Seal(value, secretAAD(name))
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(s.dir, ".tmp-"+name+"-")
	if err != nil {
		return fmt.Errorf("secret %s: %w", name, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(sealed); err != nil {
		tmp.Close()
		return fmt.Errorf("secret %s: %w", name, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("secret %s: %w", name, err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return fmt.Errorf("secret %s: %w", name, err)
	}
	return nil
}

// Get returns the value of name.
func (s *Secrets) Get(name string) ([]byte, error) {
	p, err := s.path(name)
	if err != nil {
		return nil, err
	}
	sealed, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no server secret %q (kubexm server secret list)", name)
	}
	if err != nil {
		return nil, fmt.Errorf("secret %s: %w", name, err)
	}
	v, err := s.box.Open(sealed, secretAAD(name))
	if err != nil {
		return nil, fmt.Errorf("secret %s: %w", name, err)
	}
	return v, nil
}

// Exists says whether a secret of that name exists.
func (s *Secrets) Exists(name string) bool {
	p, err := s.path(name)
	if err != nil {
		return false
	}
	st, err := os.Lstat(p)
	return err == nil && st.Mode().IsRegular()
}

// List returns the secrets' names, sorted.
func (s *Secrets) List() ([]string, error) {
	es, err := os.ReadDir(s.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	var out []string
	for _, e := range es {
		if e.Type().IsRegular() && !strings.HasPrefix(e.Name(), ".") && secretNameRE.MatchString(e.Name()) {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out, nil
}

// Delete removes name.
func (s *Secrets) Delete(name string) error {
	p, err := s.path(name)
	if err != nil {
		return err
	}
	if err := os.Remove(p); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("no server secret %q", name)
	} else if err != nil {
		return fmt.Errorf("secret %s: %w", name, err)
	}
	return nil
}
