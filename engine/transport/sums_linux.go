package transport

import (
	"fmt"
	"io/fs"
	"syscall"
	"time"
)

// statKey describes the file's content as the kernel keeps track of it:
// size, mtime and ctime in nanoseconds, inode and device.
func statKey(fi fs.FileInfo) (string, time.Time) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Sprintf("%d %d", fi.Size(), fi.ModTime().UnixNano()), time.Time{}
	}
	ctime := time.Unix(st.Ctim.Sec, st.Ctim.Nsec)
	return fmt.Sprintf("%d %d %d %d %d", fi.Size(), fi.ModTime().UnixNano(), ctime.UnixNano(), st.Ino, st.Dev), ctime
}
