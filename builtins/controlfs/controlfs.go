// Package controlfs resolves the control machine's files a builtin reads or
// writes: a role's files/ and templates/, the run's work directory.
package controlfs

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/mensylisir/kubexm/engine/step"
)

// ControlPath resolves a src argument: absolute paths are used as they are,
// relative ones through the role's files/ or templates/.
func ControlPath(env *step.Env, kind, name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("src is empty")
	}
	if filepath.IsAbs(name) {
		return name, nil
	}
	if env.FindFile == nil {
		return "", fmt.Errorf("src %s is relative but no role or playbook directory is known; give an absolute path", name)
	}
	p, err := env.FindFile(kind, name)
	if err != nil {
		return "", fmt.Errorf("src %s: %w", name, err)
	}
	return p, nil
}

// WorkPath takes a relative path under the work directory.
func WorkPath(env *step.Env, p string) string {
	if p == "" || filepath.IsAbs(p) || env.WorkDir == "" {
		return p
	}
	return filepath.Join(env.WorkDir, p)
}

// FileSHA256 is the SHA-256 (hex) and size of a control-machine file.
func FileSHA256(p string) (string, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, fmt.Errorf("%s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// ResolveDest puts a relative dest under the work directory and appends
// base to a directory.
func ResolveDest(env *step.Env, dest, base string) (string, error) {
	if dest == "" {
		return "", fmt.Errorf("download: dest is empty")
	}
	dir := strings.HasSuffix(dest, "/")
	if !filepath.IsAbs(dest) {
		if env.WorkDir == "" {
			return "", fmt.Errorf("download: dest %s is relative and no work directory is set", dest)
		}
		dest = filepath.Join(env.WorkDir, dest)
	}
	if fi, err := os.Stat(dest); dir || (err == nil && fi.IsDir()) {
		if base == "" || base == "/" || base == "." {
			return "", fmt.Errorf("download: dest %s is a directory and the URL names no file; give a file name", dest)
		}
		dest = filepath.Join(dest, base)
	}
	return filepath.Clean(dest), nil
}
