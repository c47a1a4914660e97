package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/internal/ptytest"
)

// TestNoStallOnSilentTerminal runs `kubexm play` on a terminal that never
// answers a query (as script(1) and CI ptys do): the pty is the process's
// controlling terminal and in the foreground, so a colour query would be
// sent and waited for. The first task's line must come in under 0.5 s,
// with and without NO_COLOR; it came after 10 s when charmbracelet/log
// asked for the terminal's colours.
func TestNoStallOnSilentTerminal(t *testing.T) {
	for _, noColor := range []string{"", "1"} {
		t.Run("NO_COLOR="+noColor, func(t *testing.T) {
			dir := t.TempDir()
			pb := "- hosts: localhost\n  tasks:\n    - name: first\n      command: \"true\"\n"
			if err := os.WriteFile(filepath.Join(dir, "pb.yaml"), []byte(pb), 0o644); err != nil {
				t.Fatal(err)
			}
			master, slave, err := ptytest.Open()
			if err != nil {
				t.Skip("no pseudo-terminal here:", err)
			}
			defer master.Close()
			cmd := exec.Command(os.Args[0], "play", "pb.yaml")
			cmd.Dir = dir
			// CI hides the terminal from termenv altogether, and screen,
			// tmux and dumb TERMs are never queried: without them the
			// queries would be sent.
			for _, kv := range os.Environ() {
				k, _, _ := strings.Cut(kv, "=")
				if k != "CI" && k != "NO_COLOR" && k != "TERM" && k != "CLICOLOR" && k != "CLICOLOR_FORCE" {
					cmd.Env = append(cmd.Env, kv)
				}
			}
			cmd.Env = append(cmd.Env, "KUBEXM_TEST_MAIN=1", "TERM=xterm-256color", "KUBEXM_HOME="+dir)
			if noColor != "" {
				cmd.Env = append(cmd.Env, "NO_COLOR="+noColor)
			}
			cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
			start := time.Now()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			slave.Close()
			// Read everything the child writes, answering nothing.
			first := make(chan time.Duration, 1)
			screen := make(chan string, 1)
			go func() {
				var out bytes.Buffer
				buf := make([]byte, 4096)
				for {
					n, err := master.Read(buf)
					out.Write(buf[:n])
					if first != nil && strings.Contains(out.String(), "TASK first") {
						first <- time.Since(start)
						first = nil
					}
					if err != nil { // EIO once the child is gone
						screen <- out.String()
						return
					}
				}
			}()
			var took time.Duration
			select {
			case took = <-first:
			case <-time.After(15 * time.Second):
				cmd.Process.Kill()
			}
			if err := cmd.Wait(); err != nil {
				t.Errorf("play: %v", err)
			}
			master.Close()
			out := <-screen
			if took == 0 {
				t.Fatalf("no line of the first task within 15 s:\n%q", out)
			}
			// A query unanswered stalls for termenv's 5 s timeout; 2.5 s
			// tells that apart on a loaded machine (0.77 s was seen at load
			// 69 with no query), and the output is checked for queries below.
			if took > 2500*time.Millisecond {
				t.Errorf("the first task's line came after %s on a terminal that does not answer queries; want under 2.5s:\n%q", took, out)
			}
			if strings.Contains(out, "\x1b]10;?") || strings.Contains(out, "\x1b]11;?") || strings.Contains(out, "\x1b[6n") {
				t.Errorf("kubexm queried the terminal:\n%q", out)
			}
			// The colours still follow TERM, and NO_COLOR turns them off.
			if colour := strings.Contains(out, "\x1b[1;38;5;86mINFO"); colour != (noColor == "") {
				t.Errorf("NO_COLOR=%q, colours in the output: %v:\n%q", noColor, colour, out)
			}
		})
	}
}
