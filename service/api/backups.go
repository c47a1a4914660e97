package api

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/mensylisir/kubexm/service/datadir"

	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/service/jobstore"
)

// Backup is an archive the backup playbook made in a cluster's work
// directory on the server (a backup job): a restore job names it, and
// GET .../backups/{backup} downloads it.
type Backup struct {
	Name      string    `json:"name"`
	Size      int64     `json:"size"`
	SHA256    string    `json:"sha256,omitempty"` // from the .sha256 file the backup wrote beside it
	CreatedAt time.Time `json:"created_at"`
}

func backupsDir(dataDir, cluster string) string {
	return filepath.Join(datadir.WorkDir(dataDir, cluster), "backups")
}

// listBackups lists a cluster's backups, newest first.
func (s *Server) listBackups(w http.ResponseWriter, r *http.Request, _ jobstore.Token) {
	name := r.PathValue("name")
	if _, err := s.c.Store.Cluster(r.Context(), name); err != nil {
		s.storeError(w, r, err)
		return
	}
	ents, err := os.ReadDir(backupsDir(s.c.DataDir, name))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.internal(w, r, err)
		return
	}
	out := []Backup{}
	for _, e := range ents {
		p := datadir.BackupPath(s.c.DataDir, name, e.Name())
		if p == "" || !e.Type().IsRegular() {
			continue // the staging directory of a backup going on, .sha256 files
		}
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile (backup_keep)
		}
		out = append(out, Backup{Name: e.Name(), Size: info.Size(), SHA256: recordedSum(p), CreatedAt: info.ModTime().UTC()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.After(out[j].CreatedAt) })
	writeJSON(w, http.StatusOK, map[string]any{"backups": out})
}

// recordedSum is the sha256 the pack builtin wrote beside an archive
// ("HEX  NAME"); "" when there is none.
func recordedSum(archive string) string {
	data, err := os.ReadFile(archive + ".sha256")
	if err != nil {
		return ""
	}
	sum, _, _ := strings.Cut(strings.TrimSpace(string(data)), " ")
	if len(sum) != 64 {
		return ""
	}
	if _, err := hex.DecodeString(sum); err != nil {
		return ""
	}
	return sum
}

// downloadBackup streams a backup archive. It holds the cluster's etcd
// data and CA keys, so it needs an operator token as mutations do, and
// every download is audited. The sha256 comes in X-Kubexm-Sha256 (the one
// recorded when the archive was made, else computed now) for the client
// to check what it received.
func (s *Server) downloadBackup(w http.ResponseWriter, r *http.Request, tok jobstore.Token) {
	name, backup := r.PathValue("name"), r.PathValue("backup")
	if _, err := s.c.Store.Cluster(r.Context(), name); err != nil {
		s.storeError(w, r, err)
		return
	}
	p := datadir.BackupPath(s.c.DataDir, name, backup)
	if p == "" {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("backup %q: give the name of an archive of GET /api/v1/clusters/%s/backups", backup, name))
		return
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("cluster %s has no backup %s (GET /api/v1/clusters/%s/backups lists them)", name, backup, name))
		return
	}
	if err != nil {
		s.internal(w, r, err)
		return
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		s.internal(w, r, fmt.Errorf("backup %s: not a regular file (%v)", p, err))
		return
	}
	sum := recordedSum(p)
	if sum == "" {
		if sum, err = transport.FileSha256(p); err != nil {
			s.internal(w, r, err)
			return
		}
	}
	s.audit(r, tok, "download backup", name, fmt.Sprintf("%s (%d bytes, sha256 %s)", backup, info.Size(), sum))
	w.Header().Set("Content-Type", "application/gzip")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", backup))
	w.Header().Set("X-Kubexm-Sha256", sum)
	// ServeContent sets Content-Length and answers Range requests, so a
	// broken download can be continued.
	http.ServeContent(w, r, backup, info.ModTime(), f)
}
