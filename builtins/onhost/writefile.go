package onhost

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/internal/textdiff"
)

// Attrs are the ownership and permissions a task asks for; zero values
// leave the file's current setting alone.
type Attrs struct {
	Mode  fs.FileMode
	Owner string
	Group string
}

// AttrsFrom reads the mode, owner and group arguments.
func AttrsFrom(args step.Args) Attrs {
	return Attrs{Mode: args.Mode("mode"), Owner: args.String("owner"), Group: args.String("group")}
}

// AttrArgs are the arguments every file-writing builtin takes.
func AttrArgs() []step.Arg {
	return []step.Arg{
		{Name: "mode", Type: step.Mode, Doc: `Permissions, quoted octal such as "0644". Unset keeps the current mode (new files get 0644, directories 0755).`},
		{Name: "owner", Type: step.String, Doc: "User name or uid to own the path. Unset keeps the current owner."},
		{Name: "group", Type: step.String, Doc: "Group name or gid. Unset keeps the current group."},
	}
}

// FixAttrs brings an existing path's mode and owner to a; it returns what it
// changed (or would change in check mode).
func FixAttrs(ctx context.Context, env *step.Env, path string, fi transport.FileInfo, a Attrs) ([]string, error) {
	var changes []string
	if a.Mode != 0 && fi.Mode != a.Mode && !fi.IsLink {
		changes = append(changes, fmt.Sprintf("mode %04o -> %04o", fi.Mode, a.Mode))
		if !env.Check {
			if _, err := MustRun(ctx, env, "chmod", fmt.Sprintf("%04o", a.Mode), "--", path); err != nil {
				return nil, err
			}
		}
	}
	owner := a.Owner != "" && fi.Owner != a.Owner
	group := a.Group != "" && fi.Group != a.Group
	if (owner && IsNumeric(a.Owner)) || (group && IsNumeric(a.Group)) {
		// The transport reports names; a numeric request is compared by id.
		res, err := MustRun(ctx, env, "stat", "-c", "%u %g", "--", path)
		if err != nil {
			return nil, err
		}
		ids := strings.Fields(string(res.Stdout))
		if len(ids) == 2 {
			owner = owner && ids[0] != a.Owner
			group = group && ids[1] != a.Group
		}
	}
	if owner {
		changes = append(changes, fmt.Sprintf("owner %s -> %s", fi.Owner, a.Owner))
	}
	if group {
		changes = append(changes, fmt.Sprintf("group %s -> %s", fi.Group, a.Group))
	}
	if (owner || group) && !env.Check {
		spec := ""
		if owner {
			spec = a.Owner
		}
		if group {
			spec += ":" + a.Group
		}
		if _, err := MustRun(ctx, env, "chown", "-h", spec, "--", path); err != nil {
			return nil, err
		}
	}
	return changes, nil
}

// WriteOpts says how writeContent treats the destination.
type WriteOpts struct {
	Attrs
	Backup bool
	// Force false leaves an existing destination alone (copy's force: no).
	NoForce bool
}

// IsNumeric reports whether an owner or group is a numeric id.
func IsNumeric(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// SHA256Hex is b's SHA-256 in hex.
func SHA256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// WriteContent makes dest hold content: unchanged when the sha256 already
// matches (attributes are still corrected), a diff when env.Diff, nothing
// written in check mode.
func WriteContent(ctx context.Context, env *step.Env, dest string, content []byte, o WriteOpts) (step.Result, error) {
	fi, err := env.Target.Stat(ctx, dest, env.Become)
	if err != nil {
		return step.Result{}, err
	}
	if fi.IsDir {
		return step.Result{}, fmt.Errorf("%s: dest %s is a directory", env.Target.Host(), dest)
	}
	want := SHA256Hex(content)
	data := map[string]any{"dest": dest, "checksum": want, "size": len(content)}
	if fi.Exists {
		same := o.NoForce
		if !same {
			if same, err = sameContent(ctx, env, dest, fi, content, want); err != nil {
				return step.Result{}, err
			}
		}
		if same {
			changes, err := FixAttrs(ctx, env, dest, fi, o.Attrs)
			if err != nil {
				return step.Result{}, err
			}
			return step.Result{Changed: len(changes) > 0, Msg: strings.Join(changes, ", "), Data: data}, nil
		}
	}
	var res step.Result
	res.Data = data
	res.Changed = true
	if env.Diff {
		var old []byte
		if fi.Exists {
			if old, _, err = ReadFile(ctx, env, dest); err != nil {
				return step.Result{}, err
			}
		}
		res.Diff = textdiff.Unified(dest, old, content, fi.Exists)
	}
	if env.Check {
		res.Msg = "would write " + dest
		return res, nil
	}
	if o.Backup && fi.Exists {
		bak, err := BackupFile(ctx, env, dest)
		if err != nil {
			return step.Result{}, err
		}
		data["backup_file"] = bak
	}
	if err := env.Target.Put(ctx, bytes.NewReader(content), dest, PutOptions(env, fi, o.Attrs)); err != nil {
		return step.Result{}, err
	}
	res.Msg = "wrote " + dest
	return res, nil
}

// PutOptions keeps an existing file's mode and owner unless the task sets
// them, since Put replaces the file.
func PutOptions(env *step.Env, fi transport.FileInfo, a Attrs) transport.PutOptions {
	po := transport.PutOptions{Mode: a.Mode, Owner: a.Owner, Group: a.Group, Become: env.Become}
	if fi.Exists {
		if po.Mode == 0 {
			po.Mode = fi.Mode
		}
		if po.Owner == "" {
			po.Owner = fi.Owner
		}
		if po.Group == "" {
			po.Group = fi.Group
		}
	}
	return po
}

// BackupFile copies path to path.<timestamp>~ keeping its attributes.
func BackupFile(ctx context.Context, env *step.Env, path string) (string, error) {
	bak := path + "." + time.Now().UTC().Format("20060102T150405.000000000") + "~"
	if _, err := MustRun(ctx, env, "cp", "-p", "--", path, bak); err != nil {
		return "", err
	}
	return bak, nil
}

// ReadCompareMax is the largest file writeContent compares by reading it
// back rather than by its sha256 on the host: reading a configuration file
// or a unit over the connection's SFTP session costs no process on the
// host, while a sum is a command (a shell, stat and sha256sum).
const ReadCompareMax = 256 << 10

// sameContent says whether the regular file dest (fi, as Stat read it)
// holds exactly content, whose sha256 is want: a file of another size
// does not, and is not read; a small one is read back and compared byte
// for byte. An empty one (an empty size is also what a device, a FIFO or a
// socket shows: reading one could block, and replacing it must fail as it
// did), a large one or a symbolic link is compared by the sha256 of what
// it holds, which refuses what is not a regular file.
func sameContent(ctx context.Context, env *step.Env, dest string, fi transport.FileInfo, content []byte, want string) (bool, error) {
	if !fi.IsLink && fi.Size > 0 {
		if fi.Size != int64(len(content)) {
			return false, nil
		}
		if fi.Size <= ReadCompareMax {
			var buf bytes.Buffer
			buf.Grow(len(content))
			if err := env.Target.Get(ctx, dest, &buf, env.Become); err != nil {
				return false, err
			}
			return bytes.Equal(buf.Bytes(), content), nil
		}
	}
	have, err := env.Target.Sha256(ctx, dest, env.Become)
	if err != nil {
		return false, err
	}
	return have == want, nil
}
