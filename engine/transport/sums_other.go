//go:build !linux

package transport

import (
	"fmt"
	"io/fs"
	"time"
)

// statKey is size and mtime where the ctime is not read: nothing is
// recorded (SumCache.hash), sums live as long as the cache.
func statKey(fi fs.FileInfo) (string, time.Time) {
	return fmt.Sprintf("%d %d", fi.Size(), fi.ModTime().UnixNano()), time.Time{}
}
