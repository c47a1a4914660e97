package testhosts

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The format up.sh writes.
const sampleEnv = `# Test machines of run t1, written by test/hosts/up.sh. Use: source /c/runs/t1/hosts.env
export KUBEXM_TEST_PREFIX=t1
export KUBEXM_TEST_HOSTS="n1=10.77.82.11 n2=10.77.82.12 n3=10.77.82.13:2222"
export KUBEXM_TEST_KEY=/c/runs/t1/id_ed25519
export KUBEXM_TEST_GATEWAY=10.77.82.1
export KUBEXM_TEST_INVENTORY=/c/runs/t1/cluster.yaml
export KUBEXM_TEST_SSH_CONFIG=/c/runs/t1/ssh_config
export KUBEXM_TEST_SUDO_USER=kubexm
export KUBEXM_TEST_SUDO_PASSWORD=kubexm
`

var sampleSet = &Set{
	Hosts: []Host{
		{Name: "n1", Address: "10.77.82.11", Port: 22},
		{Name: "n2", Address: "10.77.82.12", Port: 22},
		{Name: "n3", Address: "10.77.82.13", Port: 2222},
	},
	KeyPath:       "/c/runs/t1/id_ed25519",
	Gateway:       "10.77.82.1",
	InventoryPath: "/c/runs/t1/cluster.yaml",
	Prefix:        "t1",
	SSHConfigPath: "/c/runs/t1/ssh_config",
	SudoUser:      "kubexm",
	SudoPassword:  "kubexm",
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "hosts.env")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoad(t *testing.T) {
	got, err := Load(writeFile(t, sampleEnv))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, sampleSet) {
		t.Fatalf("Load:\n got %+v\nwant %+v", got, sampleSet)
	}
}

func TestLoadErrors(t *testing.T) {
	for _, tc := range []struct{ name, content, want string }{
		{"not key=value", "export KUBEXM_TEST_KEY=/k\ngarbage\n", "hosts.env:2: want KEY=value"},
		{"entry without address", "KUBEXM_TEST_KEY=/k\nKUBEXM_TEST_HOSTS=\"n1=10.0.0.1 n2\"\n", `entry "n2"`},
		{"bad port", "KUBEXM_TEST_KEY=/k\nKUBEXM_TEST_HOSTS=n1=10.0.0.1:x\n", `bad port "x"`},
		{"no hosts", "KUBEXM_TEST_KEY=/k\n", "lists no hosts"},
		{"no key", "KUBEXM_TEST_HOSTS=n1=10.0.0.1\n", "KUBEXM_TEST_KEY is not set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(writeFile(t, tc.content))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.env")); err == nil {
		t.Fatal("Load of a missing file: no error")
	}
}

func TestFromEnv(t *testing.T) {
	t.Setenv(envHosts, "")
	_, err := FromEnv()
	if err == nil || !strings.Contains(err.Error(), "make hosts-up N=3") || !strings.Contains(err.Error(), "hosts.env") {
		t.Fatalf("FromEnv without machines: error %v, want a hint to run make hosts-up and source hosts.env", err)
	}
	for _, line := range strings.Split(sampleEnv, "\n") {
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if ok && !strings.HasPrefix(line, "#") {
			t.Setenv(k, strings.Trim(v, `"`))
		}
	}
	got, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, sampleSet) {
		t.Fatalf("FromEnv:\n got %+v\nwant %+v", got, sampleSet)
	}
}

func TestHost(t *testing.T) {
	h, err := sampleSet.Host("10.77.82.12")
	if err != nil || h.Name != "n2" {
		t.Fatalf("Host by address = %+v, %v", h, err)
	}
	if _, err := sampleSet.Host("n9"); err == nil || !strings.Contains(err.Error(), "have n1, n2, n3") {
		t.Fatalf("Host(n9) error = %v", err)
	}
}

// fakeSSH puts an ssh on PATH that prints its arguments one per line, and
// fails with a message on stderr when the remote script is "fail".
func fakeSSH(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	script := "#!/bin/sh\nfor a in \"$@\"; do last=$a; echo \"$a\"; done\n" +
		"if [ \"$last\" = fail ]; then echo boom >&2; exit 3; fi\n"
	if err := os.WriteFile(filepath.Join(dir, "ssh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

func TestSSH(t *testing.T) {
	fakeSSH(t)
	ctx := context.Background()
	out, err := sampleSet.SSH(ctx, "n3", "hostname; echo x")
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	want := []string{"-i", "/c/runs/t1/id_ed25519", "-p", "2222"}
	if !reflect.DeepEqual(args[:4], want) {
		t.Errorf("ssh args start %q, want %q", args[:4], want)
	}
	if n := len(args); n < 3 || args[n-3] != "root@10.77.82.13" || args[n-2] != "--" || args[n-1] != "hostname; echo x" {
		t.Errorf("ssh args end %q, want root@10.77.82.13 -- <script as one argument>", args)
	}
	_, err = sampleSet.SSH(ctx, "n1", "fail")
	if err == nil || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "boom") {
		t.Errorf("failing script: error %v, want exit status and stderr", err)
	}
	if _, err := sampleSet.SSH(ctx, "nope", "true"); err == nil {
		t.Error("SSH to an unknown host: no error")
	}
}

func TestScript(t *testing.T) {
	t.Setenv(envScripts, "")
	p, err := Script("up.sh")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("Script(up.sh) = %s: %v", p, err)
	}
	t.Setenv(envScripts, "/elsewhere")
	if p, _ := Script("down.sh"); p != "/elsewhere/down.sh" {
		t.Fatalf("Script with %s set = %s", envScripts, p)
	}
}

func TestStateDir(t *testing.T) {
	t.Setenv(envCache, "")
	if d := StateDir("abc"); d != "/var/cache/kubexm-test/runs/abc" {
		t.Fatalf("StateDir default = %s", d)
	}
	t.Setenv(envCache, "/tmp/c")
	if d := StateDir("abc"); d != "/tmp/c/runs/abc" {
		t.Fatalf("StateDir with %s = %s", envCache, d)
	}
}

func TestDownNeedsPrefix(t *testing.T) {
	if err := Down(context.Background(), ""); err == nil {
		t.Fatal("Down with an empty prefix: no error")
	}
}
