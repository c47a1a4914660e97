package api

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/mensylisir/kubexm/service/datadir"

	"github.com/mensylisir/kubexm/bundle"
	"github.com/mensylisir/kubexm/internal/flock"
	"github.com/mensylisir/kubexm/service/jobstore"
)

// Bundle is an offline bundle uploaded for a cluster; a job names it by
// its sha256 (options.offline_bundle).
type Bundle struct {
	SHA256     string    `json:"sha256"`
	Size       int64     `json:"size"`
	Artifacts  int       `json:"artifacts,omitempty"`
	UploadedAt time.Time `json:"uploaded_at"`
}

// uploadBundle stores the body, a bundle of `kubexm artifact export`, in
// the cluster's work directory under its sha256, and verifies and unpacks
// it there as `kubexm play --offline-bundle` would: a bad bundle is
// refused now rather than when a job runs, and the job finds it unpacked.
// The bundle goes to the data directory every worker reaches, not into the
// database: it is hundreds of MiB that the engine reads as files.
//
// The body is kept under a hidden temporary name until it is known good:
// its sha256 against the one the client gives (?sha256=, from the
// .sha256 file export writes), then the whole bundle against its manifest
// in a pass that writes nothing; only then is it unpacked and stored under
// its sha256. A bad one leaves nothing behind, and no job or list sees it
// meanwhile. The cost is a second decompression of a good bundle.
func (s *Server) uploadBundle(w http.ResponseWriter, r *http.Request, tok jobstore.Token) {
	name := r.PathValue("name")
	if _, err := s.c.Store.Cluster(r.Context(), name); err != nil {
		s.storeError(w, r, err)
		return
	}
	want := r.URL.Query().Get("sha256")
	if want != "" && datadir.BundlePath(s.c.DataDir, name, want) == "" {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("offline bundle: sha256=%q: want the 64 lower-case hex digits of the bundle's sha256 (its .sha256 file)", want))
		return
	}
	workDir := datadir.WorkDir(s.c.DataDir, name)
	dir := filepath.Join(workDir, "bundles")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		s.internal(w, r, err)
		return
	}
	space, err := s.reserve(dir, r.ContentLength)
	if err != nil {
		writeError(w, http.StatusInsufficientStorage, err.Error())
		return
	}
	defer space.release()
	tmp, err := os.CreateTemp(dir, ".upload-*")
	if err != nil {
		s.internal(w, r, err)
		return
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(space, tmp, h), http.MaxBytesReader(w, r.Body, s.c.MaxBundle))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	var tooBig *http.MaxBytesError
	var full *noSpaceError
	switch {
	case errors.As(err, &full):
		writeError(w, http.StatusInsufficientStorage, full.Error())
		return
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("offline bundle: larger than the server's limit of %d bytes", s.c.MaxBundle))
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, "offline bundle: upload: "+err.Error())
		return
	case n == 0:
		writeError(w, http.StatusBadRequest, "offline bundle: the body is empty; send the .tar.gz or .tar.zst of kubexm artifact export")
		return
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if want != "" && want != sum {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("offline bundle: the body's sha256 is %s, the client gave %s: it changed on the way or is another file; nothing was stored", sum, want))
		return
	}
	if _, err := bundle.Verify(r.Context(), tmp.Name()); err != nil {
		writeError(w, http.StatusBadRequest, err.Error()+"; nothing was stored or unpacked")
		return
	}
	_, m, err := bundle.OpenHashed(r.Context(), tmp.Name(), sum, workDir, func(format string, args ...any) {
		s.c.Log.Info(fmt.Sprintf(format, args...), "cluster", name, "sha256", sum)
	})
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if err := os.Rename(tmp.Name(), datadir.BundlePath(s.c.DataDir, name, sum)); err != nil {
		s.internal(w, r, err)
		return
	}
	s.audit(r, tok, "upload bundle", name, fmt.Sprintf("sha256 %s, %d bytes, %d artifacts", sum, n, len(m.Artifacts)))
	writeJSON(w, http.StatusCreated, Bundle{SHA256: sum, Size: n, Artifacts: len(m.Artifacts), UploadedAt: time.Now().UTC()})
}

// spaceCheck is an upload's share of the free space. A body of known
// length reserves it up front, and gives back what it writes (the file
// system's free space shows that); one of unknown length is checked
// against the file system every MiB. As an io.Writer in the copy it
// fails the upload when the space is gone.
type spaceCheck struct {
	s        *Server
	dir      string
	reserved uint64 // of s.reserved, what this upload has yet to write
	written  uint64
}

type noSpaceError struct{ msg string }

func (e *noSpaceError) Error() string { return e.msg }

// uploadMargin is the space an upload leaves free: the unpacking, the
// journals and the database need some too.
const uploadMargin = 64 << 20

// reserve takes size bytes (unknown when negative) for an upload into dir,
// refusing one the file system has no room for beside what the uploads in
// progress in this server have yet to write.
func (s *Server) reserve(dir string, size int64) (*spaceCheck, error) {
	free, err := s.c.FreeSpace(dir)
	if err != nil {
		return nil, fmt.Errorf("offline bundle: the free space of %s: %w", dir, err)
	}
	s.uploadMu.Lock()
	defer s.uploadMu.Unlock()
	want := uint64(max(size, 0))
	if free < s.reserved || free-s.reserved < want+uploadMargin {
		return nil, &noSpaceError{fmt.Sprintf("offline bundle: %d bytes do not fit: the server's data directory has %d bytes free, %d of them promised to uploads in progress", want, free, s.reserved)}
	}
	s.reserved += want
	return &spaceCheck{s: s, dir: dir, reserved: want}, nil
}

func (c *spaceCheck) Write(p []byte) (int, error) {
	n := uint64(len(p))
	c.s.uploadMu.Lock()
	defer c.s.uploadMu.Unlock()
	take := min(n, c.reserved)
	c.reserved -= take
	c.s.reserved -= take
	before := c.written
	c.written += n
	if take < n && before>>20 != c.written>>20 {
		free, err := c.s.c.FreeSpace(c.dir)
		if err == nil && (free < c.s.reserved || free-c.s.reserved < uploadMargin) {
			return 0, &noSpaceError{fmt.Sprintf("offline bundle: the server's data directory is full after %d bytes", c.written)}
		}
	}
	return len(p), nil
}

func (c *spaceCheck) release() {
	c.s.uploadMu.Lock()
	c.s.reserved -= c.reserved
	c.reserved = 0
	c.s.uploadMu.Unlock()
}

// listBundles lists the bundles uploaded for a cluster, newest first.
func (s *Server) listBundles(w http.ResponseWriter, r *http.Request, _ jobstore.Token) {
	name := r.PathValue("name")
	if _, err := s.c.Store.Cluster(r.Context(), name); err != nil {
		s.storeError(w, r, err)
		return
	}
	ents, err := os.ReadDir(filepath.Join(datadir.WorkDir(s.c.DataDir, name), "bundles"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.internal(w, r, err)
		return
	}
	out := []Bundle{}
	for _, e := range ents {
		sum, ok := strings.CutSuffix(e.Name(), ".tar.gz")
		if !ok || datadir.BundlePath(s.c.DataDir, name, sum) == "" {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		out = append(out, Bundle{SHA256: sum, Size: info.Size(), UploadedAt: info.ModTime().UTC()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UploadedAt.After(out[j].UploadedAt) })
	writeJSON(w, http.StatusOK, map[string]any{"bundles": out})
}

// deleteBundle removes an uploaded bundle and its unpacked copy, unless an
// active job (queued, running or interrupted: it will run again) names it.
// The jobs are looked at in the database, holding the cluster as a job's
// creation does: whichever server or worker process queued the job, the
// answer is the same, and none is queued between the look and the removal.
func (s *Server) deleteBundle(w http.ResponseWriter, r *http.Request, tok jobstore.Token) {
	name, sum := r.PathValue("name"), r.PathValue("sha256")
	if _, err := s.c.Store.Cluster(r.Context(), name); err != nil {
		s.storeError(w, r, err)
		return
	}
	p := datadir.BundlePath(s.c.DataDir, name, sum)
	if p == "" {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("bundle %q: give its sha256 (GET /api/v1/clusters/%s/bundles)", sum, name))
		return
	}
	notFound := &refusal{code: http.StatusNotFound, msg: fmt.Sprintf("cluster %s has no bundle %s (GET /api/v1/clusters/%s/bundles lists them)", name, sum, name)}
	if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
		s.storeError(w, r, notFound)
		return
	}
	workDir := datadir.WorkDir(s.c.DataDir, name)
	// The unpacked copy goes under bundle.Open's lock: a kubexm play of
	// the cluster run by hand may be unpacking or checking it.
	if err := os.MkdirAll(filepath.Join(workDir, "bundle"), 0o755); err != nil {
		s.internal(w, r, err)
		return
	}
	unlock, err := flock.Lock(r.Context(), filepath.Join(workDir, "bundle", ".lock"))
	if err != nil {
		s.internal(w, r, err)
		return
	}
	defer unlock()
	// Holding the cluster in the database blocks other writers (on SQLite
	// all of them): only the archive's unlink and a rename happen then;
	// the unpacked tree is removed after. A leftover of a delete that
	// died half-way is removed first.
	trash := filepath.Join(workDir, "bundle", ".deleting-"+sum)
	if err := os.RemoveAll(trash); err != nil {
		s.internal(w, r, err)
		return
	}
	err = s.c.Store.DeleteBundle(r.Context(), name, sum, func() error {
		unpacked := filepath.Join(workDir, "bundle", sum)
		if err := os.Rename(unpacked, trash); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		err := os.Remove(p)
		if err != nil {
			// Put the unpacked copy back: the bundle stays whole.
			_ = os.Rename(trash, unpacked)
		}
		if errors.Is(err, fs.ErrNotExist) {
			return notFound // deleted meanwhile
		}
		return err
	})
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	if err := os.RemoveAll(trash); err != nil {
		// The bundle is gone for jobs and the list; the next delete of
		// the same sha256 removes what is left.
		s.c.Log.Error("delete bundle: removing its unpacked copy", "cluster", name, "sha256", sum, "err", err)
	}
	s.audit(r, tok, "delete bundle", name, "sha256 "+sum)
	writeJSON(w, http.StatusOK, map[string]string{"deleted": sum})
}
