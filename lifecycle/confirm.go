package lifecycle

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Confirm asks question on errw before a run that changes a cluster and
// reads the answer from in; only "yes" goes on. Without an answer (stdin
// closed or not a terminal) the run is refused: a script must say --yes.
func Confirm(in io.Reader, errw io.Writer, question string) error {
	fmt.Fprintf(errw, "%s\nType yes to continue: ", question)
	line, err := bufio.NewReader(in).ReadString('\n')
	answer := strings.TrimSpace(line)
	if answer == "yes" {
		return nil
	}
	if answer == "" && err != nil {
		fmt.Fprintln(errw)
		return errors.New("no answer on standard input; nothing was changed: pass --yes to run without asking")
	}
	return fmt.Errorf("answered %q, not yes; nothing was changed", answer)
}

// Summary names the cluster and its hosts, for confirmation questions.
func (c Cluster) Summary() string {
	return fmt.Sprintf("cluster %s (hosts %s)", c.Name, strings.Join(c.Hosts, ", "))
}
