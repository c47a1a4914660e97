package files

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/builtins/internal/steptest"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
)

func syncArgs(dir, hostDir, direction string, extra map[string]any) step.Args {
	a := step.Args{"dir": dir, "host_dir": hostDir, "direction": direction}
	for k, v := range extra {
		a[k] = v
	}
	return a
}

func TestSyncDirPullTakesOnlyWhatTheControlMachineLacks(t *testing.T) {
	env, root := steptest.Env(t)
	host := filepath.Join(root, "host", "pki")
	steptest.MustWrite(t, filepath.Join(host, "kubernetes", "ca.crt"), "host ca")
	steptest.MustWrite(t, filepath.Join(host, "kubernetes", "ca.key"), "host key")
	steptest.MustWrite(t, filepath.Join(host, "etcd", "ca.pem"), "etcd ca")
	local := filepath.Join(env.WorkDir, "certs")
	steptest.MustWrite(t, filepath.Join(local, "kubernetes", "ca.crt"), "another ca")

	res, err := steptest.RunBuiltin(context.Background(), env, syncDirBuiltin{}, syncArgs("certs", host, "pull", nil))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Changed {
		t.Fatalf("pulling two missing files reported no change: %+v", res)
	}
	if got, want := res.Data["pulled"], []any{"etcd/ca.pem", "kubernetes/ca.key"}; !reflect.DeepEqual(got, want) {
		t.Errorf("pulled %v, want %v", got, want)
	}
	if got, want := res.Data["differ"], []any{"kubernetes/ca.crt"}; !reflect.DeepEqual(got, want) {
		t.Errorf("differ %v, want %v", got, want)
	}
	if got := steptest.MustRead(t, filepath.Join(local, "kubernetes", "ca.crt")); got != "another ca" {
		t.Errorf("pull overwrote the control machine's differing file: %q", got)
	}
	if got := steptest.MustRead(t, filepath.Join(local, "kubernetes", "ca.key")); got != "host key" {
		t.Errorf("pulled key holds %q", got)
	}
	fi, err := os.Stat(filepath.Join(local, "kubernetes", "ca.key"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("pulled key's mode %v (%v), want 0600", fi.Mode(), err)
	}
	if res.Data["host_exists"] != true {
		t.Errorf("host_exists = %v", res.Data["host_exists"])
	}

	again, err := steptest.RunBuiltin(context.Background(), env, syncDirBuiltin{}, syncArgs("certs", host, "pull", nil))
	if err != nil || again.Changed {
		t.Fatalf("a second pull changed something: %+v, %v", again, err)
	}

	// overwrite: the host's copy replaces a differing one.
	res, err = steptest.RunBuiltin(context.Background(), env, syncDirBuiltin{}, syncArgs("certs", host, "pull", map[string]any{"overwrite": true}))
	if err != nil || !reflect.DeepEqual(res.Data["pulled"], []any{"kubernetes/ca.crt"}) || steptest.MustRead(t, filepath.Join(local, "kubernetes", "ca.crt")) != "host ca" {
		t.Fatalf("overwrite: %+v, %v", res, err)
	}

	// into_empty takes a tree whole or not at all.
	steptest.MustWrite(t, filepath.Join(host, "kubernetes", "new.crt"), "new")
	res, err = steptest.RunBuiltin(context.Background(), env, syncDirBuiltin{}, syncArgs("certs", host, "pull", map[string]any{"into_empty": true}))
	if err != nil || res.Changed {
		t.Fatalf("into_empty pulled into a directory holding files: %+v, %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(local, "kubernetes", "new.crt")); !os.IsNotExist(err) {
		t.Errorf("into_empty wrote new.crt: %v", err)
	}
	empty := filepath.Join(env.WorkDir, "empty")
	res, err = steptest.RunBuiltin(context.Background(), env, syncDirBuiltin{}, syncArgs(empty, host, "pull", map[string]any{"into_empty": true}))
	if err != nil || len(res.Data["pulled"].([]any)) != 4 {
		t.Fatalf("into_empty into an empty directory: %+v, %v", res, err)
	}
}

func TestSyncDirPushWritesDifferingAndMissingFilesOnly(t *testing.T) {
	env, root := steptest.Env(t)
	host := filepath.Join(root, "host", "pki")
	local := filepath.Join(env.WorkDir, "certs")
	steptest.MustWrite(t, filepath.Join(local, "a.crt"), "a")
	steptest.MustWrite(t, filepath.Join(local, "sub", "b.key"), "b")
	steptest.MustWrite(t, filepath.Join(host, "a.crt"), "old a")
	steptest.MustWrite(t, filepath.Join(host, "stale"), "stale")

	env.Check = true
	res, err := steptest.RunBuiltin(context.Background(), env, syncDirBuiltin{}, syncArgs("certs", host, "push", map[string]any{"delete": true}))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Changed || steptest.MustRead(t, filepath.Join(host, "a.crt")) != "old a" {
		t.Fatalf("check mode: changed=%v, or it wrote the host's file", res.Changed)
	}
	env.Check = false
	env.Diff = true
	res, err = steptest.RunBuiltin(context.Background(), env, syncDirBuiltin{}, syncArgs("certs", host, "push", map[string]any{"delete": true}))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.Data["pushed"], []any{"a.crt", "sub/b.key"}; !reflect.DeepEqual(got, want) {
		t.Errorf("pushed %v, want %v", got, want)
	}
	if strings.Contains(res.Diff, "old a") || !strings.Contains(res.Diff, "+ sub/b.key") || !strings.Contains(res.Diff, "- stale") {
		t.Errorf("the diff must name files and show no content: %q", res.Diff)
	}
	if steptest.MustRead(t, filepath.Join(host, "a.crt")) != "a" || steptest.MustRead(t, filepath.Join(host, "sub", "b.key")) != "b" {
		t.Error("push did not write the control machine's content")
	}
	if _, err := os.Stat(filepath.Join(host, "stale")); !os.IsNotExist(err) {
		t.Errorf("delete left the host-only file: %v", err)
	}
	fi, err := os.Stat(filepath.Join(host, "sub"))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v (%v), want 0700", fi.Mode(), err)
	}
	again, err := steptest.RunBuiltin(context.Background(), env, syncDirBuiltin{}, syncArgs("certs", host, "push", nil))
	if err != nil || again.Changed {
		t.Fatalf("a second push changed something: %+v, %v", again, err)
	}
}

func TestSyncDirAbsentHostDirAndRefusedNames(t *testing.T) {
	env, root := steptest.Env(t)
	steptest.MustWrite(t, filepath.Join(env.WorkDir, "certs", "ca.crt"), "ca")
	res, err := steptest.RunBuiltin(context.Background(), env, syncDirBuiltin{}, syncArgs("certs", filepath.Join(root, "none"), "pull", nil))
	if err != nil {
		t.Fatal(err)
	}
	if res.Changed || res.Data["host_exists"] != false || !reflect.DeepEqual(res.Data["only_control"], []any{"ca.crt"}) {
		t.Errorf("an absent host dir: %+v", res)
	}
	for _, bad := range []string{"relative", "/"} {
		if _, err := steptest.RunBuiltin(context.Background(), env, syncDirBuiltin{}, syncArgs("certs", bad, "pull", nil)); err == nil {
			t.Errorf("host_dir %q was taken", bad)
		}
	}
	odd := filepath.Join(root, "odd")
	steptest.MustWrite(t, filepath.Join(odd, "a b"), "x")
	if _, err := steptest.RunBuiltin(context.Background(), env, syncDirBuiltin{}, syncArgs("certs", odd, "pull", nil)); err == nil || !strings.Contains(err.Error(), "a b") {
		t.Errorf("a file name with a space: %v", err)
	}
	if _, err := steptest.RunBuiltin(context.Background(), env, syncDirBuiltin{}, syncArgs("certs", odd, "pull", map[string]any{"delete": true})); err == nil {
		t.Error("delete with pull was taken")
	}
}

// A host's reply naming a path that climbs out of the tree (a hostile or
// broken host; find itself never prints one) is refused, and nothing is
// written outside dir.
func TestSyncDirRefusesNamesOutsideTheTree(t *testing.T) {
	env, root := steptest.Env(t)
	sum := strings.Repeat("a", 64)
	for _, name := range []string{"../../escaped", "ok/../../escaped", "./.", "a/./b"} {
		reply := "present\n" + sum + "  ./" + name + "\n"
		host := steptest.NewFake(func(cmd string) (transport.Result, bool) { return steptest.OK(reply) })
		env.Target = host
		_, err := steptest.RunBuiltin(context.Background(), env, syncDirBuiltin{}, syncArgs("certs", "/var/lib/x", "pull", nil))
		if err == nil || !strings.Contains(err.Error(), "does not take") {
			t.Errorf("%q: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "escaped")); !os.IsNotExist(err) {
		t.Errorf("a file was written outside the work directory: %v", err)
	}
}
