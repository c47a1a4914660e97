package pki

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/internal/flock"
)

// File modes of what the PKI builtins write.
const (
	modeKey  fs.FileMode = 0o600
	modeCert fs.FileMode = 0o644
	modeDir  fs.FileMode = 0o755
)

// controlPath resolves a path on the control machine: relative paths are
// taken from the cluster's work directory, so playbooks can say
// `certs/etcd` for .kubexm/<cluster>/certs/etcd.
func controlPath(env *step.Env, p string) string {
	if p == "" || filepath.IsAbs(p) || env.WorkDir == "" {
		return p
	}
	return filepath.Join(env.WorkDir, p)
}

// readOptional returns a file's content, or nil and no error when it does
// not exist.
func readOptional(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// writeAtomic replaces path with data: a temporary file in the same
// directory is written, synced and renamed over it, so readers see the old
// or the new content, never a part.
func writeAtomic(path string, data []byte, mode fs.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, modeDir); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // fails harmlessly once renamed
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return nil
}

// backupName picks PATH.<UTC timestamp>.bak, adding a counter when a backup
// of the same second exists.
func backupName(path string, now time.Time) string {
	base := path + "." + now.UTC().Format("20060102T150405Z")
	name := base + ".bak"
	for i := 2; ; i++ {
		if _, err := os.Lstat(name); errors.Is(err, fs.ErrNotExist) {
			return name
		}
		name = fmt.Sprintf("%s-%d.bak", base, i)
	}
}

// lockDir takes an exclusive advisory lock on dir (created if needed) until
// the returned function is called. gen_cert runs once per host, possibly in
// parallel and in several kubexm processes; the lock keeps two of them from
// writing halves of different pairs in the same directory.
func lockDir(ctx context.Context, dir string) (func(), error) {
	if err := os.MkdirAll(dir, modeDir); err != nil {
		return nil, err
	}
	return flock.Lock(ctx, dir)
}
