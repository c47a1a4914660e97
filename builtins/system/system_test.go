package system

import (
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/builtins/internal/steptest"
	"github.com/mensylisir/kubexm/builtins/onhost"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
)

// convergeFake is converge for the scripted host: check mode must not run
// any of the mutating commands nor write files.
func convergeFake(t *testing.T, b step.Builtin, h *steptest.FakeHost, args step.Args, mutating ...string) {
	t.Helper()
	env := steptest.FakeEnv(h)
	files := len(h.Files)
	before := len(h.Ran(mutating...))
	env.Check = true
	if res := steptest.Run(t, b, env, args); !res.Changed {
		t.Fatalf("check: want changed, got %+v", res)
	}
	if got := h.Ran(mutating...); len(got) != before || len(h.Files) != files {
		t.Fatalf("check mode ran %v", got)
	}
	env.Check = false
	if res := steptest.Run(t, b, env, args); !res.Changed {
		t.Fatalf("first: want changed, got %+v", res)
	}
	if res := steptest.Run(t, b, env, args); res.Changed {
		t.Fatalf("second: want unchanged, got %+v", res)
	}
}

func TestModprobe(t *testing.T) {
	loaded := false
	h := steptest.NewFake(func(cmd string) (transport.Result, bool) {
		switch {
		case strings.HasPrefix(cmd, "/bin/sh -c \nm=$(printf"):
			return steptest.RC(map[bool]int{true: 0, false: 1}[loaded], "", "")
		case cmd == "modprobe nf_conntrack hashsize=1024":
			loaded = true
			return steptest.OK("")
		case cmd == "modprobe -r nf_conntrack":
			loaded = false
			return steptest.OK("")
		case strings.HasPrefix(cmd, "/bin/sh -c "+onhost.ResolveScript+" sh "):
			return steptest.OK(strings.TrimPrefix(cmd, "/bin/sh -c "+onhost.ResolveScript+" sh ") + "\n")
		case strings.HasPrefix(cmd, "/bin/sh -c "+onhost.RemoveScript+" sh "):
			return steptest.OK("removed")
		}
		return transport.Result{}, false
	})
	convergeFake(t, modprobeBuiltin{}, h, step.Args{"name": "nf_conntrack", "params": "hashsize=1024"}, "modprobe")
	if h.Files["/etc/modules-load.d/nf_conntrack.conf"] != "nf_conntrack\n" || h.Files["/etc/modprobe.d/nf_conntrack.conf"] != "options nf_conntrack hashsize=1024\n" {
		t.Errorf("files %v", h.Files)
	}
	res := steptest.Run(t, modprobeBuiltin{}, steptest.FakeEnv(h), step.Args{"name": "nf_conntrack", "state": "absent"})
	if !res.Changed || !strings.Contains(res.Msg, "unload") || len(h.Ran("/bin/sh -c "+onhost.RemoveScript+" sh /etc/modules-load.d/nf_conntrack.conf 0")) != 1 {
		t.Errorf("%+v %v", res, h.Cmds)
	}
}

// Modules sharing one boot file keep each other's lines.
func TestModprobeSharedLoadFile(t *testing.T) {
	h := steptest.NewFake(func(cmd string) (transport.Result, bool) {
		if strings.HasPrefix(cmd, "/bin/sh -c \nm=$(printf") {
			return steptest.OK("") // built in: loaded
		}
		return transport.Result{}, false
	})
	const file = "/etc/modules-load.d/kubexm.conf"
	for _, m := range []string{"overlay", "br_netfilter"} {
		convergeFake(t, modprobeBuiltin{}, h, step.Args{"name": m, "modules_load_file": file}, "modprobe")
	}
	if h.Files[file] != "overlay\nbr_netfilter\n" {
		t.Fatalf("shared file %q", h.Files[file])
	}
	res := steptest.Run(t, modprobeBuiltin{}, steptest.FakeEnv(h), step.Args{"name": "overlay", "modules_load_file": file, "persistent": "absent"})
	if !res.Changed || h.Files[file] != "br_netfilter\n" {
		t.Fatalf("%+v: %q", res, h.Files[file])
	}
}

func TestModprobeLoadError(t *testing.T) {
	h := steptest.NewFake(func(cmd string) (transport.Result, bool) {
		if strings.HasPrefix(cmd, "/bin/sh -c") {
			return steptest.RC(1, "", "")
		}
		if cmd == "modprobe br_netfilter" {
			return steptest.RC(1, "", "modprobe: FATAL: Module br_netfilter not found in directory /lib/modules/6.1")
		}
		return transport.Result{}, false
	})
	env := steptest.FakeEnv(h)
	if _, err := runBuiltin(t.Context(), env, modprobeBuiltin{}, step.Args{"name": "br_netfilter"}); err == nil || !strings.Contains(err.Error(), "not found in directory") {
		t.Fatalf("want modprobe error, got %v", err)
	}
	res := steptest.Run(t, modprobeBuiltin{}, env, step.Args{"name": "br_netfilter", "ignore_load_errors": true})
	if !strings.Contains(res.Msg, "warning") {
		t.Errorf("%+v", res)
	}
}

func TestHostname(t *testing.T) {
	name := "old"
	h := steptest.NewFake(func(cmd string) (transport.Result, bool) {
		switch cmd {
		case "hostname":
			return steptest.OK(name + "\n")
		case "hostnamectl set-hostname n1":
			return steptest.RC(1, "", "System has not been booted with systemd")
		case "hostname n1":
			name = "n1"
			return steptest.OK("")
		}
		return transport.Result{}, false
	})
	h.Files["/etc/hostname"] = "old\n"
	convergeFake(t, hostnameBuiltin{}, h, step.Args{"name": "n1"}, "hostname n1", "hostnamectl")
	if h.Files["/etc/hostname"] != "n1\n" {
		t.Errorf("%q", h.Files["/etc/hostname"])
	}
	if _, err := runBuiltin(t.Context(), steptest.FakeEnv(h), hostnameBuiltin{}, step.Args{"name": "bad_name!"}); err == nil {
		t.Error("want invalid name error")
	}
}

func TestTimezoneParse(t *testing.T) {
	h := steptest.NewFake(func(string) (transport.Result, bool) { return transport.Result{}, false })
	h.Files["/etc/timezone"] = "Etc/UTC\n"
	h.Files[zoneinfo+"Asia/Shanghai"] = "TZif"
	env := steptest.FakeEnv(h)
	if z, err := currentZone(t.Context(), env); err != nil || z != "Etc/UTC" {
		t.Fatalf("%q %v", z, err)
	}
	env.Check = true
	if res := steptest.Run(t, timezoneBuiltin{}, env, step.Args{"name": "Asia/Shanghai"}); !res.Changed || !strings.Contains(res.Msg, "Etc/UTC -> Asia/Shanghai") {
		t.Errorf("%+v", res)
	}
	if _, err := runBuiltin(t.Context(), env, timezoneBuiltin{}, step.Args{"name": "Mars/Olympus"}); err == nil || !strings.Contains(err.Error(), "tzdata") {
		t.Errorf("unknown zone: %v", err)
	}
}

func TestTimezone(t *testing.T) {
	var h *steptest.FakeHost
	h = steptest.NewFake(func(cmd string) (transport.Result, bool) {
		switch cmd {
		case "timedatectl set-timezone Asia/Shanghai":
			return steptest.RC(1, "", "System has not been booted with systemd")
		case "ln -sfn /usr/share/zoneinfo/Asia/Shanghai /etc/localtime":
			h.Links["/etc/localtime"] = "/usr/share/zoneinfo/Asia/Shanghai"
			return steptest.OK("")
		}
		return transport.Result{}, false
	})
	h.Links["/etc/localtime"] = "/usr/share/zoneinfo/Etc/UTC"
	h.Files[zoneinfo+"Asia/Shanghai"] = "TZif"
	convergeFake(t, timezoneBuiltin{}, h, step.Args{"name": "Asia/Shanghai"}, "ln", "timedatectl")
	if h.Files["/etc/timezone"] != "Asia/Shanghai\n" {
		t.Errorf("/etc/timezone %q", h.Files["/etc/timezone"])
	}
}

func TestUserAndGroup(t *testing.T) {
	users := map[string]string{}
	groups := map[string]string{"etcd": "etcd:x:990:"}
	var lastUsermod string
	h := steptest.NewFake(func(cmd string) (transport.Result, bool) {
		f := strings.Fields(cmd)
		switch {
		case f[0] == "getent" && f[1] == "passwd":
			if l, ok := users[f[2]]; ok {
				return steptest.RC(0, l+"\n", "")
			}
			return steptest.RC(2, "", "")
		case f[0] == "getent" && f[1] == "group":
			for _, l := range groups {
				if strings.HasPrefix(l, f[2]+":") || strings.Split(l, ":")[2] == f[2] {
					return steptest.RC(0, l+"\n", "")
				}
			}
			return steptest.RC(2, "", "")
		case cmd == "useradd -r -M -u 991 -g etcd -s /sbin/nologin -d /var/lib/etcd etcd":
			users["etcd"] = "etcd:x:991:990::/var/lib/etcd:/sbin/nologin"
			return steptest.OK("")
		case f[0] == "usermod":
			lastUsermod = cmd
			users["etcd"] = "etcd:x:991:990::/var/lib/etcd:/bin/false"
			return steptest.OK("")
		case cmd == "userdel etcd":
			delete(users, "etcd")
			return steptest.OK("")
		case cmd == "groupadd -r -g 980 kube":
			groups["kube"] = "kube:x:980:"
			return steptest.OK("")
		case cmd == "groupmod -g 981 kube":
			groups["kube"] = "kube:x:981:"
			return steptest.OK("")
		case cmd == "id -nG etcd":
			return steptest.OK("etcd\n")
		}
		return transport.Result{}, false
	})
	convergeFake(t, groupBuiltin{}, h, step.Args{"name": "kube", "gid": 980, "system": true}, "groupadd")
	convergeFake(t, groupBuiltin{}, h, step.Args{"name": "kube", "gid": 981}, "groupmod")
	args := step.Args{"name": "etcd", "uid": 991, "group": "etcd", "system": true, "create_home": false, "shell": "/sbin/nologin", "home": "/var/lib/etcd"}
	convergeFake(t, userBuiltin{}, h, args, "useradd")
	args["shell"] = "/bin/false"
	convergeFake(t, userBuiltin{}, h, args, "usermod")
	if lastUsermod != "usermod -s /bin/false etcd" {
		t.Errorf("usermod: %q", lastUsermod)
	}
	convergeFake(t, userBuiltin{}, h, step.Args{"name": "etcd", "state": "absent"}, "userdel")
	if _, err := runBuiltin(t.Context(), steptest.FakeEnv(h), userBuiltin{}, step.Args{"name": "x", "group": "nogroup-kubexm"}); err == nil {
		// x does not exist: useradd is attempted with a group that
		// does not exist; the scripted host refuses unknown commands.
		t.Error("want error")
	}
	if _, err := runBuiltin(t.Context(), steptest.FakeEnv(h), userBuiltin{}, step.Args{"name": "Bad Name"}); err == nil {
		t.Error("want invalid name error")
	}
}
