// Package local is the transport for the control machine itself: commands run
// as child processes and files are written with the os package. It serves
// `delegate_to: localhost`, control-machine builtins and all-in-one installs.
package local

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/mensylisir/kubexm/engine/transport"
)

// Transport runs on the control machine.
type Transport struct {
	name string
	root bool
	// becomePassword answers sudo's password prompt; empty runs sudo -n.
	becomePassword string
	marker         string              // precedes the PID a command run through sudo announces on stderr
	prompt         string              // sudo's password prompt
	sums           *transport.SumCache // nil: every Sha256 reads the file
	// OutputCap bounds captured output per stream.
	OutputCap int
}

var _ transport.Transport = (*Transport)(nil)

// Option configures a Transport.
type Option func(*Transport)

// WithBecomePassword sets the password given to sudo when kubexm must become
// another user (root by default) and is not running as that user. It is
// written to sudo's stdin when sudo prompts for it, never put on a command
// line or in the environment. Without it sudo runs with -n and fails rather
// than prompting.
func WithBecomePassword(pw string) Option {
	return func(t *Transport) { t.becomePassword = pw }
}

// WithSums makes Sha256 of files kubexm can read itself come from c: the
// control machine's artifacts are summed once per run, not once per host
// that a distribute task sends them to.
func WithSums(c *transport.SumCache) Option {
	return func(t *Transport) { t.sums = c }
}

// New returns the local transport, named for messages (usually "localhost").
func New(name string, opts ...Option) *Transport {
	token := make([]byte, 8)
	rand.Read(token)
	tok := hex.EncodeToString(token)
	t := &Transport{name: name, root: os.Geteuid() == 0, OutputCap: transport.DefaultOutputCap,
		marker: "KXM:" + tok + ":pid=", prompt: "KXM:" + tok + ":sudo-password:"}
	for _, o := range opts {
		o(t)
	}
	return t
}

// Host implements transport.Transport.
func (t *Transport) Host() string { return t.name }

// Close implements transport.Transport.
func (t *Transport) Close() error { return nil }

// needSudo reports whether acting as user requires sudo.
func (t *Transport) needSudo(become bool, becomeUser string) bool {
	if !become {
		return false
	}
	if becomeUser == "" || becomeUser == "root" {
		return !t.root
	}
	u, err := user.Current()
	return err != nil || u.Username != becomeUser
}

// Run implements transport.Transport.
func (t *Transport) Run(ctx context.Context, c transport.Command) (transport.Result, error) {
	argv := c.Argv
	if len(argv) == 0 {
		if c.Script == "" {
			return transport.Result{}, fmt.Errorf("%s: empty command", t.name)
		}
		argv = []string{"/bin/sh", "-c", c.Script}
	}
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	if t.needSudo(c.Become, c.BecomeUser) {
		return t.runSudo(ctx, c, argv, false)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	// A process group of its own lets cancellation reach the command's
	// children (sh -c 'sleep 600' would otherwise leave the sleep running).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	cmd.Dir = c.Dir
	if len(c.Env) > 0 {
		cmd.Env = os.Environ()
		for k, v := range c.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	cmd.Stdin = c.Stdin
	limit := t.OutputCap
	if limit <= 0 {
		limit = transport.DefaultOutputCap
	}
	stdout := &transport.CappedBuffer{Cap: limit}
	stderr := &transport.CappedBuffer{Cap: limit}
	cmd.Stdout = transport.Tee(stdout, c.Stdout)
	cmd.Stderr = transport.Tee(stderr, c.Stderr)
	err := cmd.Run()
	res := transport.Result{
		Stdout:    stdout.Bytes(),
		Stderr:    stderr.Bytes(),
		Truncated: stdout.Truncated() || stderr.Truncated(),
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		res.ExitCode = -1
		return res, fmt.Errorf("%s: %s: %w", t.name, describe(argv), ctxErr)
	}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		res.ExitCode = exitErr.ExitCode()
	default:
		res.ExitCode = -1
		return res, fmt.Errorf("%s: start %s: %w", t.name, describe(argv), err)
	}
	return res, nil
}

func describe(argv []string) string {
	if len(argv) >= 3 && argv[0] == "/bin/sh" && argv[1] == "-c" {
		s := argv[2]
		if len(s) > 80 {
			s = s[:77] + "..."
		}
		return strconv.Quote(s)
	}
	return strconv.Quote(argv[0])
}

// Put implements transport.Transport.
func (t *Transport) Put(ctx context.Context, src io.Reader, dst string, opts transport.PutOptions) error {
	if t.needSudo(opts.Become, "") {
		return t.putWithSudo(ctx, src, dst, opts)
	}
	mode := opts.Mode
	if mode == 0 {
		mode = 0o644
	}
	dir := filepath.Dir(dst)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%s: create %s: %w", t.name, dir, err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(dst)+".kubexm-*")
	if err != nil {
		return fmt.Errorf("%s: write %s: %w", t.name, dst, err)
	}
	defer os.Remove(tmp.Name()) // no-op once renamed
	if _, err := io.Copy(tmp, transport.ContextReader(ctx, src)); err != nil {
		tmp.Close()
		return fmt.Errorf("%s: write %s: %w", t.name, dst, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("%s: chmod %s: %w", t.name, dst, err)
	}
	if opts.Owner != "" || opts.Group != "" {
		uid, gid, err := lookupOwner(opts.Owner, opts.Group)
		if err != nil {
			tmp.Close()
			return fmt.Errorf("%s: %s: %w", t.name, dst, err)
		}
		if err := tmp.Chown(uid, gid); err != nil {
			tmp.Close()
			return fmt.Errorf("%s: chown %s: %w", t.name, dst, err)
		}
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("%s: write %s: %w", t.name, dst, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("%s: write %s: %w", t.name, dst, err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("%s: write %s: %w", t.name, dst, err)
	}
	return nil
}

// putWithSudo streams src into a script run through sudo that writes a
// temporary file beside dst and renames it into place, so readers never see
// a partly written file.
func (t *Transport) putWithSudo(ctx context.Context, src io.Reader, dst string, opts transport.PutOptions) error {
	mode := opts.Mode
	if mode == 0 {
		mode = 0o644
	}
	res, err := t.Run(ctx, transport.AtomicWriteCommand(src, dst, mode, opts.Owner, opts.Group))
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("%s: write %s: %s", t.name, dst, bytes.TrimSpace(res.Stderr))
	}
	return nil
}

// PutFile implements transport.Transport.
func (t *Transport) PutFile(ctx context.Context, localPath, dst string, opts transport.PutOptions) (bool, error) {
	want, err := transport.FileSha256(localPath)
	if err != nil {
		return false, fmt.Errorf("%s: %w", t.name, err)
	}
	if want == "" {
		return false, fmt.Errorf("%s: source %s does not exist", t.name, localPath)
	}
	have, err := t.Sha256(ctx, dst, opts.Become)
	if err != nil {
		return false, err
	}
	if have == want {
		same, err := t.metaMatches(ctx, dst, opts)
		if err != nil || same {
			return false, err
		}
	}
	f, err := os.Open(localPath)
	if err != nil {
		return false, fmt.Errorf("%s: %w", t.name, err)
	}
	defer f.Close()
	return true, t.Put(ctx, f, dst, opts)
}

func (t *Transport) metaMatches(ctx context.Context, dst string, opts transport.PutOptions) (bool, error) {
	fi, err := t.Stat(ctx, dst, opts.Become)
	if err != nil {
		return false, err
	}
	mode := opts.Mode
	if mode == 0 {
		mode = 0o644
	}
	if fi.Mode != mode {
		return false, nil
	}
	if opts.Owner != "" && fi.Owner != opts.Owner && fi.Owner != idName(opts.Owner, userName) {
		return false, nil
	}
	if opts.Group != "" && fi.Group != opts.Group && fi.Group != idName(opts.Group, groupName) {
		return false, nil
	}
	return true, nil
}

// idName turns a numeric owner or group ("0") into the name Stat reports
// ("root"), so a file already owned by that id is not rewritten on every
// run. Names are returned as they are.
func idName(s string, name func(uint32) string) string {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return s
	}
	return name(uint32(n))
}

// Get implements transport.Transport.
func (t *Transport) Get(ctx context.Context, src string, w io.Writer, become bool) error {
	if t.needSudo(become, "") {
		res, err := t.Run(ctx, transport.Command{Argv: []string{"cat", "--", src}, Become: true, Stdout: w})
		if err != nil {
			return err
		}
		if res.ExitCode != 0 {
			return fmt.Errorf("%s: read %s: %s", t.name, src, bytes.TrimSpace(res.Stderr))
		}
		return nil
	}
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("%s: %w", t.name, err)
	}
	defer f.Close()
	if _, err := io.Copy(w, transport.ContextReader(ctx, f)); err != nil {
		return fmt.Errorf("%s: read %s: %w", t.name, src, err)
	}
	return nil
}

// Stat implements transport.Transport. Reading metadata needs no privilege
// beyond search permission on the parents, so become is used only when that
// is missing.
func (t *Transport) Stat(ctx context.Context, path string, become bool) (transport.FileInfo, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return transport.FileInfo{}, nil
	}
	if errors.Is(err, fs.ErrPermission) && t.needSudo(become, "") {
		return transport.StatCommand(ctx, t, path)
	}
	if err != nil {
		return transport.FileInfo{}, fmt.Errorf("%s: %w", t.name, err)
	}
	info := transport.FileInfo{
		Exists:  true,
		IsDir:   fi.IsDir(),
		IsLink:  fi.Mode()&fs.ModeSymlink != 0,
		Mode:    fi.Mode().Perm() | fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky),
		Size:    fi.Size(),
		ModTime: fi.ModTime(),
	}
	if info.IsLink {
		info.LinkTarget, _ = os.Readlink(path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		info.Owner = userName(st.Uid)
		info.Group = groupName(st.Gid)
	}
	return info, nil
}

// StatMany implements transport.ManyStater: on this machine reading a
// path costs no round trip, so the paths are read one after the other.
func (t *Transport) StatMany(ctx context.Context, paths []string, become bool) ([]transport.StatEntry, error) {
	out := make([]transport.StatEntry, len(paths))
	for i, p := range paths {
		fi, err := t.Stat(ctx, p, become)
		if err != nil {
			return nil, err
		}
		out[i].Info = fi
		// A directory that does not exist has no canonical form: Real stays
		// empty, which overlaps everything.
		if dir, err := filepath.EvalSymlinks(filepath.Dir(filepath.Clean(p))); err == nil {
			out[i].Real = transport.RealJoin(dir, p)
		}
	}
	return out, nil
}

// SumTree implements transport.TreeSummer in Go: the control machine may
// have no shell (the in-cluster controller's image holds only kubexm).
// As find -type f: dir itself may be a symbolic link, the links below it
// are not followed.
func (t *Transport) SumTree(ctx context.Context, dir string, become bool) (map[string]string, bool, error) {
	if t.needSudo(become, "") {
		return transport.SumTreeCommand(ctx, t, dir, become)
	}
	root, err := filepath.EvalSymlinks(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]string{}, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", t.name, err)
	}
	if fi, err := os.Stat(root); err != nil {
		return nil, false, fmt.Errorf("%s: %w", t.name, err)
	} else if !fi.IsDir() {
		return nil, false, fmt.Errorf("%s: %s is not a directory", t.name, dir)
	}
	files := map[string]string{}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		sum, err := t.Sha256(ctx, p, false)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = sum
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("%s: list %s: %w", t.name, dir, err)
	}
	return files, true, nil
}

// MkdirAll implements transport.DirMaker in Go, as SumTree does.
func (t *Transport) MkdirAll(ctx context.Context, dirs []string, mode fs.FileMode, become bool) error {
	if t.needSudo(become, "") {
		return transport.MkdirAllCommand(ctx, t, dirs, mode, become)
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, mode); err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
	}
	return nil
}

// Sha256 implements transport.Transport.
func (t *Transport) Sha256(ctx context.Context, path string, become bool) (string, error) {
	if t.needSudo(become, "") {
		// Exit 3 tells "no such file" apart from a failure to read it.
		script := `[ -f "$1" ] || exit 3; sha256sum -- "$1"`
		res, err := t.Run(ctx, transport.Command{Argv: []string{"/bin/sh", "-c", script, "sh", path}, Become: true})
		if err != nil {
			return "", err
		}
		if res.ExitCode == 3 {
			return "", nil
		}
		if res.ExitCode != 0 || len(res.Stdout) < 64 {
			return "", fmt.Errorf("%s: sha256 %s: %s", t.name, path, bytes.TrimSpace(res.Stderr))
		}
		return string(res.Stdout[:64]), nil
	}
	if t.sums != nil {
		fi, err := os.Stat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return "", nil
		case err == nil && fi.Mode().IsRegular():
			sum, err := t.sums.Sum(path)
			if err != nil {
				return "", fmt.Errorf("%s: %w", t.name, err)
			}
			return sum, nil
		}
	}
	sum, err := transport.FileSha256(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", t.name, err)
	}
	return sum, nil
}

func lookupOwner(owner, group string) (int, int, error) {
	uid, gid := -1, -1
	if owner != "" {
		n, err := strconv.Atoi(owner)
		if err != nil {
			u, lerr := user.Lookup(owner)
			if lerr != nil {
				return 0, 0, fmt.Errorf("no user %q: %w", owner, lerr)
			}
			n, _ = strconv.Atoi(u.Uid)
		}
		uid = n
	}
	if group != "" {
		n, err := strconv.Atoi(group)
		if err != nil {
			g, lerr := user.LookupGroup(group)
			if lerr != nil {
				return 0, 0, fmt.Errorf("no group %q: %w", group, lerr)
			}
			n, _ = strconv.Atoi(g.Gid)
		}
		gid = n
	}
	return uid, gid, nil
}

func userName(uid uint32) string {
	id := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(id); err == nil {
		return u.Username
	}
	return id
}

func groupName(gid uint32) string {
	id := strconv.FormatUint(uint64(gid), 10)
	if g, err := user.LookupGroupId(id); err == nil {
		return g.Name
	}
	return id
}

// InProcess says whether work for become runs in kubexm's own process (no
// sudo needed: file operations, and DialContext always), so a builtin may
// do in Go what it does with a script or a tool on a host.
func (t *Transport) InProcess(become bool) bool { return !t.needSudo(become, "") }

// DialContext implements transport.Dialer: the control machine dials
// directly.
func (t *Transport) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}
