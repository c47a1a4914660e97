// Package ptytest opens pseudo-terminals for tests of what a program does
// on a terminal, without a dependency on a pty library.
package ptytest

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Open returns a new pseudo-terminal's master and slave ends. Neither
// becomes the caller's controlling terminal (O_NOCTTY): a child started
// with SysProcAttr{Setsid: true, Setctty: true} on the slave gets it as
// its own.
func Open() (master, slave *os.File, err error) {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open pty master: %w", err)
	}
	fd := int(m.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		return nil, nil, fmt.Errorf("unlock pty: %w", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		m.Close()
		return nil, nil, fmt.Errorf("pty number: %w", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		return nil, nil, fmt.Errorf("open pty slave: %w", err)
	}
	return m, s, nil
}
