package confine

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/mensylisir/kubexm/service/secretbox"
)

// Secrets are the server secrets its administrator makes (kubexm server
// secret create NAME --cluster CLUSTER) for cluster files to name as
// ${secret:NAME}: an SSH password or private key an API client uses without
// ever holding it. Files of the data directory every worker shares, sealed
// with the key of the cluster files, each bound to its name. A secret is
// for the clusters it was made for: the list is sealed with the value, so
// only the administrator (who holds the key) changes it.
type Secrets struct {
	dir string
	box *secretbox.Box
}

// Secret is a stored secret.
type Secret struct {
	Name  string
	Value []byte
	// Clusters are the clusters (by metadata.name) whose files may name
	// it; none: every cluster, what --all-clusters makes and what a secret
	// made before secrets were scoped stays.
	Clusters []string
	// Unscoped says it was made before secrets were scoped.
	Unscoped bool
}

// For says whether a file of cluster may name s.
func (s Secret) For(cluster string) bool {
	return len(s.Clusters) == 0 || slices.Contains(s.Clusters, cluster)
}

// NewSecrets keeps the secrets in dataDir/secrets.
func NewSecrets(dataDir string, box *secretbox.Box) *Secrets {
	return &Secrets{dir: filepath.Join(dataDir, "secrets"), box: box}
}

var secretNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// secretAAD binds a sealed secret to its name. The scoped format has
// its own, so that a file of one format never opens as the other.
func secretAAD(name string) []byte       { return []byte("secret/" + name) }
func scopedSecretAAD(name string) []byte { return []byte("secret/v2/" + name) }

// scoped is the sealed content of a secret with its clusters.
type scoped struct {
	Clusters []string `json:"clusters"`
	Value    []byte   `json:"value"`
}

func (s *Secrets) path(name string) (string, error) {
	if !secretNameRE.MatchString(name) {
		return "", fmt.Errorf("secret name %q: lower-case letters, digits, '.', '_' and '-', at most 63", name)
	}
	return filepath.Join(s.dir, name), nil
}

// Put stores value under name for clusters (none: every cluster),
// replacing an older value.
func (s *Secrets) Put(name string, value []byte, clusters []string) error {
	p, err := s.path(name)
	if err != nil {
		return err
	}
	if len(value) == 0 {
		return fmt.Errorf("secret %s: empty value", name)
	}
	for _, c := range clusters {
		if !secretNameRE.MatchString(c) {
			return fmt.Errorf("secret %s: cluster %q: a cluster's metadata.name is lower-case letters, digits, '.', '_' and '-', at most 63", name, c)
		}
	}
	clusters = slices.Compact(slices.Sorted(slices.Values(clusters)))
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("secrets: %w", err)
	}
	plain, err := json.Marshal(scoped{Clusters: clusters, Value: value})
	if err != nil {
		return err
	}
	sealed, err := s.box.Seal(plain, scopedSecretAAD(name))
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

// Get returns the secret name.
func (s *Secrets) Get(name string) (Secret, error) {
	p, err := s.path(name)
	if err != nil {
		return Secret{}, err
	}
	sealed, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return Secret{}, fmt.Errorf("no server secret %q (kubexm server secret list)", name)
	}
	if err != nil {
		return Secret{}, fmt.Errorf("secret %s: %w", name, err)
	}
	if plain, err := s.box.Open(sealed, scopedSecretAAD(name)); err == nil {
		var sc scoped
		if err := json.Unmarshal(plain, &sc); err != nil {
			return Secret{}, fmt.Errorf("secret %s: %w", name, err)
		}
		return Secret{Name: name, Value: sc.Value, Clusters: sc.Clusters}, nil
	}
	v, err := s.box.Open(sealed, secretAAD(name))
	if err != nil {
		return Secret{}, fmt.Errorf("secret %s: %w", name, err)
	}
	return Secret{Name: name, Value: v, Unscoped: true}, nil
}

// For returns the value of name for a run of cluster. A secret scoped to
// other clusters is refused as one that does not exist: the answer tells
// a cluster file nothing about other clusters' secrets.
func (s *Secrets) For(cluster, name string) ([]byte, error) {
	sec, err := s.Get(name)
	if err == nil && sec.For(cluster) {
		return sec.Value, nil
	}
	if _, perr := s.path(name); perr != nil {
		return nil, perr
	}
	return nil, fmt.Errorf("no server secret %q for cluster %s (kubexm server secret list)", name, cluster)
}

// Usable says whether a file of cluster may name the secret name.
func (s *Secrets) Usable(cluster, name string) bool {
	_, err := s.For(cluster, name)
	return err == nil
}

// List returns the secrets, sorted by name, without their values.
func (s *Secrets) List() ([]Secret, error) {
	es, err := os.ReadDir(s.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	var out []Secret
	for _, e := range es {
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".") || !secretNameRE.MatchString(e.Name()) {
			continue
		}
		sec, err := s.Get(e.Name())
		if err != nil {
			return nil, err
		}
		sec.Value = nil
		out = append(out, sec)
	}
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

// Scope says which clusters' files may name the secret.
func (sec Secret) Scope() string {
	switch {
	case sec.Unscoped:
		return "every cluster (unscoped: made before secrets were scoped; create it again with --cluster)"
	case len(sec.Clusters) == 0:
		return "every cluster"
	}
	return "cluster " + strings.Join(sec.Clusters, ", ")
}
