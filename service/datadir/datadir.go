// Package datadir is the layout of a kubexm server's data directory, shared
// by the API, which stores uploads and serves backups, and the workers,
// which run jobs in it, so that neither imports the other.
package datadir

import (
	"os"
	"path/filepath"
	"regexp"
)

// WorkDir is where the jobs of cluster keep their journal, PKI and
// kubeconfigs.
func WorkDir(dataDir, cluster string) string {
	return filepath.Join(dataDir, "clusters", cluster)
}

// BundlePath is where the offline bundle of cluster with this sha256 is
// kept once uploaded; "" when sum is not a sha256 (it names a file).
func BundlePath(dataDir, cluster, sum string) string {
	if !sha256RE.MatchString(sum) {
		return ""
	}
	return filepath.Join(WorkDir(dataDir, cluster), "bundles", sum+".tar.gz")
}

var sha256RE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// BackupPath is where the backup archive name of cluster is kept, as the
// backup playbook run by a job leaves it; "" when name is not a plain
// archive name (it would name a file elsewhere).
func BackupPath(dataDir, cluster, name string) string {
	if !backupRE.MatchString(name) {
		return ""
	}
	return filepath.Join(WorkDir(dataDir, cluster), "backups", name)
}

var backupRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,200}\.tar\.gz$`)

// ConfigAAD binds a sealed cluster.yaml to its cluster: sealed under
// another name, it does not open.
func ConfigAAD(cluster string) []byte {
	return []byte("cluster/" + cluster)
}

// VarsAAD binds a job's sealed extra vars to the job.
func VarsAAD(jobID string) []byte { return []byte("job/" + jobID + "/extra-vars") }

// Default is the data directory of a server not told one: server/ under
// $KUBEXM_HOME, else under ~/.kubexm, else kubexm-server in the directory
// it runs in.
func Default() string {
	if d := os.Getenv("KUBEXM_HOME"); d != "" {
		return filepath.Join(d, "server")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".kubexm", "server")
	}
	return "kubexm-server"
}
