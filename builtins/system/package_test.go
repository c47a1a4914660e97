package system

import (
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/builtins/internal/steptest"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
)

// fakeApt models dpkg's database for a few packages.
func fakeApt(installed map[string]string) *steptest.FakeHost {
	h := steptest.NewFake(func(cmd string) (transport.Result, bool) {
		f := strings.Fields(cmd)
		switch {
		case f[0] == "dpkg-query":
			if v, found := installed[f[len(f)-1]]; found {
				return steptest.OK("install ok installed\t" + v + "\n")
			}
			return steptest.RC(1, "", "dpkg-query: no packages found matching "+f[len(f)-1])
		case f[0] == "apt-get" && f[1] == "install" && f[2] == "-y":
			for _, n := range f {
				if !strings.HasPrefix(n, "-") && n != "apt-get" && n != "install" && !strings.Contains(n, "::") {
					installed[n] = "1.0"
				}
			}
			return steptest.OK("")
		case f[0] == "apt-get" && f[1] == "remove":
			for _, n := range f[3:] {
				delete(installed, n)
			}
			return steptest.OK("")
		case f[0] == "apt-get" && f[1] == "-s":
			return steptest.OK("Inst socat [1.0] (2.0 Debian:12)\n")
		case f[0] == "/bin/sh" && strings.Contains(cmd, "Dir::Etc::SourceList=/dev/null"):
			installed["containerd"] = "1.6"
			return steptest.OK("")
		}
		return transport.Result{}, false
	})
	h.Files["/usr/bin/apt-get"] = ""
	return h
}

func TestPackageApt(t *testing.T) {
	h := fakeApt(map[string]string{"curl": "7.88"})
	convergeFake(t, packageBuiltin{}, h, step.Args{"name": []any{"curl", "socat", "conntrack"}}, "apt-get install", "apt-get remove")
	if got := h.Ran("apt-get install"); len(got) != 1 || !strings.HasSuffix(got[0], " socat conntrack") {
		t.Errorf("install: %v", got)
	}
	convergeFake(t, packageBuiltin{}, h, step.Args{"name": "socat", "state": "absent"}, "apt-get install", "apt-get remove")
	res := steptest.Run(t, packageBuiltin{}, steptest.FakeEnv(h), step.Args{"name": "curl", "state": "latest"})
	if res.Changed {
		t.Errorf("latest with nothing to upgrade for curl: %+v", res)
	}
}

func TestPackageOffline(t *testing.T) {
	h := fakeApt(map[string]string{})
	h.Files["/opt/bundle/containerd_1.6_amd64.deb"] = "deb"
	convergeFake(t, packageBuiltin{}, h, step.Args{"name": "containerd", "offline_repo": "/opt/bundle"}, "/bin/sh", "apt-get")
	if _, err := runBuiltin(t.Context(), steptest.FakeEnv(h), packageBuiltin{}, step.Args{"name": "x", "offline_repo": "/nope"}); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("missing repo dir: %v", err)
	}
}

func TestPackageErrors(t *testing.T) {
	h := steptest.NewFake(func(string) (transport.Result, bool) { return transport.Result{}, false })
	if _, err := runBuiltin(t.Context(), steptest.FakeEnv(h), packageBuiltin{}, step.Args{"name": "x"}); err == nil || !strings.Contains(err.Error(), "no supported package manager") {
		t.Errorf("%v", err)
	}
	if _, err := runBuiltin(t.Context(), steptest.FakeEnv(h), packageBuiltin{}, step.Args{"name": "-rf"}); err == nil {
		t.Error("option-like name: want error")
	}
	// A manager that claims success without installing is caught.
	liar := fakeApt(map[string]string{})
	liar.Answer = func(cmd string) (transport.Result, bool) {
		if strings.HasPrefix(cmd, "dpkg-query") {
			return steptest.RC(1, "", "")
		}
		return steptest.OK("")
	}
	if _, err := runBuiltin(t.Context(), steptest.FakeEnv(liar), packageBuiltin{}, step.Args{"name": "ghost"}); err == nil || !strings.Contains(err.Error(), "not installed") {
		t.Errorf("%v", err)
	}
}

func TestPackageLatest(t *testing.T) {
	h := fakeApt(map[string]string{"socat": "1.0"})
	res := steptest.Run(t, packageBuiltin{}, steptest.FakeEnv(h), step.Args{"name": "socat", "state": "latest"})
	if !res.Changed || res.Msg != "upgrade socat" || len(h.Ran("apt-get install -y --no-install-recommends -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold --only-upgrade socat")) != 1 {
		t.Errorf("%+v %v", res, h.Cmds)
	}
}

// fakeDnf models the rpm database and dnf (or yum, by name) for a few
// packages; upgradable lists the installed packages with a newer version.
func fakeDnf(bin string, installed map[string]string, upgradable map[string]string) *steptest.FakeHost {
	h := steptest.NewFake(func(cmd string) (transport.Result, bool) {
		f := strings.Fields(cmd)
		switch {
		case f[0] == "rpm" && f[1] == "-q":
			if v, found := installed[f[len(f)-1]]; found {
				return steptest.OK(v + "\n")
			}
			return steptest.RC(1, "package "+f[len(f)-1]+" is not installed\n", "")
		case f[0] == bin && f[1] == "install" && f[2] == "-y":
			for _, n := range f[3:] {
				installed[n] = "1.0-1"
			}
			return steptest.OK("")
		case f[0] == bin && f[1] == "remove" && f[2] == "-y":
			for _, n := range f[3:] {
				delete(installed, n)
			}
			return steptest.OK("")
		case f[0] == bin && f[1] == "-q" && f[2] == "check-update":
			var lines []string
			for _, n := range f[3:] {
				if v, found := upgradable[n]; found {
					lines = append(lines, n+".x86_64 "+v+" baseos")
				}
			}
			if len(lines) == 0 {
				return steptest.OK("")
			}
			return steptest.RC(100, "\n"+strings.Join(lines, "\n")+"\n", "")
		case f[0] == bin && f[1] == "upgrade" && f[2] == "-y":
			for _, n := range f[3:] {
				installed[n] = upgradable[n]
				delete(upgradable, n)
			}
			return steptest.OK("")
		case f[0] == "/bin/sh" && strings.Contains(cmd, bin+" install -y --disablerepo='*'") && strings.Contains(cmd, "*.rpm"):
			installed["containerd"] = "1.6.20-1"
			return steptest.OK("")
		}
		return transport.Result{}, false
	})
	h.Files["/usr/bin/"+bin] = ""
	return h
}

// TestPackageDnfYum covers the rpm side: install and remove with dnf
// (detected from /usr/bin/dnf), latest through check-update, an offline
// directory of .rpm files with the repositories disabled, and yum.
func TestPackageDnfYum(t *testing.T) {
	h := fakeDnf("dnf", map[string]string{"curl": "7.76-1"}, map[string]string{"curl": "7.76-2.el9"})
	convergeFake(t, packageBuiltin{}, h, step.Args{"name": []any{"curl", "socat", "conntrack-tools"}}, "dnf install", "dnf remove", "dnf upgrade")
	if got := h.Ran("dnf install"); len(got) != 1 || got[0] != "dnf install -y socat conntrack-tools" {
		t.Errorf("install: %v", got)
	}
	convergeFake(t, packageBuiltin{}, h, step.Args{"name": "curl", "state": "latest"}, "dnf install", "dnf remove", "dnf upgrade")
	if got := h.Ran("dnf upgrade"); len(got) != 1 || got[0] != "dnf upgrade -y curl" {
		t.Errorf("upgrade: %v", got)
	}
	convergeFake(t, packageBuiltin{}, h, step.Args{"name": []any{"socat", "conntrack-tools"}, "state": "absent"}, "dnf install", "dnf remove", "dnf upgrade")
	if res := steptest.Run(t, packageBuiltin{}, steptest.FakeEnv(h), step.Args{"name": "curl"}); res.Changed || res.Data["manager"] != "dnf" {
		t.Errorf("installed curl: %+v", res)
	}

	off := fakeDnf("dnf", map[string]string{}, nil)
	off.Files["/opt/bundle/rocky9/containerd-1.6.20-1.x86_64.rpm"] = "rpm"
	convergeFake(t, packageBuiltin{}, off, step.Args{"name": "containerd", "offline_repo": "/opt/bundle/rocky9"}, "/bin/sh", "dnf")
	if got := off.Ran("dnf"); len(got) != 0 {
		t.Errorf("offline install reached for the repositories: %v", got)
	}

	// yum, chosen explicitly even where dnf is present.
	y := fakeDnf("yum", map[string]string{}, nil)
	y.Files["/usr/bin/dnf"] = ""
	convergeFake(t, packageBuiltin{}, y, step.Args{"name": "ipset", "manager": "yum"}, "yum install", "dnf")
	if got := y.Ran("yum install"); len(got) != 1 || got[0] != "yum install -y ipset" {
		t.Errorf("yum: %v", got)
	}
}
