package playbook

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Source is a file or directory either on disk or in the built-in FS, so
// forked playbooks on disk and embedded ones load the same way.
type Source struct {
	Fsys    fs.FS
	Name    string // slash path inside fsys
	Builtin bool
}

func DiskSource(p string) (Source, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return Source{}, err
	}
	return Source{Fsys: os.DirFS("/"), Name: strings.TrimPrefix(filepath.ToSlash(abs), "/")}, nil
}

// String is the path shown in messages: the real path on disk, or
// "builtin:<path>" for an embedded file.
func (s Source) String() string {
	if s.Builtin {
		return "builtin:" + s.Name
	}
	if rel, err := filepath.Rel(cwd(), "/"+s.Name); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return "/" + s.Name
}

func cwd() string {
	d, err := os.Getwd()
	if err != nil {
		return "/"
	}
	return d
}

func (s Source) Dir() Source {
	return Source{Fsys: s.Fsys, Name: path.Dir(s.Name), Builtin: s.Builtin}
}

func (s Source) Join(rel string) Source {
	if path.IsAbs(rel) && !s.Builtin {
		return Source{Fsys: s.Fsys, Name: strings.TrimPrefix(path.Clean(rel), "/")}
	}
	return Source{Fsys: s.Fsys, Name: path.Join(s.Name, rel), Builtin: s.Builtin}
}

// Same says whether s and o name the same file; an fs.FS may not be
// comparable, and every disk source shares one.
func (s Source) Same(o Source) bool { return s.Builtin == o.Builtin && s.Name == o.Name }

func (s Source) Base() string { return path.Base(s.Name) }

func (s Source) valid() bool { return s.Fsys != nil && fs.ValidPath(s.Name) }

func (s Source) Read() ([]byte, error) {
	if !s.valid() {
		return nil, &fs.PathError{Op: "open", Path: s.String(), Err: fs.ErrInvalid}
	}
	return fs.ReadFile(s.Fsys, s.Name)
}

func (s Source) IsFile() bool {
	if !s.valid() {
		return false
	}
	st, err := fs.Stat(s.Fsys, s.Name)
	return err == nil && !st.IsDir()
}

func (s Source) IsDir() bool {
	if !s.valid() {
		return false
	}
	st, err := fs.Stat(s.Fsys, s.Name)
	return err == nil && st.IsDir()
}

// firstFile returns the first of names (relative to s) that is a file.
func (s Source) firstFile(names ...string) (Source, bool) {
	for _, n := range names {
		if c := s.Join(n); c.IsFile() {
			return c, true
		}
	}
	return Source{}, false
}

// YAMLFile finds base.yaml or base.yml (or base itself when it has an
// extension) under s.
func (s Source) YAMLFile(base string) (Source, bool) {
	if ext := path.Ext(base); ext == ".yaml" || ext == ".yml" {
		return s.firstFile(base)
	}
	return s.firstFile(base+".yaml", base+".yml", base)
}
