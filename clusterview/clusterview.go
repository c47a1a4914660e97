// Package clusterview computes what the read-only verbs show of a cluster
// (get clusters, get nodes, describe cluster): the state of its work
// directory (.kubexm/<cluster>/ with runs/, certs/ and the admin
// kubeconfig), its hosts beside the Node objects of its API server (asked
// with client-go and the admin kubeconfig), and its description. The CLI
// prints these views; kubexm server serves them (Views). It changes
// nothing.
package clusterview

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/mensylisir/kubexm/builtins/pki"
	"github.com/mensylisir/kubexm/engine"
	"github.com/mensylisir/kubexm/lifecycle"
)

// State is what a work directory says about its cluster.
type State struct {
	Name       string `json:"name"`
	WorkDir    string `json:"work_dir"`
	Kubeconfig bool   `json:"kubeconfig"`
	Runs       int    `json:"runs"`
	Last       *Run   `json:"last_run,omitempty"`
	Running    string `json:"running,omitempty"` // who holds the lock
	CA         *Cert  `json:"ca,omitempty"`
	// Resource is the phase of the Cluster resource (operator mode) as
	// the cluster's API server holds it (AskResources).
	Resource string `json:"cluster_resource,omitempty"`
}

// Run is one run of the work directory's journal.
type Run struct {
	ID       string    `json:"id"`
	Playbook string    `json:"playbook"`
	Start    time.Time `json:"start"`
	Outcome  string    `json:"outcome"` // ok, failed, cancelled, or interrupted (no end record)
}

// Cert is a certificate kept in the work directory.
type Cert struct {
	File     string    `json:"file"`
	Subject  string    `json:"subject"`
	NotAfter time.Time `json:"not_after"`
	DaysLeft int       `json:"days_left"`
}

// toRun turns a journal's summary into what get and describe show; a
// journal without an end is of the run going on (running), else of a run
// that was killed (interrupted).
func toRun(r engine.RunInfo, running bool) Run {
	out := Run{ID: r.ID, Playbook: r.Playbook, Start: r.Start, Outcome: r.Outcome}
	if out.Outcome == "" {
		out.Outcome = "interrupted"
		if running {
			out.Outcome = "running"
		}
	}
	return out
}

// ReadState reads a work directory; ok is false for a directory that
// holds nothing kubexm writes.
func ReadState(dir string) (State, bool, error) {
	s := State{Name: filepath.Base(dir), WorkDir: dir}
	_, err := os.Stat(filepath.Join(dir, "kubeconfig"))
	s.Kubeconfig = err == nil
	runs, err := engine.Runs(dir)
	if err != nil {
		return s, false, err
	}
	s.Runs = len(runs)
	s.Running = lifecycle.LockHolder(dir)
	if i := lastPlaybookRun(runs); i >= 0 {
		last := toRun(runs[i], s.Running != "")
		s.Last = &last
	}
	for _, ca := range []string{"certs/kubernetes/ca.crt", "certs/etcd/ca.crt"} {
		if c, err := readCert(filepath.Join(dir, ca)); err == nil {
			s.CA = &Cert{File: ca, Subject: c.Subject.CommonName, NotAfter: c.NotAfter, DaysLeft: daysLeft(c.NotAfter)}
			break
		}
	}
	_, certsErr := os.Stat(filepath.Join(dir, "certs"))
	return s, s.Kubeconfig || s.Runs > 0 || certsErr == nil, nil
}

// Clusters reads every work directory under dir (.kubexm), leaving out
// directories that hold nothing kubexm writes; a missing dir holds none.
func Clusters(dir string) ([]State, error) {
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var out []State
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		s, ok, err := ReadState(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, s)
		}
	}
	return out, nil
}

// RecentRuns are the newest n runs of a work directory, newest first;
// running says a run holds the directory now (the newest is that one).
func RecentRuns(dir string, n int, running bool) []Run {
	runs, _ := engine.Runs(dir)
	holder := lastPlaybookRun(runs)
	var out []Run
	for i := len(runs) - 1; i >= 0 && len(out) < n; i-- {
		out = append(out, toRun(runs[i], i == holder && running))
	}
	return out
}

// lastPlaybookRun is the index of the newest run of a playbook, -1 for
// none. `kubexm run command`'s runs are journaled too, but they take no
// lock and change nothing kubexm manages: a failed `systemctl is-active`
// is not the cluster's last run, and a command typed while a playbook
// runs is not the run holding the lock.
func lastPlaybookRun(runs []engine.RunInfo) int {
	for i := len(runs) - 1; i >= 0; i-- {
		if runs[i].Playbook != lifecycle.CommandPlaybook {
			return i
		}
	}
	return -1
}

// Certs lists every certificate under the work directory's certs/ with
// its expiry, soonest first.
func Certs(dir string) []Cert {
	root := filepath.Join(dir, "certs")
	var out []Cert
	_ = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || filepath.Ext(p) != ".crt" {
			return nil
		}
		c, err := readCert(p)
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, Cert{File: rel, Subject: c.Subject.CommonName, NotAfter: c.NotAfter, DaysLeft: daysLeft(c.NotAfter)})
		return nil
	})
	sort.SliceStable(out, func(i, j int) bool { return out[i].NotAfter.Before(out[j].NotAfter) })
	return out
}

func readCert(path string) (*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := pki.ParseCert(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

func daysLeft(t time.Time) int { return int(time.Until(t).Hours() / 24) }
