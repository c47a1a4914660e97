//go:build integration

package builtins

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/engine/transport/local"
	"github.com/mensylisir/kubexm/engine/transport/ssh"
	"github.com/mensylisir/kubexm/inventory"
	"github.com/mensylisir/kubexm/test/testhosts"
)

// These tests run on the test machines: `make hosts-up N=3` (or
// test/hosts/up.sh), `source <state>/hosts.env`, then
// go test -tags integration ./builtins -run Integration

func machines(t testing.TB) *testhosts.Set {
	t.Helper()
	set, err := testhosts.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func remoteEnv(t testing.TB, set *testhosts.Set, i int) *step.Env {
	t.Helper()
	h := set.Hosts[i]
	tr, err := ssh.Dial(t.Context(), &inventory.Host{Name: h.Name, Address: h.Address, Port: h.Port, User: "root", PrivateKeyPath: set.KeyPath},
		ssh.Options{HostKeyChecking: ssh.Off})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	env, _ := testEnv(t)
	env.Host = h.Name
	env.Target = tr
	env.Control = local.New("localhost")
	return env
}

// sh runs a script on the machine and returns its trimmed stdout.
func sh(t *testing.T, env *step.Env, script string) string {
	t.Helper()
	res, err := env.Target.Run(context.Background(), transport.Command{Script: script})
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(res.Stdout))
}

// convergeRemote: check mode must leave probe's answer unchanged, the first
// run changes, the second does not.
func convergeRemote(t *testing.T, b step.Builtin, env *step.Env, args step.Args, probe string) {
	t.Helper()
	before := sh(t, env, probe)
	env.Check = true
	if res := runB(t, b, env, args); !res.Changed {
		t.Fatalf("%s check: want changed, got %+v", b.Spec().Name, res)
	}
	env.Check = false
	if after := sh(t, env, probe); after != before {
		t.Fatalf("%s: check mode changed the host: %q -> %q", b.Spec().Name, before, after)
	}
	if res := runB(t, b, env, args); !res.Changed {
		t.Fatalf("%s first: want changed, got %+v", b.Spec().Name, res)
	}
	if res := runB(t, b, env, args); res.Changed {
		t.Fatalf("%s second: want unchanged, got %+v", b.Spec().Name, res)
	}
}

func TestIntegrationSystemd(t *testing.T) {
	env := remoteEnv(t, machines(t), 0)
	// Under /usr/lib: systemd refuses to mask a unit whose file is in /etc.
	unit := "/usr/lib/systemd/system/kubexm-it.service"
	t.Cleanup(func() {
		sh(t, env, "systemctl disable --now kubexm-it kubexm-it-bad 2>/dev/null; rm -f "+unit+" /etc/systemd/system/kubexm-it-bad.service; systemctl daemon-reload")
	})
	runB(t, copyBuiltin{}, env, step.Args{"dest": unit, "content": "[Unit]\nDescription=kubexm it\n[Service]\nExecStart=/bin/sleep infinity\n[Install]\nWantedBy=multi-user.target\n"})
	probe := "systemctl is-active kubexm-it; systemctl is-enabled kubexm-it"
	convergeRemote(t, systemdBuiltin{}, env, step.Args{"name": "kubexm-it", "state": "started", "enabled": true, "daemon_reload": true}, probe)
	if got := sh(t, env, probe); got != "active\nenabled" {
		t.Fatalf("state %q", got)
	}
	convergeRemote(t, systemdBuiltin{}, env, step.Args{"name": "kubexm-it", "state": "stopped", "enabled": false}, probe)
	convergeRemote(t, systemdBuiltin{}, env, step.Args{"name": "kubexm-it", "masked": true}, probe)
	convergeRemote(t, systemdBuiltin{}, env, step.Args{"name": "kubexm-it", "masked": false}, probe)

	runB(t, copyBuiltin{}, env, step.Args{"dest": "/etc/systemd/system/kubexm-it-bad.service", "content": "[Service]\nType=oneshot\nExecStart=/bin/sh -c 'echo kubexm-broken-marker; exit 3'\n"})
	_, err := runBuiltin(t.Context(), env, systemdBuiltin{}, step.Args{"name": "kubexm-it-bad", "state": "started", "daemon_reload": true})
	if err == nil || !strings.Contains(err.Error(), "kubexm-broken-marker") {
		t.Fatalf("want the journal lines in the error, got %v", err)
	}
}

func TestIntegrationSysctl(t *testing.T) {
	env := remoteEnv(t, machines(t), 0)
	file := "/etc/sysctl.d/99-kubexm-it.conf"
	orig := sh(t, env, "cat /proc/sys/net/ipv4/ip_local_port_range")
	t.Cleanup(func() { sh(t, env, "rm -f "+file+"; sysctl -w net.ipv4.ip_local_port_range='"+orig+"'") })
	convergeRemote(t, sysctlBuiltin{}, env, step.Args{"name": "net.ipv4.ip_local_port_range", "value": "32768   60998", "sysctl_file": file},
		"cat /proc/sys/net/ipv4/ip_local_port_range; cat "+file+" 2>/dev/null")
	if got := sh(t, env, "cat /proc/sys/net/ipv4/ip_local_port_range"); strings.Join(strings.Fields(got), " ") != "32768 60998" {
		t.Fatalf("running value %q", got)
	}
	if got := sh(t, env, "cat "+file); got != "net.ipv4.ip_local_port_range = 32768 60998" {
		t.Fatalf("file %q", got)
	}
	// Kernel-global keys are read-only inside a machine.
	res := runB(t, sysctlBuiltin{}, env, step.Args{"name": "kernel.pid_max", "value": "4194303", "sysctl_file": file, "ignore_apply_errors": true})
	if !strings.Contains(res.Msg, "warning") && sh(t, env, "cat /proc/sys/kernel/pid_max") != "4194303" {
		t.Fatalf("%+v", res)
	}
}

func TestIntegrationModprobe(t *testing.T) {
	env := remoteEnv(t, machines(t), 0)
	t.Cleanup(func() {
		sh(t, env, "rm -f /etc/modules-load.d/overlay.conf /etc/modules-load.d/kubexm_nonexistent.conf")
	})
	// overlay is built into the test kernel: loaded, so only the boot
	// config changes.
	convergeRemote(t, modprobeBuiltin{}, env, step.Args{"name": "overlay"}, "cat /etc/modules-load.d/overlay.conf 2>/dev/null")
	if _, err := runBuiltin(t.Context(), env, modprobeBuiltin{}, step.Args{"name": "kubexm_nonexistent"}); err == nil {
		t.Fatal("want an error for a module that does not exist")
	}
	res := runB(t, modprobeBuiltin{}, env, step.Args{"name": "kubexm_nonexistent", "ignore_load_errors": true, "persistent": "disabled"})
	if !strings.Contains(res.Msg, "warning") {
		t.Fatalf("%+v", res)
	}
}

func TestIntegrationHostnameTimezone(t *testing.T) {
	env := remoteEnv(t, machines(t), 0)
	orig := sh(t, env, "hostname")
	origTZ := sh(t, env, "readlink /etc/localtime")
	t.Cleanup(func() {
		runB(t, hostnameBuiltin{}, env, step.Args{"name": orig})
		sh(t, env, "ln -sfn "+origTZ+" /etc/localtime")
	})
	convergeRemote(t, hostnameBuiltin{}, env, step.Args{"name": orig + "-renamed"}, "hostname; cat /etc/hostname")
	if got := sh(t, env, "hostname; cat /etc/hostname"); got != orig+"-renamed\n"+orig+"-renamed" {
		t.Fatalf("%q", got)
	}
	zone := "Asia/Shanghai"
	if strings.HasSuffix(origTZ, zone) {
		zone = "Europe/Berlin"
	}
	convergeRemote(t, timezoneBuiltin{}, env, step.Args{"name": zone}, "readlink /etc/localtime")
}

func TestIntegrationUserGroup(t *testing.T) {
	env := remoteEnv(t, machines(t), 0)
	t.Cleanup(func() { sh(t, env, "userdel kubexmit 2>/dev/null; groupdel kubexmitg 2>/dev/null; true") })
	// The group's name differs from the user's, so userdel leaves it.
	convergeRemote(t, groupBuiltin{}, env, step.Args{"name": "kubexmitg", "gid": 4242, "system": true}, "getent group kubexmitg")
	convergeRemote(t, groupBuiltin{}, env, step.Args{"name": "kubexmitg", "gid": 4243}, "getent group kubexmitg")
	convergeRemote(t, userBuiltin{}, env, step.Args{"name": "kubexmit", "uid": 4242, "group": "kubexmitg", "shell": "/usr/sbin/nologin", "home": "/var/lib/kubexmit", "create_home": false, "system": true}, "getent passwd kubexmit")
	convergeRemote(t, userBuiltin{}, env, step.Args{"name": "kubexmit", "shell": "/bin/false", "groups": []any{"adm"}}, "getent passwd kubexmit; id -nG kubexmit")
	convergeRemote(t, userBuiltin{}, env, step.Args{"name": "kubexmit", "state": "absent"}, "getent passwd kubexmit")
	convergeRemote(t, groupBuiltin{}, env, step.Args{"name": "kubexmitg", "state": "absent"}, "getent group kubexmitg")
}

// TestIntegrationPackageOffline builds a tiny .deb, ships it to the
// machine and installs it from the offline directory, without network.
func TestIntegrationPackageOffline(t *testing.T) {
	env := remoteEnv(t, machines(t), 0)
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Fatal("dpkg-deb is needed on the control machine to build the test package")
	}
	dir := t.TempDir()
	pkg := filepath.Join(dir, "pkg")
	mustWrite(t, filepath.Join(pkg, "DEBIAN", "control"), "Package: kubexm-it-dummy\nVersion: 1.0\nArchitecture: all\nMaintainer: kubexm <kubexm@example.com>\nDescription: kubexm integration test package\n")
	mustWrite(t, filepath.Join(pkg, "usr", "share", "doc", "kubexm-it-dummy", "README"), "kubexm\n")
	deb := filepath.Join(dir, "kubexm-it-dummy_1.0_all.deb")
	if out, err := exec.Command("dpkg-deb", "--root-owner-group", "--build", pkg, deb).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb: %v %s", err, out)
	}
	repo := "/tmp/kubexm-it-offline"
	t.Cleanup(func() { sh(t, env, "dpkg -P kubexm-it-dummy >/dev/null 2>&1; rm -rf "+repo) })
	runB(t, distributeBuiltin{}, env, step.Args{"src": deb, "dest": repo + "/"})
	probe := "dpkg-query -W -f='${Status}' kubexm-it-dummy 2>/dev/null"
	convergeRemote(t, packageBuiltin{}, env, step.Args{"name": "kubexm-it-dummy", "offline_repo": repo}, probe)
	if got := sh(t, env, probe); got != "install ok installed" {
		t.Fatalf("status %q", got)
	}
	convergeRemote(t, packageBuiltin{}, env, step.Args{"name": "kubexm-it-dummy", "state": "absent"}, probe)
}

func TestIntegrationDistribute(t *testing.T) {
	set := machines(t)
	src := filepath.Join(t.TempDir(), "artifact.bin")
	data := make([]byte, 8<<20)
	rand.Read(data)
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	dest := "/tmp/kubexm-it/artifact.bin"
	args := step.Args{"src": src, "dest": dest, "mode": "0755"}
	var wg sync.WaitGroup
	for i := range set.Hosts {
		env := remoteEnv(t, set, i)
		t.Cleanup(func() { sh(t, env, "rm -rf /tmp/kubexm-it") })
		wg.Go(func() {
			convergeRemote(t, distributeBuiltin{}, env, args, "sha256sum "+dest+" 2>/dev/null; stat -c %a "+dest+" 2>/dev/null")
			if got := sh(t, env, "sha256sum "+dest); !strings.HasPrefix(got, sha256Hex(data)) {
				t.Errorf("%s: %q", env.Host, got)
			}
		})
	}
	wg.Wait()
}

// TestIntegrationFilesOverSSH runs the file builtins through the SSH
// transport, where reads, writes and stats go over SFTP.
func TestIntegrationFilesOverSSH(t *testing.T) {
	env := remoteEnv(t, machines(t), 0)
	base := "/tmp/kubexm-it-files"
	t.Cleanup(func() { sh(t, env, "rm -rf "+base) })
	probe := "find " + base + " -exec stat -c '%n %a %U' {} + 2>/dev/null | sort; cat " + base + "/hosts 2>/dev/null"
	convergeRemote(t, fileBuiltin{}, env, step.Args{"path": base, "state": "directory", "mode": "0750"}, probe)
	convergeRemote(t, copyBuiltin{}, env, step.Args{"dest": base + "/hosts", "content": "127.0.0.1 localhost\n", "mode": "0644"}, probe)
	convergeRemote(t, blockinfileBuiltin{}, env, step.Args{"path": base + "/hosts", "block": "10.0.0.1 n1"}, probe)
	convergeRemote(t, lineinfileBuiltin{}, env, step.Args{"path": base + "/hosts", "regexp": "^127", "line": "127.0.0.1 localhost localhost.localdomain"}, probe)
	want := "127.0.0.1 localhost localhost.localdomain\n# BEGIN kubexm managed block\n10.0.0.1 n1\n# END kubexm managed block"
	if got := sh(t, env, "cat "+base+"/hosts"); got != want {
		t.Fatalf("%q", got)
	}
	convergeRemote(t, fileBuiltin{}, env, step.Args{"path": base + "/link", "state": "link", "src": base + "/hosts"}, probe)
	fetched := runB(t, fetchBuiltin{}, env, step.Args{"src": base + "/hosts", "dest": "fetched"})
	if got, _ := os.ReadFile(fetched.Data["dest"].(string)); !bytes.Equal(bytes.TrimSpace(got), []byte(want)) {
		t.Fatalf("fetched %q", got)
	}
}

func TestIntegrationSetup(t *testing.T) {
	env := remoteEnv(t, machines(t), 0)
	res := runB(t, setupBuiltin{}, env, step.Args{})
	f, _ := res.Facts["facts"].(map[string]any)
	if f["os_id"] != "debian" || f["systemd"] != true || f["hostname"] == "" {
		t.Fatalf("%v", f)
	}
}
