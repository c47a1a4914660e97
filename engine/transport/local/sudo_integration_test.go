//go:build integration

package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/engine/transport"
)

// The sudo tests run the local transport as a throwaway user that needs a
// password for sudo: the test (root) creates the user and re-executes its
// own binary as that user, which then acts as the child named by helperEnv.
const (
	sudoUser     = "kxlocal"
	sudoPassword = "kx-Local-Secret-1"
	sudoersFile  = "/etc/sudoers.d/kxlocal"
	helperEnv    = "KXM_LOCAL_SUDO_HELPER"
	helperDirEnv = "KXM_LOCAL_SUDO_DIR"
)

func TestLocalSudoPassword(t *testing.T) {
	if mode := os.Getenv(helperEnv); mode != "" {
		sudoHelper(t, mode, os.Getenv(helperDirEnv))
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root (to create a user and a sudoers entry)")
	}
	if _, err := exec.LookPath("sudo"); err != nil {
		t.Fatalf("the sudo tests need sudo on this machine (apt-get install sudo): %v", err)
	}
	cleanup := func() {
		run(t, false, "userdel", "-f", "-r", sudoUser)
		os.Remove(sudoersFile)
		os.RemoveAll("/run/sudo/ts/" + sudoUser)
	}
	cleanup()
	t.Cleanup(cleanup)
	run(t, true, "useradd", "-m", "-s", "/bin/sh", sudoUser)
	chpw := exec.Command("chpasswd")
	chpw.Stdin = strings.NewReader(sudoUser + ":" + sudoPassword + "\n")
	if out, err := chpw.CombinedOutput(); err != nil {
		t.Fatalf("chpasswd: %v: %s", err, out)
	}
	if err := os.WriteFile(sudoersFile, []byte(sudoUser+" ALL=(ALL) ALL\n"), 0o440); err != nil {
		t.Fatal(err)
	}
	run(t, true, "visudo", "-c", "-f", sudoersFile)
	u, err := user.Lookup(sudoUser)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)

	// A directory the user may enter, holding the test binary, a directory
	// of the user's and one only root may write.
	dir := t.TempDir()
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "local.test")
	run(t, true, "cp", self, bin)
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	userDir := filepath.Join(dir, "user")
	rootDir := filepath.Join(dir, "root")
	secret := filepath.Join(dir, "secret") // not even searchable by the user
	for _, d := range []string{userDir, rootDir, secret} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(userDir, uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(secret, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secret, "f"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}

	child := func(t *testing.T, mode string) {
		// Each child is a new parent process for sudo, so credentials
		// cached by another child do not carry over; the record is
		// removed anyway.
		os.RemoveAll("/run/sudo/ts/" + sudoUser)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "-test.run=^TestLocalSudoPassword$", "-test.v", "-test.timeout=100s")
		cmd.Dir = userDir
		cmd.Env = []string{
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"HOME=" + u.HomeDir, "USER=" + sudoUser, "LOGNAME=" + sudoUser,
			"TMPDIR=" + userDir,
			helperEnv + "=" + mode, helperDirEnv + "=" + dir,
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		out, err := cmd.CombinedOutput()
		t.Logf("child %s:\n%s", mode, out)
		if err != nil {
			t.Fatalf("child %s: %v", mode, err)
		}
		if !strings.Contains(string(out), "helper "+mode+" done") {
			t.Fatalf("child %s did not run the helper", mode)
		}
	}
	t.Run("password", func(t *testing.T) {
		child(t, "password")
		fi, err := os.Stat(filepath.Join(rootDir, "put"))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != 0 || st.Gid != 0 || fi.Mode().Perm() != 0o640 {
			t.Fatalf("put file: uid=%d gid=%d mode=%v, want root:root 0640", st.Uid, st.Gid, fi.Mode())
		}
	})
	t.Run("wrong-password", func(t *testing.T) { child(t, "wrong") })
	t.Run("no-password", func(t *testing.T) { child(t, "none") })
}

func run(t *testing.T, must bool, name string, args ...string) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil && must {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}

// sudoHelper is the child: it runs as sudoUser.
func sudoHelper(t *testing.T, mode, dir string) {
	if os.Geteuid() == 0 {
		t.Fatal("the helper must not run as root")
	}
	switch mode {
	case "password":
		helperPassword(t, dir)
	case "wrong":
		helperRefused(t, New("localhost", WithBecomePassword("not-the-password")), "incorrect password")
	case "none":
		helperRefused(t, New("localhost"), "password is required")
	default:
		t.Fatalf("unknown helper mode %q", mode)
	}
	fmt.Printf("helper %s done\n", mode)
}

func mustRun(t *testing.T, tr *Transport, c transport.Command) transport.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := tr.Run(ctx, c)
	if err != nil {
		t.Fatalf("%v: %v", c.Argv, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("%v: exit %d: %s", c.Argv, res.ExitCode, res.Stderr)
	}
	for _, leak := range []string{"KXM:", sudoPassword, "password"} {
		if bytes.Contains(res.Stderr, []byte(leak)) || bytes.Contains(res.Stdout, []byte(leak)) {
			t.Fatalf("%v: %q in the output: stdout %q stderr %q", c.Argv, leak, res.Stdout, res.Stderr)
		}
	}
	return res
}

func helperPassword(t *testing.T, dir string) {
	ctx := context.Background()
	tr := New("localhost", WithBecomePassword(sudoPassword))

	// The first sudo asks for the password: the command's stdin must
	// arrive whole all the same.
	in := strings.Repeat("line of stdin for the command\n", 40000) // > 1 MiB
	var streamed bytes.Buffer
	res := mustRun(t, tr, transport.Command{Argv: []string{"/bin/sh", "-c", "cat; echo to-stderr >&2"},
		Stdin: strings.NewReader(in), Become: true, Stderr: &streamed})
	if string(res.Stdout) != in {
		t.Fatalf("first sudo: stdin did not reach the command intact (%d bytes of %d)", len(res.Stdout), len(in))
	}
	if string(res.Stderr) != "to-stderr\n" || streamed.String() != "to-stderr\n" {
		t.Fatalf("first sudo: stderr %q streamed %q, want only the command's", res.Stderr, streamed.String())
	}

	// The credentials are cached now: sudo -n (a transport without a
	// password) succeeds, and sudo -S asks for nothing, so stdin must not
	// be taken for an answer or lost.
	if res := mustRun(t, New("localhost"), transport.Command{Argv: []string{"id", "-u"}, Become: true}); string(res.Stdout) != "0\n" {
		t.Fatalf("cached credentials: id -u = %q", res.Stdout)
	}
	res = mustRun(t, tr, transport.Command{Argv: []string{"cat"}, Stdin: strings.NewReader("second\n"), Become: true})
	if string(res.Stdout) != "second\n" {
		t.Fatalf("cached sudo: stdin gave %q", res.Stdout)
	}
	if res := mustRun(t, tr, transport.Command{Argv: []string{"id", "-u"}, Become: true}); string(res.Stdout) != "0\n" {
		t.Fatalf("id -u = %q, want 0", res.Stdout)
	}
	if res := mustRun(t, tr, transport.Command{Argv: []string{"id", "-u"}}); string(res.Stdout) == "0\n" {
		t.Fatal("without become the command ran as root")
	}
	// Env and a non-zero exit status pass through sudo.
	res, err := tr.Run(ctx, transport.Command{Script: `echo "$FOO"; exit 5`, Env: map[string]string{"FOO": "a 'b' c"}, Become: true})
	if err != nil || res.ExitCode != 5 || string(res.Stdout) != "a 'b' c\n" {
		t.Fatalf("env/exit through sudo: %q rc=%d err=%v", res.Stdout, res.ExitCode, err)
	}

	// Files through sudo: the upload lands root-owned, atomically (a new
	// inode each time, no temporary file left).
	src := filepath.Join(dir, "user", "src")
	if err := os.WriteFile(src, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "root", "put")
	opts := transport.PutOptions{Mode: 0o640, Owner: "root", Group: "root", Become: true}
	if changed, err := tr.PutFile(ctx, src, dst, opts); err != nil || !changed {
		t.Fatalf("put: changed=%v err=%v", changed, err)
	}
	fi1, err := os.Stat(dst)
	if err != nil {
		t.Fatal(err)
	}
	if changed, err := tr.PutFile(ctx, src, dst, opts); err != nil || changed {
		t.Fatalf("same put again: changed=%v err=%v", changed, err)
	}
	if err := os.WriteFile(src, []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	if changed, err := tr.PutFile(ctx, src, dst, opts); err != nil || !changed {
		t.Fatalf("new content: changed=%v err=%v", changed, err)
	}
	fi2, err := os.Stat(dst)
	if err != nil {
		t.Fatal(err)
	}
	if fi1.Sys().(*syscall.Stat_t).Ino == fi2.Sys().(*syscall.Stat_t).Ino {
		t.Fatal("the upload rewrote the file in place instead of renaming a new one over it")
	}
	if entries, _ := os.ReadDir(filepath.Dir(dst)); len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
	if _, err := os.ReadFile(dst); err == nil {
		t.Fatal("the user can read the root-only file")
	}
	var got bytes.Buffer
	if err := tr.Get(ctx, dst, &got, true); err != nil || got.String() != "two" {
		t.Fatalf("get through sudo: %q %v", got.String(), err)
	}
	if sum, err := tr.Sha256(ctx, dst, true); err != nil || sum != "3fc4ccfe745870e2c0d99f71f30ff0656c8dedd41cc1d7d3d376b0dbe685e2f3" {
		t.Fatalf("sha256 through sudo: %q %v", sum, err)
	}
	fi, err := tr.Stat(ctx, dst, true)
	if err != nil || fi.Owner != "root" || fi.Group != "root" || fi.Mode != 0o640 {
		t.Fatalf("stat: %+v %v", fi, err)
	}
	// A path the user cannot even reach is stat'ed through sudo.
	fi, err = tr.Stat(ctx, filepath.Join(dir, "secret", "f"), true)
	if err != nil || !fi.Exists || fi.Size != 6 || fi.Mode != 0o600 || fi.Owner != "root" {
		t.Fatalf("stat through sudo: %+v %v", fi, err)
	}
	if fi, err := tr.Stat(ctx, filepath.Join(dir, "secret", "missing"), true); err != nil || fi.Exists {
		t.Fatalf("missing through sudo: %+v %v", fi, err)
	}

	// Cancelling stops the root command and its children.
	pidFile := filepath.Join(dir, "user", "pid")
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := tr.Run(cctx, transport.Command{Script: "sleep 600 & echo $! > " + pidFile + "; wait", Become: true})
		done <- err
	}()
	var pid string
	for i := 0; i < 500 && pid == ""; i++ {
		b, _ := os.ReadFile(pidFile)
		pid = strings.TrimSpace(string(b))
		time.Sleep(10 * time.Millisecond)
	}
	if pid == "" {
		t.Fatal("command did not start")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("want context.Canceled, got %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil || strings.Contains(string(b), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("root sleep %s still running after cancel", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// helperRefused checks that sudo failing to authenticate is a quick, clear
// error: no hang, no command run, stdin not consumed by sudo as a password.
func helperRefused(t *testing.T, tr *Transport, want string) {
	marker := filepath.Join(t.TempDir(), "ran")
	for _, c := range []transport.Command{
		{Argv: []string{"id", "-u"}, Become: true},
		{Argv: []string{"/bin/sh", "-c", "cat > " + marker}, Stdin: strings.NewReader("stdin\n"), Become: true},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		start := time.Now()
		res, err := tr.Run(ctx, c)
		cancel()
		took := time.Since(start)
		var be *transport.BecomeError
		if !errors.As(err, &be) {
			t.Fatalf("%v: want a BecomeError, got %v (rc=%d stdout %q)", c.Argv, err, res.ExitCode, res.Stdout)
		}
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("%v: error %q does not say %q", c.Argv, err, want)
		}
		if strings.Contains(err.Error(), "KXM:") || strings.Contains(err.Error(), sudoPassword) {
			t.Fatalf("%v: error shows the prompt or password: %v", c.Argv, err)
		}
		if took > 15*time.Second {
			t.Fatalf("%v: took %s to fail", c.Argv, took)
		}
		t.Logf("%v failed in %s: %v", c.Argv, took.Round(time.Millisecond), err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the command ran although sudo refused")
	}
	var sink bytes.Buffer
	if err := tr.Get(context.Background(), "/etc/shadow", io.Writer(&sink), true); err == nil {
		t.Fatal("get through a refused sudo succeeded")
	}
}
