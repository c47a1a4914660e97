package engine

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// source is a file or directory either on disk or in the built-in FS, so
// forked playbooks on disk and embedded ones load the same way.
type source struct {
	fsys    fs.FS
	name    string // slash path inside fsys
	builtin bool
}

func diskSource(p string) (source, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return source{}, err
	}
	return source{fsys: os.DirFS("/"), name: strings.TrimPrefix(filepath.ToSlash(abs), "/")}, nil
}

// String is the path shown in messages: the real path on disk, or
// "builtin:<path>" for an embedded file.
func (s source) String() string {
	if s.builtin {
		return "builtin:" + s.name
	}
	if rel, err := filepath.Rel(cwd(), "/"+s.name); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return "/" + s.name
}

func cwd() string {
	d, err := os.Getwd()
	if err != nil {
		return "/"
	}
	return d
}

func (s source) dir() source {
	return source{fsys: s.fsys, name: path.Dir(s.name), builtin: s.builtin}
}

func (s source) join(rel string) source {
	if path.IsAbs(rel) && !s.builtin {
		return source{fsys: s.fsys, name: strings.TrimPrefix(path.Clean(rel), "/")}
	}
	return source{fsys: s.fsys, name: path.Join(s.name, rel), builtin: s.builtin}
}

// same says whether s and o name the same file; an fs.FS may not be
// comparable, and every disk source shares one.
func (s source) same(o source) bool { return s.builtin == o.builtin && s.name == o.name }

func (s source) base() string { return path.Base(s.name) }

func (s source) valid() bool { return s.fsys != nil && fs.ValidPath(s.name) }

func (s source) read() ([]byte, error) {
	if !s.valid() {
		return nil, &fs.PathError{Op: "open", Path: s.String(), Err: fs.ErrInvalid}
	}
	return fs.ReadFile(s.fsys, s.name)
}

func (s source) isFile() bool {
	if !s.valid() {
		return false
	}
	st, err := fs.Stat(s.fsys, s.name)
	return err == nil && !st.IsDir()
}

func (s source) isDir() bool {
	if !s.valid() {
		return false
	}
	st, err := fs.Stat(s.fsys, s.name)
	return err == nil && st.IsDir()
}

// firstFile returns the first of names (relative to s) that is a file.
func (s source) firstFile(names ...string) (source, bool) {
	for _, n := range names {
		if c := s.join(n); c.isFile() {
			return c, true
		}
	}
	return source{}, false
}

// yamlFile finds base.yaml or base.yml (or base itself when it has an
// extension) under s.
func (s source) yamlFile(base string) (source, bool) {
	if ext := path.Ext(base); ext == ".yaml" || ext == ".yml" {
		return s.firstFile(base)
	}
	return s.firstFile(base+".yaml", base+".yml", base)
}
