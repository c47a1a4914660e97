package lifecycle

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// OutFile is where a command writing a file (config convert, create
// config) puts it: -o's Path, standard output when "" or "-".
type OutFile struct {
	Path  string
	Perm  os.FileMode
	Force bool   // replace an existing file
	Input string // the file read, never replaced without Force
}

// Write writes data to w or to the new file o.Path (WriteNewFile), saying
// so on errw with note after the path; what names data in an error.
func (o OutFile) Write(w, errw io.Writer, data []byte, what, note string) error {
	if o.Path == "" || o.Path == "-" {
		_, err := w.Write(data)
		return err
	}
	if err := WriteNewFile(o.Path, data, o.Perm, o.Force, o.Input); err != nil {
		return fmt.Errorf("write %s: %w", what, err)
	}
	fmt.Fprintf(errw, "wrote %s%s\n", o.Path, note)
	return nil
}

// WriteNewFile writes data to path, refusing an existing file unless
// force: a mistyped -o must not destroy a cluster file, least of all the
// input being read (input, "" for none), which would be lost with no copy
// left.
func WriteNewFile(path string, data []byte, perm os.FileMode, force bool, input string) error {
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, perm)
	if errors.Is(err, os.ErrExist) {
		if input != "" && sameFile(path, input) {
			return fmt.Errorf("%s is the input file; write elsewhere (or use --force to replace it): %w", path, err)
		}
		return fmt.Errorf("%s already exists (use --force to overwrite): %w", path, err)
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func sameFile(a, b string) bool {
	ia, err := os.Stat(a)
	if err != nil {
		return false
	}
	ib, err := os.Stat(b)
	return err == nil && os.SameFile(ia, ib)
}

// WritePrivate writes a key (a kubeconfig) to path with mode 0600, also
// when the file exists: WriteFile alone keeps an existing file's mode.
func WritePrivate(path string, data []byte) error {
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return err
	}
	return os.Chmod(path, 0o600)
}
