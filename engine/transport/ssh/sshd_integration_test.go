//go:build integration

package ssh

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/inventory"
)

// testUser is a throwaway account that needs a password for sudo.
const (
	testUser     = "kxtest"
	testPassword = "kx-Secret-1"
)

// sshd is an OpenSSH server on 127.0.0.1 started for the tests.
type sshd struct {
	dir     string
	port    int
	key     string // private key authorised for root and kxtest
	encKey  string // the same account's key encrypted with "pass phrase"
	hostPub string // the server's host key, known_hosts line material
	cmd     *exec.Cmd
}

var server *sshd

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	os.Unsetenv("SSH_AUTH_SOCK")
	if os.Geteuid() != 0 {
		fmt.Println("integration tests need root (to run sshd and create a user); skipped")
		return 0
	}
	s, err := startSSHD()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start sshd:", err)
		return 1
	}
	server = s
	defer s.stop()
	return m.Run()
}

func sh(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

func startSSHD() (*sshd, error) {
	if _, err := os.Stat("/usr/sbin/sshd"); err != nil {
		if err := sh("apt-get", "install", "-y", "--no-install-recommends", "openssh-server", "sudo"); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", "kxsshd-")
	if err != nil {
		return nil, err
	}
	// sshd reads authorized_keys as the user logging in.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	s := &sshd{dir: dir, key: filepath.Join(dir, "id"), encKey: filepath.Join(dir, "id_enc")}
	steps := [][]string{
		{"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, "hostkey")},
		{"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", s.key},
		{"ssh-keygen", "-q", "-t", "ed25519", "-N", "pass phrase", "-f", s.encKey},
		{"mkdir", "-p", "/run/sshd", filepath.Join(dir, "ak")},
	}
	for _, st := range steps {
		if err := sh(st[0], st[1:]...); err != nil {
			return nil, err
		}
	}
	sh("userdel", "-f", "-r", testUser)
	if err := sh("useradd", "-m", "-s", "/bin/sh", testUser); err != nil {
		return nil, err
	}
	if err := exec.Command("sh", "-c", fmt.Sprintf("echo '%s:%s' | chpasswd", testUser, testPassword)).Run(); err != nil {
		return nil, err
	}
	if _, err := exec.LookPath("sudo"); err != nil {
		return nil, fmt.Errorf("the sudo tests need sudo on this machine (apt-get install sudo): %w", err)
	}
	if err := os.WriteFile("/etc/sudoers.d/kxtest", []byte(testUser+" ALL=(ALL) ALL\n"+testUser+" ALL=(nobody) NOPASSWD: ALL\n"), 0o440); err != nil {
		return nil, err
	}
	pub, _ := os.ReadFile(s.key + ".pub")
	encPub, _ := os.ReadFile(s.encKey + ".pub")
	ak := append(append([]byte{}, pub...), encPub...)
	for _, u := range []string{"root", testUser} {
		if err := os.WriteFile(filepath.Join(dir, "ak", u), ak, 0o644); err != nil {
			return nil, err
		}
	}
	hp, _ := os.ReadFile(filepath.Join(dir, "hostkey.pub"))
	s.hostPub = strings.TrimSpace(string(hp))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	cfg := fmt.Sprintf(`ListenAddress 127.0.0.1
HostKey %[1]s/hostkey
PidFile %[1]s/sshd.pid
AuthorizedKeysFile %[1]s/ak/%%u
StrictModes no
PermitRootLogin yes
PasswordAuthentication yes
KbdInteractiveAuthentication no
UsePAM no
MaxSessions 10
MaxStartups 200
Subsystem sftp internal-sftp
LogLevel ERROR
`, dir)
	if err := os.WriteFile(filepath.Join(dir, "sshd_config"), []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	s.cmd = exec.Command("/usr/sbin/sshd", "-D", "-e", "-f", filepath.Join(dir, "sshd_config"), "-p", fmt.Sprint(s.port))
	// sshd's own log (e.g. "no more sessions" while a closed session is
	// still being released, which the client retries) stays out of the
	// test output.
	logf, err := os.Create(filepath.Join(dir, "sshd.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	s.cmd.Stderr = logf
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	for i := 0; i < 100; i++ {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", s.port)); err == nil {
			c.Close()
			return s, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.stop()
	return nil, fmt.Errorf("sshd did not listen on %d", s.port)
}

func (s *sshd) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
	}
	sh("userdel", "-f", "-r", testUser)
	os.Remove("/etc/sudoers.d/kxtest")
	os.RemoveAll(s.dir)
}

func (s *sshd) rootHost(name string) *inventory.Host {
	return &inventory.Host{Name: name, Address: "127.0.0.1", Port: s.port, User: "root", PrivateKeyPath: s.key}
}

// keyHost logs in as the test user with a key. Tests use it rather than
// root because root's login shell may run a slow ~/.bashrc for every
// session, which would measure the machine, not the transport.
func (s *sshd) keyHost(name string) *inventory.Host {
	return &inventory.Host{Name: name, Address: "127.0.0.1", Port: s.port, User: testUser, PrivateKeyPath: s.key}
}

func (s *sshd) userHost() *inventory.Host {
	return &inventory.Host{Name: "kx", Address: "127.0.0.1", Port: s.port, User: testUser, Password: testPassword}
}

// opts returns options with a fresh accept-new known_hosts under t's temp dir.
func (s *sshd) opts(t testing.TB) Options {
	return Options{KnownHostsPaths: []string{}, KnownHostsFile: filepath.Join(t.TempDir(), "known_hosts")}
}

func dialT(t testing.TB, h *inventory.Host, o Options) *Transport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tr, err := Dial(ctx, h, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// userDir returns a temporary directory the test user may write.
func userDir(t testing.TB) string {
	t.Helper()
	d := t.TempDir()
	u, err := user.Lookup(testUser)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chmod(filepath.Dir(d), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(d, uid, gid); err != nil {
		t.Fatal(err)
	}
	return d
}
