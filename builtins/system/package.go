package system

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/mensylisir/kubexm/builtins/onhost"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
)

type packageBuiltin struct{}

func (packageBuiltin) Spec() step.Spec {
	return step.Spec{
		Name:    "package",
		Summary: "Install, upgrade or remove OS packages with apt or dnf/yum.",
		Doc: "The manager is detected from /usr/bin/apt-get, /usr/bin/dnf or /usr/bin/yum unless `manager` is given. " +
			"Installed packages are queried first (dpkg-query, rpm -q), so only missing ones are installed. A name may " +
			"pin a version: `containerd=1.6.20-1` (apt) or `containerd-1.6.20` (dnf/yum).\n\n" +
			"`offline_repo` is a directory on the host holding the .deb or .rpm files of these packages and their " +
			"dependencies (as shipped in an offline bundle): when something is missing, it is installed from there with " +
			"the network repositories disabled. With apt, a directory that has a `Packages` index (as `kubexm artifact " +
			"export` writes) is used as a flat repository, so apt installs only the named packages and what they lack; " +
			"without one, every file there is handed to the manager, which installs what is missing or older.",
		Args: []step.Arg{
			{Name: "name", Type: step.List, Required: true, Aliases: []string{"pkg", "names"}, Doc: "Package names (a list, or one name)."},
			{Name: "state", Type: step.String, Default: "present", Choices: []string{"present", "absent", "latest"}, Doc: "present installs if missing; latest also upgrades; absent removes."},
			{Name: "manager", Type: step.String, Default: "auto", Choices: []string{"auto", "apt", "dnf", "yum"}, Doc: "Package manager."},
			{Name: "update_cache", Type: step.Bool, Default: false, Doc: "Refresh the package index first (apt-get update / dnf makecache) when something is to be installed."},
			{Name: "offline_repo", Type: step.String, Doc: "Directory on the host with the package files to install from, without network."},
		},
		Examples: []string{"package:\n  name: [socat, conntrack, ipset, ebtables]",
			"package:\n  name: [containerd]\n  offline_repo: /opt/kubexm/packages/debian12"},
	}
}

// pkgManager knows one manager's commands.
type pkgManager struct {
	name string
}

func detectManager(ctx context.Context, env *step.Env, want string) (pkgManager, error) {
	if want != "auto" {
		if err := onhost.CheckChoice("manager", want, "apt", "dnf", "yum"); err != nil {
			return pkgManager{}, fmt.Errorf("package: %w", err)
		}
		return pkgManager{want}, nil
	}
	for _, m := range []struct{ bin, name string }{{"/usr/bin/apt-get", "apt"}, {"/usr/bin/dnf", "dnf"}, {"/usr/bin/yum", "yum"}} {
		fi, err := env.Target.Stat(ctx, m.bin, false)
		if err != nil {
			return pkgManager{}, err
		}
		if fi.Exists {
			return pkgManager{m.name}, nil
		}
	}
	return pkgManager{}, fmt.Errorf("%s: no supported package manager (apt-get, dnf, yum) found", env.Target.Host())
}

// query returns the installed version of name ("" when not installed, or
// when an apt version pin does not match).
func (m pkgManager) query(ctx context.Context, env *step.Env, name string) (string, error) {
	if m.name == "apt" {
		pkg, pin, _ := strings.Cut(name, "=")
		res, err := onhost.Run(ctx, env, "dpkg-query", "-W", "-f=${Status}\t${Version}\n", pkg)
		if err != nil {
			return "", err
		}
		status, version, _ := strings.Cut(strings.TrimSpace(string(res.Stdout)), "\t")
		if res.ExitCode != 0 || !strings.HasSuffix(status, " installed") {
			return "", nil
		}
		if pin != "" && !strings.HasPrefix(version, pin) {
			return "", nil
		}
		return version, nil
	}
	res, err := onhost.Run(ctx, env, "rpm", "-q", "--qf", "%{VERSION}-%{RELEASE}\n", name)
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 {
		return "", nil
	}
	return strings.TrimSpace(string(res.Stdout)), nil
}

func (m pkgManager) cmd(argv ...string) transport.Command {
	c := transport.Command{Argv: argv}
	if m.name == "apt" {
		c.Env = map[string]string{"DEBIAN_FRONTEND": "noninteractive"}
	}
	return c
}

func (m pkgManager) install(names []string, offline string, upgrade bool) transport.Command {
	if m.name == "apt" {
		argv := []string{"apt-get", "install", "-y", "--no-install-recommends",
			"-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold"}
		if upgrade {
			argv = append(argv, "--only-upgrade")
		}
		if offline != "" {
			// No network sources. With a Packages index the directory is the
			// only source (a flat repository with its own package lists in a
			// temporary directory), so apt resolves the names against what is
			// installed and takes only what is lacking; without one, apt
			// resolves among the files given and what is installed.
			script := `set -e; cd "$1"; shift
if [ -f Packages ]; then
  t=$(mktemp -d); trap 'rm -rf "$t"' EXIT
  mkdir "$t/lists" "$t/sources"
  echo "deb [trusted=yes] file:$PWD ./" >"$t/sources/offline.list"
  o="-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts=$t/sources -o Dir::State::Lists=$t/lists -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= -o APT::Sandbox::User=root"
  apt-get -q $o update >/dev/null
  apt-get install -y --no-install-recommends $o -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "$@"
  exit
fi
set -- ./*.deb; [ -e "$1" ] || { echo "no .deb files in $PWD" >&2; exit 1; }
exec apt-get install -y --no-install-recommends -o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts=/dev/null ` +
				`-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "$@"`
			c := m.cmd(append([]string{"/bin/sh", "-c", script, "sh", offline}, names...)...)
			return c
		}
		return m.cmd(append(argv, names...)...)
	}
	if offline != "" {
		return m.cmd("/bin/sh", "-c", `set -e; cd "$1"; set -- ./*.rpm; [ -e "$1" ] || { echo "no .rpm files in $PWD" >&2; exit 1; }; exec `+
			m.name+` install -y --disablerepo='*' "$@"`, "sh", offline)
	}
	verb := "install"
	if upgrade {
		verb = "upgrade"
	}
	return m.cmd(append([]string{m.name, verb, "-y"}, names...)...)
}

func (m pkgManager) remove(names []string) transport.Command {
	if m.name == "apt" {
		return m.cmd(append([]string{"apt-get", "remove", "-y"}, names...)...)
	}
	return m.cmd(append([]string{m.name, "remove", "-y"}, names...)...)
}

func (m pkgManager) updateCache() transport.Command {
	if m.name == "apt" {
		return m.cmd("apt-get", "update")
	}
	return m.cmd(m.name, "makecache")
}

// upgradable lists which of the installed names have a newer version.
func (m pkgManager) upgradable(ctx context.Context, env *step.Env, names []string) ([]string, error) {
	if len(names) == 0 {
		return nil, nil
	}
	if m.name == "apt" {
		res, err := m.exec(ctx, env, m.cmd(append([]string{"apt-get", "-s", "install", "--only-upgrade"}, names...)...))
		if err != nil {
			return nil, err
		}
		var out []string
		for _, l := range onhost.SplitLines(res.Stdout) {
			// Dependencies may be upgraded too; report only what was asked.
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "Inst" {
				if pkg, _, _ := strings.Cut(f[1], ":"); slices.Contains(names, pkg) {
					out = append(out, pkg)
				}
			}
		}
		return out, nil
	}
	c := m.cmd(append([]string{m.name, "-q", "check-update"}, names...)...)
	c.Become = env.Become
	res, err := env.Target.Run(ctx, c)
	if err != nil {
		return nil, err
	}
	switch res.ExitCode {
	case 0:
		return nil, nil
	case 100:
		var out []string
		for _, l := range onhost.SplitLines(res.Stdout) {
			if f := strings.Fields(l); len(f) == 3 {
				out = append(out, strings.Split(f[0], ".")[0])
			}
		}
		return out, nil
	}
	return nil, onhost.CmdError(env, c.Argv, res)
}

func (m pkgManager) exec(ctx context.Context, env *step.Env, c transport.Command) (transport.Result, error) {
	c.Become = env.Become
	res, err := env.Target.Run(ctx, c)
	if err != nil {
		return res, err
	}
	if res.ExitCode != 0 {
		return res, onhost.CmdError(env, c.Argv, res)
	}
	return res, nil
}

func (packageBuiltin) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	names := args.Strings("name")
	for _, n := range names {
		if n == "" || strings.ContainsAny(n, " \t'\"") || strings.HasPrefix(n, "-") {
			return step.Result{}, fmt.Errorf("package: %q is not a package name", n)
		}
	}
	if len(names) == 0 {
		return step.Result{}, fmt.Errorf("package: name is empty")
	}
	state := args.String("state")
	if state == "" {
		state = "present"
	}
	if err := onhost.CheckChoice("state", state, "present", "absent", "latest"); err != nil {
		return step.Result{}, fmt.Errorf("package: %w", err)
	}
	m, err := detectManager(ctx, env, args.String("manager"))
	if err != nil {
		return step.Result{}, err
	}
	var missing, installed []string
	versions := map[string]any{}
	for _, n := range names {
		v, err := m.query(ctx, env, n)
		if err != nil {
			return step.Result{}, err
		}
		if v == "" {
			missing = append(missing, n)
		} else {
			installed = append(installed, n)
			versions[n] = v
		}
	}
	data := map[string]any{"manager": m.name, "versions": versions}
	offline := args.String("offline_repo")
	if offline != "" {
		fi, err := env.Target.Stat(ctx, offline, env.Become)
		if err != nil {
			return step.Result{}, err
		}
		if !fi.IsDir {
			return step.Result{}, fmt.Errorf("%s: offline_repo %s is not a directory", env.Target.Host(), offline)
		}
	}
	var changes []string
	var cmds []transport.Command
	switch state {
	case "absent":
		if len(installed) > 0 {
			changes = append(changes, "remove "+strings.Join(installed, " "))
			cmds = append(cmds, m.remove(installed))
		}
	case "present", "latest":
		if len(missing) > 0 {
			changes = append(changes, "install "+strings.Join(missing, " "))
		}
		var up []string
		if state == "latest" && len(installed) > 0 && offline == "" {
			if args.Bool("update_cache") && !env.Check {
				if _, err := m.exec(ctx, env, m.updateCache()); err != nil {
					return step.Result{}, err
				}
			}
			if up, err = m.upgradable(ctx, env, installed); err != nil {
				return step.Result{}, err
			}
			if len(up) > 0 {
				changes = append(changes, "upgrade "+strings.Join(up, " "))
			}
		}
		if len(missing) > 0 {
			if args.Bool("update_cache") && offline == "" && state != "latest" {
				cmds = append(cmds, m.updateCache())
			}
			cmds = append(cmds, m.install(missing, offline, false))
		}
		if len(up) > 0 {
			cmds = append(cmds, m.install(up, "", true))
		}
	}
	if env.Check || len(cmds) == 0 {
		return onhost.Done(env, changes, data, ""), nil
	}
	for _, c := range cmds {
		onhost.Logf(env, "%s: %s", env.Target.Host(), strings.Join(c.Argv, " "))
		if _, err := m.exec(ctx, env, c); err != nil {
			return step.Result{}, err
		}
	}
	for _, n := range names {
		v, err := m.query(ctx, env, n)
		if err != nil {
			return step.Result{}, err
		}
		switch {
		case v == "" && state != "absent":
			return step.Result{}, fmt.Errorf("%s: package %s: %s reported success but the package is not installed", env.Target.Host(), n, m.name)
		case v != "" && state == "absent":
			return step.Result{}, fmt.Errorf("%s: package %s: %s reported success but the package is still installed", env.Target.Host(), n, m.name)
		}
		if v != "" {
			versions[n] = v
		} else {
			delete(versions, n)
		}
	}
	return onhost.Done(env, changes, data, ""), nil
}
