package lifecycle

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// OutFile writes to standard output without -o, else a new file it names
// on standard error, and never replaces a file (least of all the input)
// without Force.
func TestOutFileWrite(t *testing.T) {
	dir := t.TempDir()
	var out, errw strings.Builder
	if err := (OutFile{}).Write(&out, &errw, []byte("x\n"), "sample", ""); err != nil || out.String() != "x\n" || errw.Len() != 0 {
		t.Fatalf("to standard output: %q %q %v", out.String(), errw.String(), err)
	}
	p := filepath.Join(dir, "c.yaml")
	o := OutFile{Path: p, Perm: 0o600}
	if err := o.Write(&out, &errw, []byte("y\n"), "sample", "; check it"); err != nil || errw.String() != "wrote "+p+"; check it\n" {
		t.Fatalf("to a file: %q %v", errw.String(), err)
	}
	if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the file's mode: %v %v", st, err)
	}
	o.Input = p
	if err := o.Write(&out, &errw, []byte("z\n"), "converted file", ""); err == nil || !strings.Contains(err.Error(), "write converted file: "+p+" is the input file") {
		t.Fatalf("over the input: %v", err)
	}
	o.Force = true
	if err := o.Write(&out, &errw, []byte("z\n"), "converted file", ""); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(p); string(data) != "z\n" {
		t.Fatalf("with Force: %q", data)
	}
}
