package transfer

import (
	"context"
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"github.com/mensylisir/kubexm/builtins/onhost"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
)

// distributeBuiltin's relay coordinates host-to-host transfers across the
// hosts of a run (nil: direct uploads only).
type distributeBuiltin struct{ relay *relays }

func newDistribute() distributeBuiltin { return distributeBuiltin{relay: &relays{}} }

func (distributeBuiltin) Spec() step.Spec {
	return step.Spec{
		Name:    "distribute",
		Summary: "Send one control-machine file (a binary, an image tarball) to the host, skipped where the checksum matches.",
		Doc: "Meant for large artifacts: the file is streamed without being read into memory and without a diff. " +
			"The host's sha256 comes from the transport's record of it while the file's stat is unchanged (see the guide), so a " +
			"re-run does not read an unchanged file again; a file of 1 MiB or more that it sends is recorded as it is put in place, so the " +
			"next run does not read it either. In a loop, the items already in place on a host (content, mode, " +
			"owner and group) are found in one command for all of them, so a re-run of a loop over 18 files is one round trip. " +
			"The engine runs the task on all hosts in parallel. A relative src is looked up in the work directory " +
			"(where `download` puts artifacts), then in the role's files/. " +
			"With `relay` (the default) a file of 8 MiB or more is passed host to host: the control machine uploads it " +
			"to two hosts, and every host that has it (sha256 verified) sends it to up to two others at a time over " +
			"the hosts' `internal_address`, so the control machine's upload stays about twice the file whatever the " +
			"number of hosts and the time grows with the logarithm of it. A transfer is a listener on the sending " +
			"host (`systemd-socket-activate` on a random port from 20000, serving only a client that presents a " +
			"one-time token; the file is readable on the internal network by that client for the transfer's " +
			"duration) and `bash` with `/dev/tcp` on the receiving host, which writes a temporary file and renames it " +
			"into place only when its sha256 matches. A host that cannot reach the sender, or receives other bytes, " +
			"tries another sender, then gets a direct upload.",
		Args: append([]step.Arg{
			{Name: "src", Type: step.String, Required: true, Doc: "File on the control machine."},
			{Name: "dest", Type: step.String, Required: true, Doc: "Path on the host; a trailing / appends src's base name."},
			{Name: "relay", Type: step.Bool, Default: true, Doc: "Pass a large file host to host instead of uploading it to every host."},
		}, onhost.AttrArgs()...),
		Examples: []string{"distribute:\n  src: kubernetes/{{ .kube_version }}/{{ .arch }}/kubelet\n  dest: /usr/local/bin/kubelet\n  mode: \"0755\""},
	}
}

func (d distributeBuiltin) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	src, err := archivePath(ctx, env, args.String("src"))
	want := ""
	if err == nil {
		want, err = env.Control.Sha256(ctx, src, false)
	}
	if env.Check && (err != nil || want == "") {
		return notYet(env, "send "+args.String("src")+" to "+args.String("dest"), err, map[string]any{"dest": args.String("dest")}), nil
	}
	if err != nil {
		return step.Result{}, fmt.Errorf("distribute: %w", err)
	}
	if want == "" {
		return step.Result{}, fmt.Errorf("distribute: src %s does not exist on the control machine", src)
	}
	dest := args.String("dest")
	if strings.HasSuffix(dest, "/") {
		dest = path.Join(dest, filepath.Base(src))
	}
	data := map[string]any{"dest": dest, "checksum": want}
	a := onhost.AttrsFrom(args)
	if a.Mode == 0 {
		a.Mode = 0o644
	}
	large := false
	if d.relay != nil && args.Bool("relay") {
		fi, err := env.Control.Stat(ctx, src, false)
		if err != nil {
			return step.Result{}, fmt.Errorf("distribute: %w", err)
		}
		large = fi.Size >= relayMinSize
	}
	opts := transport.PutOptions{Mode: a.Mode, Owner: a.Owner, Group: a.Group, Become: env.Become}
	if !large && !env.Check {
		// PutFile compares the sum (from the transport's record while the
		// file is unchanged) and the attributes in one round trip, and sends
		// the file only when they differ.
		changed, err := env.Target.PutFile(ctx, src, dest, opts)
		if err != nil {
			return step.Result{}, err
		}
		res := step.Result{Changed: changed, Data: data}
		if changed {
			res.Msg = "sent " + src + " to " + dest
		}
		return res, nil
	}
	// One sum on the host (from the transport's record of it when the file
	// is unchanged since): a host that has the file gets only its attributes
	// fixed, and serves it to others.
	have, err := env.Target.Sha256(ctx, dest, env.Become)
	if err != nil {
		return step.Result{}, err
	}
	if have == want {
		fi, err := env.Target.Stat(ctx, dest, env.Become)
		if err != nil {
			return step.Result{}, err
		}
		changes, err := onhost.FixAttrs(ctx, env, dest, fi, a)
		if err != nil {
			return step.Result{}, err
		}
		if large && !env.Check {
			d.relay.hold(want, &holder{host: env.Target.Host(), addr: relayAddr(env), path: dest, t: env.Target, become: env.Become})
		}
		return onhost.Done(env, changes, data, ""), nil
	}
	if env.Check {
		return step.Result{Changed: true, Msg: "would send " + src + " to " + dest, Data: data}, nil
	}
	from, err := d.relay.sendRelayed(ctx, env, src, want, dest, opts)
	if err != nil {
		return step.Result{}, err
	}
	data["from"] = from
	return step.Result{Changed: true, Msg: "sent " + src + " to " + dest + " (from " + from + ")", Data: data}, nil
}
