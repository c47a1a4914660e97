package worker

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// jobTempPrefix names a job child's HOME and TMPDIR, where an offline
// bundle is unpacked: hundreds of megabytes a killed worker would leave.
const jobTempPrefix = "kubexm-job-"

// staleAfter spares a directory just made, before its maker locked it.
const staleAfter = time.Minute

// jobTemp is a job's temporary directory, locked while its worker lives:
// the kernel drops an flock with its holder, however the holder died.
type jobTemp struct {
	dir  string
	lock *os.File
}

func newJobTemp(id string) (*jobTemp, error) {
	dir, err := os.MkdirTemp("", jobTempPrefix+id+"-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	lock, err := lockDir(dir, 0)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	return &jobTemp{dir: dir, lock: lock}, nil
}

// remove deletes the directory, then lets go of it.
func (t *jobTemp) remove() error {
	err := os.RemoveAll(t.dir)
	t.lock.Close()
	return err
}

func lockDir(dir string, how int) (*os.File, error) {
	f, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|how); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// sweepJobTemps removes the job directories in the temporary directory
// that no live worker holds: those of workers killed (SIGKILL, OOM, power
// loss) before they could remove their own. It touches only directories
// of this user named as a job's, and none another worker holds locked.
func sweepJobTemps(log *slog.Logger) {
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), jobTempPrefix+"*"))
	if err != nil {
		return
	}
	uid := os.Geteuid()
	for _, dir := range dirs {
		var st unix.Stat_t
		if unix.Lstat(dir, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != uid {
			continue
		}
		if time.Since(time.Unix(st.Mtim.Unix())) < staleAfter {
			continue
		}
		lock, err := lockDir(dir, unix.LOCK_NB)
		if errors.Is(err, unix.EWOULDBLOCK) {
			continue // a live job's
		}
		if err != nil {
			log.Warn("a job's temporary directory left behind", "dir", dir, "err", err)
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			log.Warn("removing a job's temporary directory left behind", "dir", dir, "err", err)
		} else {
			log.Info("removed a job's temporary directory its worker left behind", "dir", dir)
		}
		lock.Close()
	}
}
