package confine

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/mensylisir/kubexm/schema/validate"

	"golang.org/x/sys/unix"

	"github.com/mensylisir/kubexm/schema"
)

// Prepared is a job's cluster.yaml as its run gets it.
type Prepared struct {
	// Config is the file with its ${secret:NAME} references replaced: a
	// password by its value, a private key by /dev/fd/N of Files.
	Config []byte
	// Files hold the private keys named; the run gets Files[i] as
	// descriptor firstFD+i. The caller closes them.
	Files []*os.File
}

// Close closes the key files.
func (p Prepared) Close() {
	for _, f := range p.Files {
		f.Close()
	}
}

// secretField is a secret field of a cluster.yaml that names a server
// secret.
type secretField struct {
	path, name string
	key        bool
}

func secretFields(c *schema.Cluster) []secretField {
	var out []secretField
	add := func(path, v string, key bool) {
		if name, ok := schema.SecretRef(v); ok {
			out = append(out, secretField{path: path, name: name, key: key})
		}
	}
	bastion := func(p string, b *schema.Bastion) {
		if b == nil {
			return
		}
		add(p+".password", b.Password, false)
		add(p+".privateKeyPassphrase", b.Passphrase, false)
		add(p+".privateKeyPath", b.PrivateKeyPath, true)
	}
	for i, h := range c.Spec.Hosts {
		p := fmt.Sprintf("spec.hosts[%d]", i)
		add(p+".password", h.Password, false)
		add(p+".privateKeyPassphrase", h.Passphrase, false)
		add(p+".sudoPassword", h.SudoPassword, false)
		add(p+".privateKeyPath", h.PrivateKeyPath, true)
		bastion(p+".bastion", h.Bastion)
	}
	bastion("spec.bastion", c.Spec.Bastion)
	for name, a := range c.Spec.Registry.Auths {
		add("spec.registry.auths."+name+".password", a.Password, false)
	}
	return out
}

// Prepare checks a job's stored cluster.yaml and its command's hosts as
// CheckJob does, on the worker that runs it, then resolves the server
// secrets it names. Only the secret fields are resolved: a reference
// elsewhere (a variable a template prints) stays as it is.
func (g *Guard) Prepare(ctx context.Context, data []byte, nodes, groups []string, firstFD int) (Prepared, error) {
	if _, err := g.CheckJob(ctx, data, nodes, groups); err != nil {
		return Prepared{}, err
	}
	c, _, err := schema.Decode("cluster.yaml", data)
	if err != nil {
		return Prepared{}, err
	}
	fields := secretFields(c)
	return g.substitute(data, c, fields, firstFD, false)
}

// ForView is a stored cluster.yaml for the read-only views, which read it
// with kubexm's own code: checked as Register checks it (so that it names
// no file or variable of the server), its server secrets left out (a
// password as ******, a key as none): a view connects to no host.
func (g *Guard) ForView(ctx context.Context, data []byte) ([]byte, error) {
	c, _, err := validate.ParseConfined(data, g.support, func(string, string) bool { return true })
	if err != nil {
		return nil, err
	}
	if err := g.CheckHosts(ctx, c); err != nil {
		return nil, err
	}
	d, _, err := schema.Decode("cluster.yaml", data)
	if err != nil {
		return nil, err
	}
	p, err := g.substitute(data, d, secretFields(d), 0, true)
	if err != nil {
		return nil, err
	}
	return p.Config, nil
}

// substitute replaces the references of fields in data; placeholder: by
// ****** and "" instead of the secrets.
func (g *Guard) substitute(data []byte, c *schema.Cluster, fields []secretField, firstFD int, placeholder bool) (Prepared, error) {
	if len(fields) == 0 {
		return Prepared{Config: data}, nil
	}
	var out Prepared
	keyFD := map[string]int{}
	type edit struct {
		line, start, end int
		text             string
	}
	var edits []edit
	lines := strings.Split(string(data), "\n")
	for _, f := range fields {
		var repl string
		var v []byte
		switch {
		case placeholder && f.key:
		case placeholder:
			repl = schema.Mask
		case g.secrets == nil:
			return Prepared{}, fmt.Errorf("%s: no server secret %q", f.path, f.name)
		default:
			var err error
			if v, err = g.secrets.For(c.Metadata.Name, f.name); err != nil {
				out.Close()
				return Prepared{}, err
			}
			repl = string(v)
		}
		if f.key && !placeholder {
			fd, ok := keyFD[f.name]
			if !ok {
				mf, err := memfd("key-"+f.name, v)
				if err != nil {
					out.Close()
					return Prepared{}, err
				}
				fd = firstFD + len(out.Files)
				out.Files = append(out.Files, mf)
				keyFD[f.name] = fd
			}
			repl = fmt.Sprintf("/dev/fd/%d", fd)
		}
		pos := c.PosOf(f.path)
		start, end, ok := refAt(lines, pos.Line, pos.Col, f.name)
		if !ok {
			out.Close()
			return Prepared{}, fmt.Errorf("%s: the reference to server secret %q was not found where the parser put it (line %d)", f.path, f.name, pos.Line)
		}
		// A JSON string is a YAML double-quoted scalar.
		q, _ := json.Marshal(repl)
		edits = append(edits, edit{line: pos.Line - 1, start: start, end: end, text: string(q)})
	}
	// Right to left, so that the offsets of the edits left to make hold.
	slices.SortFunc(edits, func(a, b edit) int {
		if a.line != b.line {
			return a.line - b.line
		}
		return b.start - a.start
	})
	for _, e := range edits {
		l := lines[e.line]
		lines[e.line] = l[:e.start] + e.text + l[e.end:]
	}
	out.Config = []byte(strings.Join(lines, "\n"))
	return out, nil
}

// refAt finds the reference to secret name nearest column col (1-based)
// of line (1-based), with its quotes: the byte range to replace.
func refAt(lines []string, line, col int, name string) (int, int, bool) {
	if line < 1 || line > len(lines) {
		return 0, 0, false
	}
	re := regexp.MustCompile(`["']?\$\{secret:` + regexp.QuoteMeta(name) + `\}["']?`)
	best, bestDist := []int(nil), 0
	for _, m := range re.FindAllStringIndex(lines[line-1], -1) {
		d := m[0] - (col - 1)
		if d < 0 {
			d = -d
		}
		if best == nil || d < bestDist {
			best, bestDist = m, d
		}
	}
	if best == nil {
		return 0, 0, false
	}
	return best[0], best[1], true
}

// memfd is a file in memory holding data: a key never written to disk.
func memfd(name string, data []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, fmt.Errorf("memfd: %w", err)
	}
	return f, nil
}
