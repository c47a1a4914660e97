package kubexm

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Export writes playbooks/ and roles/ of fsys (Content(), or a tree laid
// out as it is) under dir, for forking: `kubexm playbook export`. It
// refuses to overwrite a file unless force, and returns how many files it
// wrote.
func Export(fsys fs.FS, dir string, force bool) (int, error) {
	if fsys == nil {
		return 0, errors.New("this kubexm has no built-in playbooks")
	}
	n := 0
	for _, root := range []string{"playbooks", "roles"} {
		if _, err := fs.Stat(fsys, root); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		err := fs.WalkDir(fsys, root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			dst := filepath.Join(dir, filepath.FromSlash(p))
			if d.IsDir() {
				return os.MkdirAll(dst, 0o755)
			}
			if err := exportFile(fsys, p, dst, force); err != nil {
				return err
			}
			n++
			return nil
		})
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func exportFile(fsys fs.FS, p, dst string, force bool) error {
	data, err := fs.ReadFile(fsys, p)
	if err != nil {
		return err
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if !force {
		flags |= os.O_EXCL
	}
	out, err := os.OpenFile(dst, flags, 0o644)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s already exists; use --force to overwrite", dst)
		}
		return err
	}
	if _, err := out.Write(data); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
