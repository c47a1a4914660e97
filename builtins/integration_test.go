//go:build integration

package builtins

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/builtins/internal/steptest"

	"github.com/mensylisir/kubexm/engine/step"
)

// These tests run on the test machines: `make hosts-up N=3` (or
// test/hosts/up.sh), `source <state>/hosts.env`, then
// go test -tags integration ./builtins/... -run Integration

func TestIntegrationSystemd(t *testing.T) {
	env := steptest.RemoteEnv(t, steptest.Machines(t), 0)
	// Under /usr/lib: systemd refuses to mask a unit whose file is in /etc.
	unit := "/usr/lib/systemd/system/kubexm-it.service"
	t.Cleanup(func() {
		steptest.Sh(t, env, "systemctl disable --now kubexm-it kubexm-it-bad 2>/dev/null; rm -f "+unit+" /etc/systemd/system/kubexm-it-bad.service; systemctl daemon-reload")
	})
	steptest.Run(t, registered(t, "copy"), env, step.Args{"dest": unit, "content": "[Unit]\nDescription=kubexm it\n[Service]\nExecStart=/bin/sleep infinity\n[Install]\nWantedBy=multi-user.target\n"})
	probe := "systemctl is-active kubexm-it; systemctl is-enabled kubexm-it"
	steptest.ConvergeRemote(t, registered(t, "systemd"), env, step.Args{"name": "kubexm-it", "state": "started", "enabled": true, "daemon_reload": true}, probe)
	if got := steptest.Sh(t, env, probe); got != "active\nenabled" {
		t.Fatalf("state %q", got)
	}
	steptest.ConvergeRemote(t, registered(t, "systemd"), env, step.Args{"name": "kubexm-it", "state": "stopped", "enabled": false}, probe)
	steptest.ConvergeRemote(t, registered(t, "systemd"), env, step.Args{"name": "kubexm-it", "masked": true}, probe)
	steptest.ConvergeRemote(t, registered(t, "systemd"), env, step.Args{"name": "kubexm-it", "masked": false}, probe)

	steptest.Run(t, registered(t, "copy"), env, step.Args{"dest": "/etc/systemd/system/kubexm-it-bad.service", "content": "[Service]\nType=oneshot\nExecStart=/bin/sh -c 'echo kubexm-broken-marker; exit 3'\n"})
	_, err := steptest.RunBuiltin(t.Context(), env, registered(t, "systemd"), step.Args{"name": "kubexm-it-bad", "state": "started", "daemon_reload": true})
	if err == nil || !strings.Contains(err.Error(), "kubexm-broken-marker") {
		t.Fatalf("want the journal lines in the error, got %v", err)
	}
}

func TestIntegrationSysctl(t *testing.T) {
	env := steptest.RemoteEnv(t, steptest.Machines(t), 0)
	file := "/etc/sysctl.d/99-kubexm-it.conf"
	orig := steptest.Sh(t, env, "cat /proc/sys/net/ipv4/ip_local_port_range")
	t.Cleanup(func() { steptest.Sh(t, env, "rm -f "+file+"; sysctl -w net.ipv4.ip_local_port_range='"+orig+"'") })
	steptest.ConvergeRemote(t, registered(t, "sysctl"), env, step.Args{"name": "net.ipv4.ip_local_port_range", "value": "32768   60998", "sysctl_file": file},
		"cat /proc/sys/net/ipv4/ip_local_port_range; cat "+file+" 2>/dev/null")
	if got := steptest.Sh(t, env, "cat /proc/sys/net/ipv4/ip_local_port_range"); strings.Join(strings.Fields(got), " ") != "32768 60998" {
		t.Fatalf("running value %q", got)
	}
	if got := steptest.Sh(t, env, "cat "+file); got != "net.ipv4.ip_local_port_range = 32768 60998" {
		t.Fatalf("file %q", got)
	}
	// Kernel-global keys are read-only inside a machine.
	res := steptest.Run(t, registered(t, "sysctl"), env, step.Args{"name": "kernel.pid_max", "value": "4194303", "sysctl_file": file, "ignore_apply_errors": true})
	if !strings.Contains(res.Msg, "warning") && steptest.Sh(t, env, "cat /proc/sys/kernel/pid_max") != "4194303" {
		t.Fatalf("%+v", res)
	}
}

func TestIntegrationModprobe(t *testing.T) {
	env := steptest.RemoteEnv(t, steptest.Machines(t), 0)
	t.Cleanup(func() {
		steptest.Sh(t, env, "rm -f /etc/modules-load.d/overlay.conf /etc/modules-load.d/kubexm_nonexistent.conf")
	})
	// overlay is built into the test kernel: loaded, so only the boot
	// config changes.
	steptest.ConvergeRemote(t, registered(t, "modprobe"), env, step.Args{"name": "overlay"}, "cat /etc/modules-load.d/overlay.conf 2>/dev/null")
	if _, err := steptest.RunBuiltin(t.Context(), env, registered(t, "modprobe"), step.Args{"name": "kubexm_nonexistent"}); err == nil {
		t.Fatal("want an error for a module that does not exist")
	}
	res := steptest.Run(t, registered(t, "modprobe"), env, step.Args{"name": "kubexm_nonexistent", "ignore_load_errors": true, "persistent": "disabled"})
	if !strings.Contains(res.Msg, "warning") {
		t.Fatalf("%+v", res)
	}
}

func TestIntegrationHostnameTimezone(t *testing.T) {
	env := steptest.RemoteEnv(t, steptest.Machines(t), 0)
	orig := steptest.Sh(t, env, "hostname")
	origTZ := steptest.Sh(t, env, "readlink /etc/localtime")
	t.Cleanup(func() {
		steptest.Run(t, registered(t, "hostname"), env, step.Args{"name": orig})
		steptest.Sh(t, env, "ln -sfn "+origTZ+" /etc/localtime")
	})
	steptest.ConvergeRemote(t, registered(t, "hostname"), env, step.Args{"name": orig + "-renamed"}, "hostname; cat /etc/hostname")
	if got := steptest.Sh(t, env, "hostname; cat /etc/hostname"); got != orig+"-renamed\n"+orig+"-renamed" {
		t.Fatalf("%q", got)
	}
	zone := "Asia/Shanghai"
	if strings.HasSuffix(origTZ, zone) {
		zone = "Europe/Berlin"
	}
	steptest.ConvergeRemote(t, registered(t, "timezone"), env, step.Args{"name": zone}, "readlink /etc/localtime")
}

func TestIntegrationUserGroup(t *testing.T) {
	env := steptest.RemoteEnv(t, steptest.Machines(t), 0)
	t.Cleanup(func() { steptest.Sh(t, env, "userdel kubexmit 2>/dev/null; groupdel kubexmitg 2>/dev/null; true") })
	// The group's name differs from the user's, so userdel leaves it.
	steptest.ConvergeRemote(t, registered(t, "group"), env, step.Args{"name": "kubexmitg", "gid": 4242, "system": true}, "getent group kubexmitg")
	steptest.ConvergeRemote(t, registered(t, "group"), env, step.Args{"name": "kubexmitg", "gid": 4243}, "getent group kubexmitg")
	steptest.ConvergeRemote(t, registered(t, "user"), env, step.Args{"name": "kubexmit", "uid": 4242, "group": "kubexmitg", "shell": "/usr/sbin/nologin", "home": "/var/lib/kubexmit", "create_home": false, "system": true}, "getent passwd kubexmit")
	steptest.ConvergeRemote(t, registered(t, "user"), env, step.Args{"name": "kubexmit", "shell": "/bin/false", "groups": []any{"adm"}}, "getent passwd kubexmit; id -nG kubexmit")
	steptest.ConvergeRemote(t, registered(t, "user"), env, step.Args{"name": "kubexmit", "state": "absent"}, "getent passwd kubexmit")
	steptest.ConvergeRemote(t, registered(t, "group"), env, step.Args{"name": "kubexmitg", "state": "absent"}, "getent group kubexmitg")
}

// TestIntegrationPackageOffline builds a tiny .deb, ships it to the
// machine and installs it from the offline directory, without network.
func TestIntegrationPackageOffline(t *testing.T) {
	env := steptest.RemoteEnv(t, steptest.Machines(t), 0)
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Fatal("dpkg-deb is needed on the control machine to build the test package")
	}
	dir := t.TempDir()
	pkg := filepath.Join(dir, "pkg")
	steptest.MustWrite(t, filepath.Join(pkg, "DEBIAN", "control"), "Package: kubexm-it-dummy\nVersion: 1.0\nArchitecture: all\nMaintainer: kubexm <kubexm@example.com>\nDescription: kubexm integration test package\n")
	steptest.MustWrite(t, filepath.Join(pkg, "usr", "share", "doc", "kubexm-it-dummy", "README"), "kubexm\n")
	deb := filepath.Join(dir, "kubexm-it-dummy_1.0_all.deb")
	if out, err := exec.Command("dpkg-deb", "--root-owner-group", "--build", pkg, deb).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb: %v %s", err, out)
	}
	repo := "/tmp/kubexm-it-offline"
	t.Cleanup(func() { steptest.Sh(t, env, "dpkg -P kubexm-it-dummy >/dev/null 2>&1; rm -rf "+repo) })
	steptest.Run(t, registered(t, "distribute"), env, step.Args{"src": deb, "dest": repo + "/"})
	probe := "dpkg-query -W -f='${Status}' kubexm-it-dummy 2>/dev/null"
	steptest.ConvergeRemote(t, registered(t, "package"), env, step.Args{"name": "kubexm-it-dummy", "offline_repo": repo}, probe)
	if got := steptest.Sh(t, env, probe); got != "install ok installed" {
		t.Fatalf("status %q", got)
	}
	steptest.ConvergeRemote(t, registered(t, "package"), env, step.Args{"name": "kubexm-it-dummy", "state": "absent"}, probe)
}

// TestIntegrationFilesOverSSH runs the file builtins through the SSH
// transport, where reads, writes and stats go over SFTP.
func TestIntegrationFilesOverSSH(t *testing.T) {
	env := steptest.RemoteEnv(t, steptest.Machines(t), 0)
	base := "/tmp/kubexm-it-files"
	t.Cleanup(func() { steptest.Sh(t, env, "rm -rf "+base) })
	probe := "find " + base + " -exec stat -c '%n %a %U' {} + 2>/dev/null | sort; cat " + base + "/hosts 2>/dev/null"
	steptest.ConvergeRemote(t, registered(t, "file"), env, step.Args{"path": base, "state": "directory", "mode": "0750"}, probe)
	steptest.ConvergeRemote(t, registered(t, "copy"), env, step.Args{"dest": base + "/hosts", "content": "127.0.0.1 localhost\n", "mode": "0644"}, probe)
	steptest.ConvergeRemote(t, registered(t, "blockinfile"), env, step.Args{"path": base + "/hosts", "block": "10.0.0.1 n1"}, probe)
	steptest.ConvergeRemote(t, registered(t, "lineinfile"), env, step.Args{"path": base + "/hosts", "regexp": "^127", "line": "127.0.0.1 localhost localhost.localdomain"}, probe)
	want := "127.0.0.1 localhost localhost.localdomain\n# BEGIN kubexm managed block\n10.0.0.1 n1\n# END kubexm managed block"
	if got := steptest.Sh(t, env, "cat "+base+"/hosts"); got != want {
		t.Fatalf("%q", got)
	}
	steptest.ConvergeRemote(t, registered(t, "file"), env, step.Args{"path": base + "/link", "state": "link", "src": base + "/hosts"}, probe)
	fetched := steptest.Run(t, registered(t, "fetch"), env, step.Args{"src": base + "/hosts", "dest": "fetched"})
	if got, _ := os.ReadFile(fetched.Data["dest"].(string)); !bytes.Equal(bytes.TrimSpace(got), []byte(want)) {
		t.Fatalf("fetched %q", got)
	}
}

func TestIntegrationSetup(t *testing.T) {
	env := steptest.RemoteEnv(t, steptest.Machines(t), 0)
	res := steptest.Run(t, setupBuiltin{}, env, step.Args{})
	f, _ := res.Facts["facts"].(map[string]any)
	if f["os_id"] != "debian" || f["systemd"] != true || f["hostname"] == "" {
		t.Fatalf("%v", f)
	}
}
