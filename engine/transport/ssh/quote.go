package ssh

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/mensylisir/kubexm/engine/transport"
)

// quote returns s as one POSIX shell word.
func quote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func quoteArgv(argv []string) string {
	words := make([]string, len(argv))
	for i, a := range argv {
		words[i] = quote(a)
	}
	return strings.Join(words, " ")
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// innerScript is the shell text that announces its PID on stderr (so a
// cancelled command can be killed over another session: sshd does not
// forward signals reliably) and then execs the command proper.
func innerScript(marker string, c transport.Command) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "printf '%%s%%d\\n' %s \"$$\" >&2\n", quote(marker))
	if c.Dir != "" {
		fmt.Fprintf(&b, "cd %s || exit 1\n", quote(c.Dir))
	}
	keys := make([]string, 0, len(c.Env))
	for k := range c.Env {
		if !envName.MatchString(k) {
			return "", fmt.Errorf("invalid environment variable name %q", k)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "export %s=%s\n", k, quote(c.Env[k]))
	}
	switch {
	case len(c.Argv) > 0:
		b.WriteString("exec " + quoteArgv(c.Argv))
	case c.Script != "":
		b.WriteString("exec /bin/sh -c " + quote(c.Script))
	default:
		return "", fmt.Errorf("empty command")
	}
	return b.String(), nil
}

// sudoArgv wraps a shell script to run as user through sudo. The password is
// read from stdin (-S) after the prompt marker, never from the command line.
func sudoArgv(prompt, user, script string) []string {
	if user == "" {
		user = "root"
	}
	return []string{"sudo", "-S", "-p", prompt, "-u", user, "--", "/bin/sh", "-c", script}
}
