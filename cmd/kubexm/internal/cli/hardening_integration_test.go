//go:build integration

package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/test/testhosts"
)

// Issue 13 on test machines, with the real binary over SSH: a second run on
// the same host is refused (item 8), Ctrl-C over a frozen connection ends
// in bounded time with the interrupted task in the recap and a second
// Ctrl-C exits at once (item 9), and a changed host key is refused from
// another directory (item 6).
func TestHardeningOnTestMachines(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	set := ownMachines(ctx, t, 1)
	bin := buildKubexm(ctx, t)
	pb := filepath.Join(t.TempDir(), "pb")
	os.MkdirAll(pb, 0o755)
	os.WriteFile(filepath.Join(pb, "playbook.yaml"), []byte(`
- hosts: n1
  tasks:
    - name: long task
      shell: sleep 300.13
`), 0o644)
	home := t.TempDir() // KUBEXM_HOME: the trusted host keys, shared by every directory
	start := func(dir string) (*exec.Cmd, *bufio.Scanner) {
		os.MkdirAll(dir, 0o755)
		cmd := exec.Command(bin, "play", pb, "-i", set.InventoryPath, "--output", "json")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "KUBEXM_HOME="+home)
		cmd.Stderr = os.Stderr
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, bufio.NewScanner(out)
	}
	waitTask := func(sc *bufio.Scanner) {
		for sc.Scan() {
			if strings.Contains(sc.Text(), `"kind":"task_start"`) {
				time.Sleep(2 * time.Second) // the command has started on the host
				return
			}
		}
		t.Fatal("no task_start")
	}
	recapOf := func(sc *bufio.Scanner) string {
		var last string
		for sc.Scan() {
			last = sc.Text()
		}
		return last
	}
	sshd := func() []int { return nodeProcs(t, set.Prefix, "sshd") }

	// Item 8: the host is locked by a run from another directory.
	a, aOut := start(filepath.Join(t.TempDir(), "a"))
	waitTask(aOut)
	second := exec.Command(bin, "play", pb, "-i", set.InventoryPath)
	second.Dir = t.TempDir()
	second.Env = append(os.Environ(), "KUBEXM_HOME="+home)
	out, err := second.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "in use by another kubexm run (kubexm run ") {
		t.Errorf("second run on the same host: %v\n%s", err, out)
	}

	// Item 9: freeze the node's sshd, Ctrl-C: bounded, and the recap says
	// which task on which host was interrupted.
	frozen := sshd()
	for _, p := range frozen {
		syscall.Kill(p, syscall.SIGSTOP)
	}
	t0 := time.Now()
	a.Process.Signal(os.Interrupt)
	recap := recapOf(aOut)
	err = a.Wait()
	el := time.Since(t0)
	for _, p := range frozen {
		syscall.Kill(p, syscall.SIGCONT)
	}
	t.Logf("Ctrl-C over a frozen connection: exited after %s (%v)", el.Round(time.Millisecond), err)
	var ev struct {
		Recap struct {
			Interrupted []struct{ Host, Task string } `json:"interrupted"`
			Hosts       map[string]struct{ Error string }
		} `json:"recap"`
	}
	json.Unmarshal([]byte(recap), &ev)
	if el > 12*time.Second {
		t.Errorf("Ctrl-C took %s", el)
	}
	if len(ev.Recap.Interrupted) != 1 || ev.Recap.Interrupted[0].Host != "n1" || ev.Recap.Interrupted[0].Task != "long task" {
		t.Errorf("recap: %s", recap)
	}
	if e := ev.Recap.Hosts["n1"].Error; !strings.Contains(e, "may still be running") {
		t.Errorf("n1's error does not say the command may still run: %q", e)
	}
	set.SSH(ctx, "n1", "pkill -f 'sleep 300.13' || true")

	// Item 9: a second Ctrl-C exits at once.
	b, bOut := start(filepath.Join(t.TempDir(), "b"))
	waitTask(bOut)
	frozen = sshd()
	for _, p := range frozen {
		syscall.Kill(p, syscall.SIGSTOP)
	}
	b.Process.Signal(os.Interrupt)
	time.Sleep(500 * time.Millisecond)
	t0 = time.Now()
	b.Process.Signal(os.Interrupt)
	b.Wait()
	el = time.Since(t0)
	for _, p := range frozen {
		syscall.Kill(p, syscall.SIGCONT)
	}
	t.Logf("second Ctrl-C: exited after %s", el.Round(time.Millisecond))
	if el > time.Second {
		t.Errorf("second Ctrl-C took %s", el)
	}
	set.SSH(ctx, "n1", "pkill -f 'sleep 300.13' || true")

	// Item 6: the machine gets a new host key; a run from yet another
	// directory refuses it and names the file to fix.
	if _, err := set.SSH(ctx, "n1", "rm -f /etc/ssh/ssh_host_*; ssh-keygen -A >/dev/null; systemctl restart ssh"); err != nil {
		t.Fatal(err)
	}
	c := exec.Command(bin, "play", pb, "-i", set.InventoryPath, "-e", "x=1")
	c.Dir = t.TempDir()
	c.Env = append(os.Environ(), "KUBEXM_HOME="+home)
	out, err = c.CombinedOutput()
	kh := filepath.Join(home, "known_hosts")
	if err == nil || !strings.Contains(string(out), "REMOTE HOST KEY CHANGED") || !strings.Contains(string(out), "ssh-keygen -f "+kh) {
		t.Errorf("changed key from another directory: %v\n%s", err, out)
	}
}

// nodeProcs lists the processes named comm of the prefix's node n1, by the
// node's cgroups that up.sh recorded.
func nodeProcs(t *testing.T, prefix, comm string) []int {
	data, err := os.ReadFile(filepath.Join(testhosts.StateDir(prefix), "nodes", "n1", "cgroups"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	var pids []int
	for _, dir := range strings.Fields(string(data)) {
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(b)) {
				pid, _ := strconv.Atoi(f)
				name, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
				if strings.TrimSpace(string(name)) == comm && !seen[pid] {
					seen[pid] = true
					pids = append(pids, pid)
				}
			}
			return nil
		})
	}
	if len(pids) == 0 {
		t.Fatalf("no %s in node n1 of %s", comm, prefix)
	}
	return pids
}
