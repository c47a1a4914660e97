// Package transport is how kubexm reaches a host: run commands and move files.
// Builtins and the engine see only this interface; the SSH and local
// implementations live in the ssh and local subpackages.
package transport

import (
	"context"
	"io"
	"io/fs"
	"net"
	"time"
)

// Command is one process to start on a host.
// Either Argv (run directly, each element passed as one argument) or Script
// (run by /bin/sh -c) is set.
type Command struct {
	Argv   []string
	Script string
	Env    map[string]string
	Dir    string
	Stdin  io.Reader
	// Become runs the command as BecomeUser (root when empty) through sudo
	// when the connection user is someone else.
	Become     bool
	BecomeUser string
	Timeout    time.Duration
	// Stdout and Stderr, when set, receive the output as it arrives, in
	// addition to the capture in Result.
	Stdout io.Writer
	Stderr io.Writer
}

// Result is what a finished command left behind. A non-zero exit status is
// not an error: it is reported in ExitCode.
type Result struct {
	Stdout   []byte
	Stderr   []byte
	ExitCode int
	// Truncated is set when the captured output exceeded the transport's cap.
	Truncated bool
}

// PutOptions says how a file is written on the host.
type PutOptions struct {
	Mode   fs.FileMode // 0 means 0644
	Owner  string      // user name or numeric id; empty leaves the default
	Group  string
	Become bool
}

// FileInfo describes a path on a host. Exists is false (and err nil) when
// the path does not exist.
type FileInfo struct {
	Exists     bool
	IsDir      bool
	IsLink     bool
	LinkTarget string
	Mode       fs.FileMode // permission bits only
	Size       int64
	Owner      string
	Group      string
	ModTime    time.Time
}

// Transport reaches one host. Implementations are safe for concurrent use:
// the engine runs many commands and transfers on one host at once.
type Transport interface {
	// Host is the inventory name of the host, for messages.
	Host() string
	// Run starts cmd and waits for it. Cancelling ctx stops the process on
	// the host, not only the local side. err is non-nil only when the command
	// could not be run to completion (connection lost, cancelled, timed out).
	Run(ctx context.Context, cmd Command) (Result, error)
	// Put streams src into dst: written to a temporary file beside dst and
	// renamed into place, parents created, mode and owner applied.
	Put(ctx context.Context, src io.Reader, dst string, opts PutOptions) error
	// PutFile copies a file of the control machine to dst, and does nothing
	// (changed=false) when dst already has the same sha256 and options.
	PutFile(ctx context.Context, localPath, dst string, opts PutOptions) (changed bool, err error)
	// Get streams the content of src on the host into w.
	Get(ctx context.Context, src string, w io.Writer, become bool) error
	// Stat describes path without following a final symlink.
	Stat(ctx context.Context, path string, become bool) (FileInfo, error)
	// Sha256 returns the hex sha256 of a regular file, or "" when it does not exist.
	Sha256(ctx context.Context, path string, become bool) (string, error)
	// Close releases the connection.
	Close() error
}

type readOnlyKey struct{}

// ReadOnly marks ctx as a run that leaves the hosts as they are (--check):
// a transport may read what it recorded on a host but writes no record.
func ReadOnly(ctx context.Context) context.Context {
	return context.WithValue(ctx, readOnlyKey{}, true)
}

// IsReadOnly reports whether ctx was marked by ReadOnly.
func IsReadOnly(ctx context.Context) bool {
	ro, _ := ctx.Value(readOnlyKey{}).(bool)
	return ro
}

// Dialer is a Transport that opens TCP connections from its host: a
// builtin reaches a service the host listens on (an API server on
// 127.0.0.1) or one only the host can reach, through the connection the run
// already has, so no port needs to be open to the control machine.
type Dialer interface {
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
}
