package ssh

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"

	"github.com/pkg/sftp"

	"github.com/mensylisir/kubexm/engine/transport"
)

// Put implements transport.Transport.
func (t *Transport) Put(ctx context.Context, src io.Reader, dst string, opts transport.PutOptions) error {
	release, err := t.uploadSlot(ctx)
	if err != nil {
		return fmt.Errorf("%s: write %s: %w", t.name, dst, err)
	}
	defer release()
	return t.put(ctx, src, dst, opts, "")
}

func (t *Transport) uploadSlot(ctx context.Context) (func(), error) {
	if t.opts.UploadSlots == nil {
		return func() {}, nil
	}
	select {
	case t.opts.UploadSlots <- struct{}{}:
		return func() { <-t.opts.UploadSlots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// put writes src to dst through a temporary file renamed into place. With
// sum (src's sha256, for a file of at least recordMinSize) the host records
// it for dst where the transport keeps records (recordFunc).
func (t *Transport) put(ctx context.Context, src io.Reader, dst string, opts transport.PutOptions, sum string) error {
	if opts.Mode == 0 {
		opts.Mode = 0o644
	}
	rec := ""
	if sum != "" {
		rec = t.installRecord(ctx, dst, sum, opts.Become)
	}
	if t.needSudo(opts.Become, "") {
		return t.putWithSudo(ctx, src, dst, opts, rec, sum)
	}
	cl, _, err := t.sftpClient(ctx)
	if err != nil {
		return err
	}
	tmp, err := t.tempFile(ctx, dst)
	if err != nil {
		return err
	}
	// The temporary file exists, empty and 0600, before anything is
	// written: sftp cannot create a file with a mode, and a file created
	// 0644 and chmod'ed afterwards could be opened by anyone in between.
	f, err := cl.OpenFile(tmp, os.O_WRONLY|os.O_TRUNC)
	if err != nil {
		cl.Remove(tmp)
		return fmt.Errorf("%s: write %s: %w", t.name, dst, err)
	}
	renamed := false
	defer func() {
		if !renamed {
			cl.Remove(tmp)
		}
	}()
	if _, err := f.ReadFromWithConcurrency(transport.ContextReader(ctx, src), 64); err != nil {
		f.Close()
		return fmt.Errorf("%s: write %s: %w", t.name, dst, err)
	}
	if err := f.Chmod(opts.Mode); err != nil {
		f.Close()
		return fmt.Errorf("%s: chmod %s: %w", t.name, dst, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%s: write %s: %w", t.name, dst, err)
	}
	if opts.Owner != "" || opts.Group != "" {
		if err := t.chown(ctx, tmp, opts, false); err != nil {
			return fmt.Errorf("%s: chown %s: %w", t.name, dst, err)
		}
	}
	if rec != "" {
		// The rename and the record's stat in one command.
		err = t.RenameSum(ctx, tmp, dst, sum, opts.Become)
	} else if _, ok := cl.HasExtension("posix-rename@openssh.com"); ok {
		err = cl.PosixRename(tmp, dst)
	} else {
		err = cl.Rename(tmp, dst)
		if err != nil {
			cl.Remove(dst)
			err = cl.Rename(tmp, dst)
		}
	}
	if err != nil {
		return fmt.Errorf("%s: write %s: %w", t.name, dst, err)
	}
	renamed = true
	return nil
}

// tempFile creates dst's directory and an empty temporary file beside dst,
// readable and writable by the login user only, and returns its path.
func (t *Transport) tempFile(ctx context.Context, dst string) (string, error) {
	const script = `mkdir -p -- "$1" && mktemp -- "$1/.$2.kubexm-XXXXXX"`
	res, err := t.Run(ctx, transport.Command{Argv: []string{"/bin/sh", "-c", script, "sh", path.Dir(dst), path.Base(dst)}})
	if err != nil {
		return "", fmt.Errorf("%s: write %s: %w", t.name, dst, err)
	}
	tmp := strings.TrimSpace(string(res.Stdout))
	if res.ExitCode != 0 || !strings.HasPrefix(tmp, path.Dir(dst)+"/.") {
		return "", fmt.Errorf("%s: write %s: creating a temporary file: %s", t.name, dst, bytes.TrimSpace(res.Stderr))
	}
	return tmp, nil
}

func (t *Transport) chown(ctx context.Context, p string, opts transport.PutOptions, become bool) error {
	spec := opts.Owner
	if opts.Group != "" {
		spec += ":" + opts.Group
	}
	res, err := t.Run(ctx, transport.Command{Argv: []string{"chown", "--", spec, p}, Become: become})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return errors.New(string(bytes.TrimSpace(res.Stderr)))
	}
	return nil
}

// putWithSudo streams src into a root-run script: sftp would write as the
// login user, who usually may not write the target. With rec the script
// records sum for dst right after its rename (recordFunc).
func (t *Transport) putWithSudo(ctx context.Context, src io.Reader, dst string, opts transport.PutOptions, rec, sum string) error {
	cmd := transport.AtomicWriteCommand(src, dst, opts.Mode, opts.Owner, opts.Group)
	if rec != "" {
		cmd = transport.AtomicWriteThen(src, dst, opts.Mode, opts.Owner, opts.Group,
			recordFunc, `kxrec "$1" "$4" "$5" || :`, rec, strings.ToLower(sum))
	}
	res, err := t.Run(ctx, cmd)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("%s: write %s: %s", t.name, dst, bytes.TrimSpace(res.Stderr))
	}
	return nil
}

// PutFile implements transport.Transport. The remote sum, mode and owner
// come back in one command; only content changes are transferred.
func (t *Transport) PutFile(ctx context.Context, localPath, dst string, opts transport.PutOptions) (bool, error) {
	want, err := t.opts.Sums.Sum(localPath)
	if err != nil {
		return false, fmt.Errorf("%s: %w", t.name, err)
	}
	if opts.Mode == 0 {
		opts.Mode = 0o644
	}
	script := sumFunc + `kxsum "$1" "$2" "$3"; s=$?; [ $s = 4 ] && s=3; [ $s = 0 ] || exit $s; stat -c '%a %U %G %u %g' -- "$1"`
	res, err := t.Run(ctx, transport.Command{Argv: append([]string{"/bin/sh", "-c", script, "sh"}, t.sumArgs(ctx, dst, opts.Become)...), Become: opts.Become})
	if err != nil {
		return false, err
	}
	if res.ExitCode != 0 && res.ExitCode != 3 {
		return false, fmt.Errorf("%s: sha256 %s: %s", t.name, dst, bytes.TrimSpace(res.Stderr))
	}
	if res.ExitCode == 0 {
		lines := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
		if len(lines) == 2 && len(lines[0]) >= 64 && lines[0][:64] == want {
			fixMode, fixOwner := metaDiffers(lines[1], opts)
			if !fixMode && !fixOwner {
				return false, nil
			}
			if fixMode {
				if err := t.chmod(ctx, dst, opts); err != nil {
					return false, fmt.Errorf("%s: chmod %s: %w", t.name, dst, err)
				}
			}
			if fixOwner {
				if err := t.chown(ctx, dst, opts, opts.Become); err != nil {
					return false, fmt.Errorf("%s: chown %s: %w", t.name, dst, err)
				}
			}
			return true, nil
		}
	}
	f, err := os.Open(localPath)
	if err != nil {
		return false, fmt.Errorf("%s: %w", t.name, err)
	}
	defer f.Close()
	release, err := t.uploadSlot(ctx)
	if err != nil {
		return false, fmt.Errorf("%s: write %s: %w", t.name, dst, err)
	}
	defer release()
	record := ""
	if fi, err := f.Stat(); err == nil && fi.Size() >= recordMinSize {
		record = want
	}
	// *os.File (with its Stat) lets sftp size its concurrent writes.
	if err := t.put(ctx, f, dst, opts, record); err != nil {
		return false, err
	}
	return true, nil
}

func (t *Transport) chmod(ctx context.Context, p string, opts transport.PutOptions) error {
	res, err := t.Run(ctx, transport.Command{Argv: []string{"chmod", fmt.Sprintf("%04o", transport.UnixMode(opts.Mode)), "--", p}, Become: opts.Become})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return errors.New(string(bytes.TrimSpace(res.Stderr)))
	}
	return nil
}

// metaDiffers compares a `stat -c '%a %U %G %u %g'` line with opts.
func metaDiffers(line string, opts transport.PutOptions) (mode, owner bool) {
	f := strings.Fields(line)
	if len(f) != 5 {
		return true, opts.Owner != "" || opts.Group != ""
	}
	have, err := strconv.ParseUint(f[0], 8, 32)
	mode = err != nil || uint32(have) != transport.UnixMode(opts.Mode)
	owner = opts.Owner != "" && opts.Owner != f[1] && opts.Owner != f[3] ||
		opts.Group != "" && opts.Group != f[2] && opts.Group != f[4]
	return mode, owner
}

// Get implements transport.Transport.
func (t *Transport) Get(ctx context.Context, src string, w io.Writer, become bool) error {
	if t.needSudo(become, "") {
		res, err := t.run(ctx, transport.Command{Argv: []string{"cat", "--", src}, Become: true, Stdout: transport.ContextWriter(ctx, w)}, runMode{})
		if err != nil {
			return err
		}
		if res.ExitCode != 0 {
			return fmt.Errorf("%s: read %s: %s", t.name, src, bytes.TrimSpace(res.Stderr))
		}
		return nil
	}
	cl, _, err := t.sftpClient(ctx)
	if err != nil {
		return err
	}
	f, err := cl.Open(src)
	if err != nil {
		return fmt.Errorf("%s: read %s: %w", t.name, src, err)
	}
	defer f.Close()
	if _, err := f.WriteTo(transport.ContextWriter(ctx, w)); err != nil {
		return fmt.Errorf("%s: read %s: %w", t.name, src, err)
	}
	return nil
}

// Stat implements transport.Transport. Without become it is one SFTP
// request (names from the host's passwd/group, read once); with become a
// stat command run through sudo, for paths the login user cannot reach.
func (t *Transport) Stat(ctx context.Context, p string, become bool) (transport.FileInfo, error) {
	if t.needSudo(become, "") {
		return transport.StatCommand(ctx, t, p)
	}
	cl, _, err := t.sftpClient(ctx)
	if err != nil {
		return transport.FileInfo{}, err
	}
	return t.statSFTP(ctx, cl, p)
}

// StatMany implements transport.ManyStater. Without become the paths and
// their directories' canonical forms are SFTP requests sent at once on the
// one connection, so many paths take about one round trip; with become it
// is one stat command through sudo.
func (t *Transport) StatMany(ctx context.Context, paths []string, become bool) ([]transport.StatEntry, error) {
	if t.needSudo(become, "") {
		return transport.StatManyCommand(ctx, t, paths, become)
	}
	cl, _, err := t.sftpClient(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]transport.StatEntry, len(paths))
	errs := make([]error, len(paths))
	slots := make(chan struct{}, sftpConcurrency)
	var wg sync.WaitGroup
	for i, p := range paths {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			if out[i].Info, errs[i] = t.statSFTP(ctx, cl, p); errs[i] != nil {
				return
			}
			// A directory that does not exist has no canonical form: Real
			// stays empty, which overlaps everything.
			if dir, err := cl.RealPath(path.Dir(path.Clean(p))); err == nil {
				out[i].Real = transport.RealJoin(dir, p)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// sftpConcurrency bounds the SFTP requests StatMany has in flight, well
// under what sftp-server queues.
const sftpConcurrency = 32

func (t *Transport) statSFTP(ctx context.Context, cl *sftp.Client, p string) (transport.FileInfo, error) {
	fi, err := cl.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return transport.FileInfo{}, nil
	}
	if err != nil {
		return transport.FileInfo{}, fmt.Errorf("%s: stat %s: %w", t.name, p, err)
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
		info.LinkTarget, _ = cl.ReadLink(p)
	}
	if st, ok := fi.Sys().(*sftp.FileStat); ok {
		info.Owner, info.Group = t.names.lookup(ctx, t, cl, st.UID, st.GID)
	}
	return info, nil
}

// Sha256 implements transport.Transport.
func (t *Transport) Sha256(ctx context.Context, p string, become bool) (string, error) {
	script := sumFunc + `kxsum "$1" "$2" "$3"`
	res, err := t.Run(ctx, transport.Command{Argv: append([]string{"/bin/sh", "-c", script, "sh"}, t.sumArgs(ctx, p, become)...), Become: become})
	if err != nil {
		return "", err
	}
	switch {
	case res.ExitCode == 3:
		return "", nil
	case res.ExitCode == 4:
		return "", fmt.Errorf("%s: %s is not a regular file", t.name, p)
	case res.ExitCode != 0 || len(res.Stdout) < 64:
		return "", fmt.Errorf("%s: sha256 %s: %s", t.name, p, bytes.TrimSpace(res.Stderr))
	}
	return string(res.Stdout[:64]), nil
}

// sumManyLoop runs kxsum on each (path, record, ro) triple of its arguments
// and prints, each NUL-terminated, kxsum's output, its status and for a
// regular file `stat -c '%a %U %G %u %g'`. Printed as they come rather
// than captured: every $(...) would be one more process per file.
const sumManyLoop = `while [ $# -ge 3 ]; do
kxsum "$1" "$2" "$3"; s=$?
printf '\000%s\000' $s
[ $s = 0 ] && stat -c '%a %U %G %u %g' -- "$1"
printf '\000'
shift 3
done`

// sumRecordsScript, for N paths and their N records as arguments after N,
// prints each record's two lines (the stat it was taken at, the sum) and
// then one `stat -L` of every path that exists: its name, type, the stat
// kxsum compares and the attributes, all NUL-terminated. Two processes
// whatever the number of files (the records are read by the shell itself):
// a re-run whose files are all unchanged needs nothing else.
const sumRecordsScript = `n=$1; shift
i=0; while [ $i -lt $n ]; do p=$1; shift; set -- "$@" "$p"; i=$((i+1)); done
i=0; while [ $i -lt $n ]; do
rs= rsum=
[ -f "$1" ] && { IFS= read -r rs; IFS= read -r rsum; } <"$1"
printf '%s\000%s\000' "$rs" "$rsum"
shift; i=$((i+1))
done
stat -L --printf '%n\000%F\000%s %i %d %y %z\000%a %U %G %u %g\000' -- "$@" 2>/dev/null
exit 0`

// SumMany implements transport.ManySummer. With sum records (root or
// become) the records and one stat of every path decide which files are
// unchanged since their sum was recorded, in two processes on the host;
// other files, and every file without records, are left to kxsum, one
// after the other in the same command.
func (t *Transport) SumMany(ctx context.Context, paths []string, become bool) ([]transport.FileSum, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	out, rest, err := t.sumsFromRecords(ctx, paths, become)
	if err != nil || len(rest) == 0 {
		return out, err
	}
	argv := append(make([]string, 0, 4+3*len(rest)), "/bin/sh", "-c", sumFunc+sumManyLoop, "sh")
	for _, i := range rest {
		argv = append(argv, t.sumArgs(ctx, paths[i], become)...)
	}
	res, err := t.Run(ctx, transport.Command{Argv: argv, Become: become})
	if err != nil {
		return nil, err
	}
	recs := strings.Split(string(res.Stdout), "\x00")
	if res.ExitCode != 0 || len(recs) != 3*len(rest)+1 {
		return nil, fmt.Errorf("%s: sha256 of %d files: exit %d, %d fields: %s", t.name, len(rest), res.ExitCode, len(recs)-1, bytes.TrimSpace(res.Stderr))
	}
	for k, i := range rest {
		printed, status := recs[3*k], recs[3*k+1]
		if status == "0" && len(printed) >= 64 {
			out[i] = fileSum(printed[:64], recs[3*k+2])
		}
	}
	return out, nil
}

// sumsFromRecords reads the sums of the paths that are as their records
// say; rest are the indexes of the others (every path when there are no
// records).
func (t *Transport) sumsFromRecords(ctx context.Context, paths []string, become bool) (out []transport.FileSum, rest []int, err error) {
	out = make([]transport.FileSum, len(paths))
	argv := append(make([]string, 0, 4+2*len(paths)), "/bin/sh", "-c", sumRecordsScript, "sh", strconv.Itoa(len(paths)))
	argv = append(argv, paths...)
	for _, p := range paths {
		r := t.sumRecord(p, become)
		if r == "" {
			rest = make([]int, len(paths))
			for i := range rest {
				rest[i] = i
			}
			return out, rest, nil
		}
		argv = append(argv, r)
	}
	res, err := t.Run(ctx, transport.Command{Argv: argv, Become: become})
	if err != nil {
		return nil, nil, err
	}
	recs := strings.Split(string(res.Stdout), "\x00")
	if res.ExitCode != 0 || len(recs) < 2*len(paths)+1 || (len(recs)-1-2*len(paths))%4 != 0 {
		return nil, nil, fmt.Errorf("%s: sum records of %d files: exit %d, %d fields: %s", t.name, len(paths), res.ExitCode, len(recs)-1, bytes.TrimSpace(res.Stderr))
	}
	type statRec struct{ kind, key, meta string }
	stats := map[string]statRec{}
	for f := recs[2*len(paths) : len(recs)-1]; len(f) >= 4; f = f[4:] {
		stats[f[0]] = statRec{f[1], f[2], f[3]}
	}
	for i, p := range paths {
		rs, rsum := recs[2*i], recs[2*i+1]
		st, ok := stats[p]
		if ok && (st.kind == "regular file" || st.kind == "regular empty file") && rs != "" && rs == st.key && transport.IsSHA256Hex(rsum) {
			out[i] = fileSum(rsum, st.meta)
			continue
		}
		rest = append(rest, i)
	}
	return out, rest, nil
}

// fileSum is a FileSum from a sum and a `stat -c '%a %U %G %u %g'` line;
// the zero FileSum (not in place) when the line is not one.
func fileSum(sum, meta string) transport.FileSum {
	f := strings.Fields(meta)
	if len(f) != 5 {
		return transport.FileSum{}
	}
	mode, err := strconv.ParseUint(f[0], 8, 32)
	if err != nil {
		return transport.FileSum{}
	}
	return transport.FileSum{Sum: sum, Mode: uint32(mode), Owner: f[1], Group: f[2], UID: f[3], GID: f[4]}
}

// idNames maps a host's uids and gids to names: /etc/passwd and /etc/group
// are read once over SFTP; ids not there (directory services) are asked of
// getent.
type idNames struct {
	mu     sync.Mutex
	loaded bool
	users  map[uint32]string
	groups map[uint32]string
}

func (n *idNames) lookup(ctx context.Context, t *Transport, cl *sftp.Client, uid, gid uint32) (string, string) {
	n.mu.Lock()
	if !n.loaded {
		n.users = readIDFile(cl, "/etc/passwd")
		n.groups = readIDFile(cl, "/etc/group")
		n.loaded = true
	}
	u, uok := n.users[uid]
	g, gok := n.groups[gid]
	n.mu.Unlock()
	if !uok {
		u = t.getent(ctx, "passwd", uid)
		n.mu.Lock()
		n.users[uid] = u
		n.mu.Unlock()
	}
	if !gok {
		g = t.getent(ctx, "group", gid)
		n.mu.Lock()
		n.groups[gid] = g
		n.mu.Unlock()
	}
	return u, g
}

func (t *Transport) getent(ctx context.Context, db string, id uint32) string {
	s := strconv.FormatUint(uint64(id), 10)
	res, err := t.Run(ctx, transport.Command{Argv: []string{"getent", db, s}})
	if err != nil || res.ExitCode != 0 {
		return s
	}
	if name, _, ok := strings.Cut(string(res.Stdout), ":"); ok && name != "" {
		return name
	}
	return s
}

func readIDFile(cl *sftp.Client, p string) map[uint32]string {
	out := map[uint32]string{}
	f, err := cl.Open(p)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 4)
		if len(parts) < 3 {
			continue
		}
		if id, err := strconv.ParseUint(parts[2], 10, 32); err == nil {
			if _, dup := out[uint32(id)]; !dup {
				out[uint32(id)] = parts[0]
			}
		}
	}
	return out
}
