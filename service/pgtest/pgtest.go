// Package pgtest starts a throwaway PostgreSQL server for tests, from the
// binaries of Debian's postgresql package, and hands each test a database
// of its own. Without the binaries a test is skipped, except under CI=true
// where it fails: CI installs the package so that these tests run.
package pgtest

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
)

// Server is one running PostgreSQL.
type Server struct {
	dir    string
	bin    string
	port   int
	cred   *syscall.Credential
	n      atomic.Int64
	err    error
	once   sync.Once
	reason string // why there is no server, when Skip
}

// New returns a Server that starts on first use; call Stop when done
// (TestMain).
func New() *Server { return &Server{} }

func findBin() string {
	m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	sort.Strings(m)
	if len(m) > 0 {
		return filepath.Dir(m[len(m)-1])
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	return ""
}

func (s *Server) start() {
	s.bin = findBin()
	if s.bin == "" {
		s.reason = "no PostgreSQL binaries (initdb, pg_ctl): apt-get install postgresql"
		return
	}
	dir, err := os.MkdirTemp("", "kubexm-pgtest-")
	if err != nil {
		s.err = err
		return
	}
	s.dir = dir
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		s.err = err
		return
	}
	// initdb refuses to run as root: run the server as the postgres user
	// the package created.
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			s.reason = "running as root and there is no postgres user to run PostgreSQL as"
			return
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chmod(dir, 0o755); err != nil {
			s.err = err
			return
		}
		if err := os.Chown(data, uid, gid); err != nil {
			s.err = err
			return
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.err = err
		return
	}
	s.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	if out, err := s.run("initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		s.err = fmt.Errorf("initdb: %w: %s", err, out)
		return
	}
	opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -k %s -c fsync=off -c max_connections=300", s.port, data)
	if out, err := s.run("pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(data, "log"), "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(data, "log"))
		s.err = fmt.Errorf("pg_ctl start: %w: %s %s", err, out, log)
	}
}

func (s *Server) run(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	return cmd.CombinedOutput()
}

// DSN starts the server if need be and returns the URL of a new, empty
// database.
func (s *Server) DSN(t testing.TB) string {
	t.Helper()
	s.once.Do(s.start)
	if s.reason != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL tests cannot run under CI: %s", s.reason)
		}
		t.Skipf("skipping the PostgreSQL variant: %s", s.reason)
	}
	if s.err != nil {
		t.Fatalf("start PostgreSQL: %v", s.err)
	}
	admin := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
	db, err := sql.Open("pgx", admin)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	name := fmt.Sprintf("t%d_%d", os.Getpid(), s.n.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	return strings.Replace(admin, "/postgres?", "/"+name+"?", 1)
}

// Stop stops the server and removes its files.
func (s *Server) Stop() {
	if s.dir == "" {
		return
	}
	if s.port != 0 {
		_, _ = s.run("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "-w", "stop")
	}
	os.RemoveAll(s.dir)
}
