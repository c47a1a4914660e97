package output

import (
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/mensylisir/kubexm/engine/model"
)

// Human is the human view of a run on w: on a terminal the live view (the
// log lines, and below them the running tasks and each host's last
// result, redrawn in place), else plain lines. TERM=dumb asks for plain
// lines on a terminal too. stop ends the live view's redrawing.
func Human(w io.Writer, verbosity int) (sink model.Sink, stop func()) {
	if f, ok := w.(*os.File); ok && os.Getenv("TERM") != "dumb" {
		fd := int(f.Fd())
		if _, err := unix.IoctlGetTermios(fd, unix.TCGETS); err == nil {
			width := func() int {
				ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ)
				if err != nil {
					return 0
				}
				return int(ws.Col)
			}
			l := NewLive(f, verbosity, width)
			return l, l.Close
		}
	}
	return NewText(w, verbosity), func() {}
}
