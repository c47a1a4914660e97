package ssh

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/mensylisir/kubexm/engine/transport"
)

func quoteArgv(argv []string) string {
	words := make([]string, len(argv))
	for i, a := range argv {
		words[i] = transport.ShellQuote(a)
	}
	return strings.Join(words, " ")
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// innerScript is the shell text that announces its PID on stderr (so a
// cancelled command can be killed over another session: sshd does not
// forward signals reliably) and then execs the command proper.
func innerScript(marker string, c transport.Command) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "printf '%%s%%d\\n' %s \"$$\" >&2\n", transport.ShellQuote(marker))
	if c.Dir != "" {
		fmt.Fprintf(&b, "cd %s || exit 1\n", transport.ShellQuote(c.Dir))
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
		fmt.Fprintf(&b, "export %s=%s\n", k, transport.ShellQuote(c.Env[k]))
	}
	switch {
	case len(c.Argv) > 0:
		b.WriteString("exec " + quoteArgv(c.Argv))
	case c.Script != "":
		b.WriteString("exec /bin/sh -c " + transport.ShellQuote(c.Script))
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
