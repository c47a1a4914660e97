package lifecycle

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mensylisir/kubexm/internal/flock"
)

// WorkLock is an flock(2) (package flock) on a file in a cluster's work
// directory. The kernel drops it when its holder dies, however it dies, so a
// lock left by a killed run is never mistaken for a live one; the file's
// content only says who holds it, for the message a second run prints.
type WorkLock struct {
	f *os.File
}

type lockHolder struct {
	PID     int    `json:"pid"`
	Host    string `json:"host"`
	Start   string `json:"start"`
	Command string `json:"command"`
}

// LockWorkDir takes the lock of workDir for a run that changes the cluster.
// It fails at once, naming the holder, when another run holds it.
func LockWorkDir(workDir, command string) (*WorkLock, error) {
	if err := os.MkdirAll(workDir, 0o700); err != nil {
		return nil, fmt.Errorf("work dir: %w", err)
	}
	// Another user's directory, or one others may write, could hold a
	// planted lock or journal: refused (flock.Open also refuses links).
	if err := flock.CheckPrivateDir(workDir); err != nil {
		return nil, fmt.Errorf("work dir: %w", err)
	}
	p := filepath.Join(workDir, "lock")
	f, err := flock.Open(p)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", p, err)
	}
	if ok, err := flock.TryLock(f); err != nil || !ok {
		defer f.Close()
		if err != nil {
			return nil, fmt.Errorf("lock %s: %w", p, err)
		}
		return nil, fmt.Errorf("the cluster's work directory %s is in use by another kubexm run (%s); wait for it to finish, or stop it (kubexm stops the commands it started on the hosts)",
			workDir, describeHolder(f))
	}
	host, _ := os.Hostname()
	info, _ := json.Marshal(lockHolder{PID: os.Getpid(), Host: host, Start: time.Now().UTC().Format(time.RFC3339), Command: command})
	// Who holds it is only for messages: a failed write loses nothing.
	if f.Truncate(0) == nil {
		_, _ = f.WriteAt(append(info, '\n'), 0)
	}
	return &WorkLock{f: f}, nil
}

func describeHolder(f *os.File) string {
	data, err := os.ReadFile(f.Name())
	var h lockHolder
	if err != nil || json.Unmarshal([]byte(strings.TrimSpace(string(data))), &h) != nil {
		return "holder unknown"
	}
	return fmt.Sprintf("pid %d on %s since %s: %s", h.PID, h.Host, h.Start, h.Command)
}

// Release ends the lock; the file stays, without content.
func (l *WorkLock) Release() {
	if l == nil {
		return
	}
	_ = l.f.Truncate(0)
	_ = l.f.Close()
}

// LockHolder says who holds the work directory's lock (a run going on),
// "" when nobody does. It never creates the lock file.
func LockHolder(dir string) string {
	f, err := os.Open(filepath.Join(dir, "lock"))
	if err != nil {
		return ""
	}
	defer f.Close()
	if !flock.Held(f) {
		return ""
	}
	return describeHolder(f)
}
