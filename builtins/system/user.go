package system

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/mensylisir/kubexm/builtins/onhost"
	"github.com/mensylisir/kubexm/engine/step"
)

var accountName = regexp.MustCompile(`^[a-z_][a-z0-9_.\-]*\$?$`)

// passwdEntry is one line of getent passwd.
type passwdEntry struct {
	Name, UID, GID, Comment, Home, Shell string
}

func parsePasswd(line string) (passwdEntry, error) {
	f := strings.Split(strings.TrimSpace(line), ":")
	if len(f) != 7 {
		return passwdEntry{}, fmt.Errorf("unexpected passwd entry %q", line)
	}
	return passwdEntry{Name: f[0], UID: f[2], GID: f[3], Comment: f[4], Home: f[5], Shell: f[6]}, nil
}

// getent returns the entry's line, or "" when the database has none.
func getent(ctx context.Context, env *step.Env, db, key string) (string, error) {
	res, err := onhost.Run(ctx, env, "getent", db, key)
	if err != nil {
		return "", err
	}
	switch res.ExitCode {
	case 0:
		return strings.TrimSpace(string(res.Stdout)), nil
	case 2:
		return "", nil
	}
	return "", onhost.CmdError(env, []string{"getent", db, key}, res)
}

type userBuiltin struct{}

func (userBuiltin) Spec() step.Spec {
	return step.Spec{
		Name:    "user",
		Summary: "Create, modify or remove a local user (useradd/usermod/userdel).",
		Doc: "Only the attributes given are managed; an existing user's other settings are left alone. " +
			"`groups` adds supplementary groups and never removes any.",
		Args: []step.Arg{
			{Name: "name", Type: step.String, Required: true, Doc: "Login name."},
			{Name: "state", Type: step.String, Default: "present", Choices: []string{"present", "absent"}, Doc: "Whether the user exists."},
			{Name: "uid", Type: step.Int, Doc: "User id."},
			{Name: "group", Type: step.String, Doc: "Primary group (name or gid); it must exist."},
			{Name: "groups", Type: step.List, Doc: "Supplementary groups to add the user to."},
			{Name: "shell", Type: step.String, Doc: "Login shell, such as /sbin/nologin for service accounts."},
			{Name: "home", Type: step.String, Doc: "Home directory."},
			{Name: "comment", Type: step.String, Doc: "GECOS field."},
			{Name: "system", Type: step.Bool, Default: false, Doc: "Create a system account (id from the system range, no aging). Only used at creation."},
			{Name: "create_home", Type: step.Bool, Default: true, Doc: "Create the home directory when creating the user."},
			{Name: "remove", Type: step.Bool, Default: false, Doc: "With state: absent, also remove the home directory and mail spool."},
		},
		Examples: []string{"user:\n  name: etcd\n  system: true\n  shell: /sbin/nologin\n  home: /var/lib/etcd\n  create_home: false"},
	}
}

func (userBuiltin) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	name := args.String("name")
	if !accountName.MatchString(name) {
		return step.Result{}, fmt.Errorf("user: %q is not a valid user name", name)
	}
	line, err := getent(ctx, env, "passwd", name)
	if err != nil {
		return step.Result{}, err
	}
	data := map[string]any{"name": name}
	if args.String("state") == "absent" {
		if line == "" {
			return step.Result{Data: data}, nil
		}
		argv := []string{"userdel"}
		if args.Bool("remove") {
			argv = append(argv, "-r")
		}
		return apply(ctx, env, data, "remove user "+name, append(argv, name))
	}
	want := passwdEntry{Shell: args.String("shell"), Home: args.String("home"), Comment: args.String("comment")}
	if args.Has("uid") {
		want.UID = fmt.Sprint(args.Int("uid"))
	}
	if line == "" {
		argv := []string{"useradd"}
		if args.Bool("system") {
			argv = append(argv, "-r")
		}
		if args.Bool("create_home") {
			argv = append(argv, "-m")
		} else {
			argv = append(argv, "-M")
		}
		argv = append(argv, userOpts(args, want)...)
		if g := args.Strings("groups"); len(g) > 0 {
			argv = append(argv, "-G", strings.Join(g, ","))
		}
		return apply(ctx, env, data, "create user "+name, append(argv, name))
	}
	cur, err := parsePasswd(line)
	if err != nil {
		return step.Result{}, fmt.Errorf("%s: %w", env.Target.Host(), err)
	}
	data["uid"] = cur.UID
	var diff passwdEntry
	var what []string
	if want.UID != "" && want.UID != cur.UID {
		diff.UID, what = want.UID, append(what, "uid "+cur.UID+" -> "+want.UID)
	}
	if want.Shell != "" && want.Shell != cur.Shell {
		diff.Shell, what = want.Shell, append(what, "shell "+cur.Shell+" -> "+want.Shell)
	}
	if want.Home != "" && want.Home != cur.Home {
		diff.Home, what = want.Home, append(what, "home "+cur.Home+" -> "+want.Home)
	}
	if args.Has("comment") && want.Comment != cur.Comment {
		diff.Comment, what = want.Comment, append(what, "comment")
	}
	argv := []string{"usermod"}
	argv = append(argv, userOpts(step.Args{}, diff)...)
	if args.Has("group") {
		gid, err := groupID(ctx, env, args.String("group"))
		if err != nil {
			return step.Result{}, err
		}
		if gid != cur.GID {
			argv, what = append(argv, "-g", args.String("group")), append(what, "primary group "+args.String("group"))
		}
	}
	if add := args.Strings("groups"); len(add) > 0 {
		res, err := onhost.MustRun(ctx, env, "id", "-nG", name)
		if err != nil {
			return step.Result{}, err
		}
		have := strings.Fields(string(res.Stdout))
		var missing []string
		for _, g := range add {
			if !slices.Contains(have, g) {
				missing = append(missing, g)
			}
		}
		if len(missing) > 0 {
			argv, what = append(argv, "-a", "-G", strings.Join(missing, ",")), append(what, "add to "+strings.Join(missing, ","))
		}
	}
	if len(what) == 0 {
		return step.Result{Data: data}, nil
	}
	return apply(ctx, env, data, "modify user "+name+": "+strings.Join(what, ", "), append(argv, name))
}

func userOpts(args step.Args, e passwdEntry) []string {
	var argv []string
	if e.UID != "" {
		argv = append(argv, "-u", e.UID)
	}
	if args.Has("group") {
		argv = append(argv, "-g", args.String("group"))
	}
	if e.Shell != "" {
		argv = append(argv, "-s", e.Shell)
	}
	if e.Home != "" {
		argv = append(argv, "-d", e.Home)
	}
	if e.Comment != "" {
		argv = append(argv, "-c", e.Comment)
	}
	return argv
}

// groupID resolves a group name or gid to the gid, failing when the group
// does not exist.
func groupID(ctx context.Context, env *step.Env, g string) (string, error) {
	line, err := getent(ctx, env, "group", g)
	if err != nil {
		return "", err
	}
	f := strings.Split(line, ":")
	if line == "" || len(f) < 3 {
		return "", fmt.Errorf("%s: group %s does not exist (create it with the group builtin first)", env.Target.Host(), g)
	}
	return f[2], nil
}

// apply runs one mutating command unless in check mode.
func apply(ctx context.Context, env *step.Env, data map[string]any, change string, argv []string) (step.Result, error) {
	if !env.Check {
		if _, err := onhost.MustRun(ctx, env, argv...); err != nil {
			return step.Result{}, err
		}
	}
	return onhost.Done(env, []string{change}, data, ""), nil
}

type groupBuiltin struct{}

func (groupBuiltin) Spec() step.Spec {
	return step.Spec{
		Name:    "group",
		Summary: "Create, modify or remove a local group (groupadd/groupmod/groupdel).",
		Args: []step.Arg{
			{Name: "name", Type: step.String, Required: true, Doc: "Group name."},
			{Name: "state", Type: step.String, Default: "present", Choices: []string{"present", "absent"}, Doc: "Whether the group exists."},
			{Name: "gid", Type: step.Int, Doc: "Group id."},
			{Name: "system", Type: step.Bool, Default: false, Doc: "Create a system group. Only used at creation."},
		},
		Examples: []string{"group:\n  name: etcd\n  system: true"},
	}
}

func (groupBuiltin) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	name := args.String("name")
	if !accountName.MatchString(name) {
		return step.Result{}, fmt.Errorf("group: %q is not a valid group name", name)
	}
	line, err := getent(ctx, env, "group", name)
	if err != nil {
		return step.Result{}, err
	}
	data := map[string]any{"name": name}
	if args.String("state") == "absent" {
		if line == "" {
			return step.Result{Data: data}, nil
		}
		return apply(ctx, env, data, "remove group "+name, []string{"groupdel", name})
	}
	gid := ""
	if args.Has("gid") {
		gid = fmt.Sprint(args.Int("gid"))
	}
	if line == "" {
		argv := []string{"groupadd"}
		if args.Bool("system") {
			argv = append(argv, "-r")
		}
		if gid != "" {
			argv = append(argv, "-g", gid)
		}
		return apply(ctx, env, data, "create group "+name, append(argv, name))
	}
	f := strings.Split(line, ":")
	if len(f) < 3 {
		return step.Result{}, fmt.Errorf("%s: unexpected group entry %q", env.Target.Host(), line)
	}
	data["gid"] = f[2]
	if gid == "" || gid == f[2] {
		return step.Result{Data: data}, nil
	}
	return apply(ctx, env, data, fmt.Sprintf("group %s gid %s -> %s", name, f[2], gid), []string{"groupmod", "-g", gid, name})
}
