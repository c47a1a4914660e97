package jobstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mensylisir/kubexm/service/pgtest"
)

var pg = pgtest.New()

func TestMain(m *testing.M) {
	code := m.Run()
	pg.Stop()
	os.Exit(code)
}

// eachStore runs f against a fresh SQLite store and a fresh PostgreSQL one.
func eachStore(t *testing.T, f func(t *testing.T, s *sqlStore)) {
	eachDSN(t, func(t *testing.T, dsn string) { f(t, open(t, dsn)) })
}

// eachDSN runs f with a fresh SQLite file and a fresh PostgreSQL
// database, for tests that open a store more than once.
func eachDSN(t *testing.T, f func(t *testing.T, dsn string)) {
	t.Run("sqlite", func(t *testing.T) { f(t, filepath.Join(t.TempDir(), "kubexm.db")) })
	t.Run("postgres", func(t *testing.T) { f(t, pg.DSN(t)) })
}

func open(t *testing.T, dsn string) *sqlStore {
	t.Helper()
	s, err := Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s.(*sqlStore)
}

func mustCluster(t *testing.T, s Store, name string) {
	t.Helper()
	if _, err := s.PutCluster(context.Background(), name, []byte("sealed-"+name), "masked: "+name, "test"); err != nil {
		t.Fatal(err)
	}
}

func TestMigrationsAreAppliedOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, s *sqlStore) {
		ctx := context.Background()
		// A second migrate finds every version applied and changes nothing.
		if err := s.migrate(ctx); err != nil {
			t.Fatal(err)
		}
		var n, v int
		if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*), MAX(version) FROM schema_migrations`).Scan(&n, &v); err != nil {
			t.Fatal(err)
		}
		if n != len(migrations)-1 || v != len(migrations)-1 {
			t.Fatalf("schema_migrations: %d rows, version %d; want %d", n, v, len(migrations)-1)
		}
		// A database from a newer kubexm is refused, not downgraded.
		if _, err := s.db.ExecContext(ctx, s.q(`INSERT INTO schema_migrations (version, applied_at) VALUES (?, 0)`), len(migrations)+5); err != nil {
			t.Fatal(err)
		}
		if err := s.migrate(ctx); err == nil {
			t.Fatal("a database of a newer schema was accepted")
		}
	})
}

func TestClusterVersions(t *testing.T) {
	eachStore(t, func(t *testing.T, s *sqlStore) {
		ctx := context.Background()
		for i := 1; i <= 3; i++ {
			v, err := s.PutCluster(ctx, "c1", []byte{byte(i), 0, 1}, fmt.Sprintf("v%d", i), "alice")
			if err != nil || v.Version != i {
				t.Fatalf("put %d: %+v %v", i, v, err)
			}
		}
		c, err := s.Cluster(ctx, "c1")
		if err != nil || c.Version != 3 {
			t.Fatalf("cluster: %+v %v", c, err)
		}
		vs, err := s.ClusterVersions(ctx, "c1")
		if err != nil || len(vs) != 3 || vs[0].Version != 3 || vs[0].Sealed != nil || vs[2].Masked != "v1" {
			t.Fatalf("versions: %+v %v", vs, err)
		}
		cv, err := s.ClusterConfig(ctx, "c1", 0)
		if err != nil || cv.Version != 3 || string(cv.Sealed) != string([]byte{3, 0, 1}) {
			t.Fatalf("newest config: %+v %v", cv, err)
		}
		if cv, err = s.ClusterConfig(ctx, "c1", 2); err != nil || cv.Masked != "v2" {
			t.Fatalf("config v2: %+v %v", cv, err)
		}
		if _, err := s.ClusterConfig(ctx, "c1", 9); !errors.Is(err, ErrNotFound) {
			t.Fatalf("missing version: %v", err)
		}
		if _, err := s.Cluster(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("missing cluster: %v", err)
		}
		if cs, err := s.Clusters(ctx); err != nil || len(cs) != 1 {
			t.Fatalf("clusters: %+v %v", cs, err)
		}
	})
}

func TestJobLifecycle(t *testing.T) {
	eachStore(t, func(t *testing.T, s *sqlStore) {
		ctx := context.Background()
		mustCluster(t, s, "c1")
		if _, err := s.CreateJob(ctx, Job{ID: "j0", Cluster: "nope", Playbook: "p"}, nil); !errors.Is(err, ErrNotFound) {
			t.Fatalf("job on an unknown cluster: %v", err)
		}
		j, err := s.CreateJob(ctx, Job{ID: "j1", Cluster: "c1", ConfigVersion: 1, Playbook: "create-cluster", Options: Options{Tags: []string{"etcd"}, Limit: "m1"}, CreatedBy: "alice"}, nil)
		if err != nil || j.Status != Queued {
			t.Fatalf("create: %+v %v", j, err)
		}
		// A second job on the cluster is refused, naming the first.
		_, err = s.CreateJob(ctx, Job{ID: "j2", Cluster: "c1", Playbook: "upgrade"}, nil)
		var ce *ConflictError
		if !errors.As(err, &ce) || ce.JobID != "j1" || ce.Status != Queued {
			t.Fatalf("second job: %v", err)
		}
		got, err := s.Claim(ctx, "w1")
		if err != nil || got == nil || got.ID != "j1" || got.Status != Running || got.Worker != "w1" || got.Attempts != 1 || got.Options.Tags[0] != "etcd" || got.Resume {
			t.Fatalf("claim: %+v %v", got, err)
		}
		if again, err := s.Claim(ctx, "w2"); err != nil || again != nil {
			t.Fatalf("a running job was claimed again: %+v %v", again, err)
		}
		if _, err = s.CreateJob(ctx, Job{ID: "j2", Cluster: "c1", Playbook: "upgrade"}, nil); !errors.As(err, &ce) || ce.Status != Running {
			t.Fatalf("job while one runs: %v", err)
		}
		if err := s.SetProgress(ctx, "j1", "w1", "run-1", "install etcd"); err != nil {
			t.Fatal(err)
		}
		if err := s.SetProgress(ctx, "j1", "w2", "", "x"); !errors.Is(err, ErrLost) {
			t.Fatalf("progress from another worker: %v", err)
		}
		if c, err := s.Heartbeat(ctx, "j1", "w1"); err != nil || c {
			t.Fatalf("heartbeat: %v %v", c, err)
		}
		j, _ = s.Job(ctx, "j1")
		if j.CurrentTask != "install etcd" || j.RunID != "run-1" {
			t.Fatalf("progress not stored: %+v", j)
		}
		if err := s.Finish(ctx, "j1", "w1", Failed, "host m1 failed"); err != nil {
			t.Fatal(err)
		}
		if err := s.Finish(ctx, "j1", "w1", Succeeded, ""); !errors.Is(err, ErrLost) {
			t.Fatalf("finished twice: %v", err)
		}
		// The cluster is free again; resuming j1 now conflicts with j2.
		if _, err := s.CreateJob(ctx, Job{ID: "j2", Cluster: "c1", Playbook: "upgrade"}, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Resume(ctx, "j1", nil); !errors.As(err, &ce) || ce.JobID != "j2" {
			t.Fatalf("resume on a busy cluster: %v", err)
		}
		if j, err := s.Cancel(ctx, "j2"); err != nil || j.Status != Cancelled {
			t.Fatalf("cancel queued: %+v %v", j, err)
		}
		if _, err := s.Cancel(ctx, "j2"); !errors.Is(err, ErrState) {
			t.Fatalf("cancel twice: %v", err)
		}
		j, err = s.Resume(ctx, "j1", nil)
		if err != nil || j.Status != Queued || !j.Resume || j.RunID != "run-1" || j.Error != "" {
			t.Fatalf("resume: %+v %v", j, err)
		}
		got, _ = s.Claim(ctx, "w2")
		if got == nil || got.ID != "j1" || got.Attempts != 2 || !got.Resume {
			t.Fatalf("claim resumed: %+v", got)
		}
		// Cancelling a running job asks its worker, through the heartbeat.
		if j, err := s.Cancel(ctx, "j1"); err != nil || j.Status != Running || !j.CancelRequest {
			t.Fatalf("cancel running: %+v %v", j, err)
		}
		if c, err := s.Heartbeat(ctx, "j1", "w2"); err != nil || !c {
			t.Fatalf("heartbeat after cancel: %v %v", c, err)
		}
		if err := s.Finish(ctx, "j1", "w2", Cancelled, "cancelled"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Resume(ctx, "j1", nil); err != nil {
			t.Fatalf("resume a cancelled job: %v", err)
		}
		if err := s.Finish(ctx, "j1", "w2", Queued, ""); err == nil {
			t.Fatal("finish to an active state accepted")
		}
		counts, err := s.JobCounts(ctx)
		if err != nil || counts[Queued] != 1 || counts[Cancelled] != 1 || counts[Running] != 0 {
			t.Fatalf("counts: %v %v", counts, err)
		}
		jobs, err := s.Jobs(ctx, JobFilter{Cluster: "c1", Status: Cancelled})
		if err != nil || len(jobs) != 1 || jobs[0].ID != "j2" {
			t.Fatalf("jobs filter: %+v %v", jobs, err)
		}
	})
}

func TestReapStaleAndResumeElsewhere(t *testing.T) {
	eachStore(t, func(t *testing.T, s *sqlStore) {
		ctx := context.Background()
		mustCluster(t, s, "c1")
		mustCluster(t, s, "c2")
		base := time.Now()
		s.now = func() time.Time { return base }
		for _, id := range []string{"a", "b"} {
			cl := map[string]string{"a": "c1", "b": "c2"}[id]
			if _, err := s.CreateJob(ctx, Job{ID: id, Cluster: cl, Playbook: "p"}, nil); err != nil {
				t.Fatal(err)
			}
			base = base.Add(time.Millisecond)
		}
		if j, _ := s.Claim(ctx, "w1"); j == nil || j.ID != "a" {
			t.Fatalf("claim a: %+v", j)
		}
		if err := s.SetProgress(ctx, "a", "w1", "run-a", "t1"); err != nil {
			t.Fatal(err)
		}
		if j, _ := s.Claim(ctx, "w2"); j == nil || j.ID != "b" {
			t.Fatalf("claim b: %+v", j)
		}
		// w2 keeps beating; w1 has been silent for a minute.
		base = base.Add(time.Minute)
		if _, err := s.Heartbeat(ctx, "b", "w2"); err != nil {
			t.Fatal(err)
		}
		ids, err := s.ReapStale(ctx, 30*time.Second)
		if err != nil || len(ids) != 1 || ids[0] != "a" {
			t.Fatalf("reap: %v %v", ids, err)
		}
		if _, err := s.Heartbeat(ctx, "a", "w1"); !errors.Is(err, ErrLost) {
			t.Fatalf("the silent worker still holds its job: %v", err)
		}
		evs, _ := s.Events(ctx, "a", 0, 0)
		if len(evs) != 1 || evs[0].Kind != "job_interrupted" {
			t.Fatalf("events: %+v", evs)
		}
		j, _ := s.Job(ctx, "a")
		if j.Status != Interrupted || j.Worker != "" {
			t.Fatalf("after reap: %+v", j)
		}
		got, err := s.Claim(ctx, "w2")
		if err != nil || got == nil || got.ID != "a" || !got.Resume || got.RunID != "run-a" || got.Attempts != 2 {
			t.Fatalf("resume by another worker: %+v %v", got, err)
		}
	})
}

// TestConcurrentClaims: many workers claiming at once get every job exactly
// once.
func TestConcurrentClaims(t *testing.T) {
	eachStore(t, func(t *testing.T, s *sqlStore) {
		ctx := context.Background()
		const n = 30
		for i := range n {
			cl := fmt.Sprintf("c%d", i)
			mustCluster(t, s, cl)
			if _, err := s.CreateJob(ctx, Job{ID: fmt.Sprintf("j%02d", i), Cluster: cl, Playbook: "p"}, nil); err != nil {
				t.Fatal(err)
			}
		}
		var mu sync.Mutex
		claimed := map[string]string{}
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				name := fmt.Sprintf("w%d", w)
				for {
					j, err := s.Claim(ctx, name)
					if err != nil {
						errs <- err
						return
					}
					if j == nil {
						return
					}
					mu.Lock()
					if prev, ok := claimed[j.ID]; ok {
						errs <- fmt.Errorf("job %s claimed by %s and %s", j.ID, prev, name)
					}
					claimed[j.ID] = name
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if len(claimed) != n {
			t.Fatalf("%d of %d jobs claimed", len(claimed), n)
		}
	})
}

// TestConcurrentCreateOnOneCluster: of many requests racing for one
// cluster, exactly one gets it.
func TestConcurrentCreateOnOneCluster(t *testing.T) {
	eachStore(t, func(t *testing.T, s *sqlStore) {
		ctx := context.Background()
		mustCluster(t, s, "c1")
		var wg sync.WaitGroup
		var mu sync.Mutex
		won, conflicts := 0, 0
		for i := range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := s.CreateJob(ctx, Job{ID: fmt.Sprintf("j%d", i), Cluster: "c1", Playbook: "p"}, nil)
				mu.Lock()
				defer mu.Unlock()
				var ce *ConflictError
				switch {
				case err == nil:
					won++
				case errors.As(err, &ce):
					conflicts++
				default:
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if won != 1 || conflicts != 9 {
			t.Fatalf("%d created, %d conflicts; want 1 and 9", won, conflicts)
		}
	})
}

func TestEventsTokensAudit(t *testing.T) {
	eachStore(t, func(t *testing.T, s *sqlStore) {
		ctx := context.Background()
		mustCluster(t, s, "c1")
		if _, err := s.CreateJob(ctx, Job{ID: "j1", Cluster: "c1", Playbook: "p"}, nil); err != nil {
			t.Fatal(err)
		}
		var evs []Event
		for i := range 5 {
			evs = append(evs, Event{JobID: "j1", Kind: "task_start", Task: fmt.Sprintf("t%d", i), Data: []byte(`{"k":1}`)})
		}
		if err := s.AddEvents(ctx, evs...); err != nil {
			t.Fatal(err)
		}
		all, err := s.Events(ctx, "j1", 0, 0)
		if err != nil || len(all) != 5 || all[4].Task != "t4" || string(all[0].Data) != `{"k":1}` {
			t.Fatalf("events: %+v %v", all, err)
		}
		rest, _ := s.Events(ctx, "j1", all[2].ID, 1)
		if len(rest) != 1 || rest[0].Task != "t3" {
			t.Fatalf("events after: %+v", rest)
		}
		if err := s.AddToken(ctx, "ci", "abc", "operator", time.Time{}); err != nil {
			t.Fatal(err)
		}
		if err := s.AddToken(ctx, "ci", "def", "read-only", time.Time{}); err == nil {
			t.Fatal("duplicate token name accepted")
		}
		if tok, err := s.TokenByHash(ctx, "abc"); err != nil || tok.Name != "ci" || tok.Role != "operator" || !tok.ExpiresAt.IsZero() || tok.Expired(time.Now()) {
			t.Fatalf("token: %+v %v", tok, err)
		}
		exp := time.Now().Add(time.Hour).Truncate(time.Millisecond)
		if err := s.AddToken(ctx, "day", "ghi", "read-only", exp); err != nil {
			t.Fatal(err)
		}
		if tok, err := s.TokenByHash(ctx, "ghi"); err != nil || !tok.ExpiresAt.Equal(exp) || tok.Expired(time.Now()) || !tok.Expired(exp) {
			t.Fatalf("expiring token: %+v %v (want expiry %s)", tok, err, exp)
		}
		if toks, _ := s.Tokens(ctx); len(toks) != 2 || !toks[1].ExpiresAt.Equal(exp) {
			t.Fatalf("tokens: %+v", toks)
		}
		if err := s.DeleteToken(ctx, "day"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.TokenByHash(ctx, "zzz"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown token: %v", err)
		}
		if err := s.DeleteToken(ctx, "ci"); err != nil {
			t.Fatal(err)
		}
		if toks, _ := s.Tokens(ctx); len(toks) != 0 {
			t.Fatalf("tokens after delete: %+v", toks)
		}
		if err := s.Audit(ctx, AuditEntry{Actor: "ci", Action: "create job", Target: "j1"}); err != nil {
			t.Fatal(err)
		}
		if log, err := s.AuditLog(ctx, 10); err != nil || len(log) != 1 || log[0].Actor != "ci" {
			t.Fatalf("audit: %+v %v", log, err)
		}
	})
}

// TestTokenExpiryMigration: a database of schema version 1 (tokens without
// expiry) is migrated at Open; its tokens keep working and never expire.
func TestTokenExpiryMigration(t *testing.T) {
	eachDSN(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		all := migrations
		migrations = all[:2]
		old, err := Open(ctx, dsn)
		migrations = all
		if err != nil {
			t.Fatal(err)
		}
		s1 := old.(*sqlStore)
		if _, err := s1.db.ExecContext(ctx, s1.q(`INSERT INTO tokens (name, sha256, role, created_at) VALUES (?, ?, ?, ?)`), "old", "h1", "operator", time.Now().UnixMilli()); err != nil {
			t.Fatal(err)
		}
		old.Close()
		s := open(t, dsn)
		var v int
		if err := s.db.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&v); err != nil || v != len(migrations)-1 {
			t.Fatalf("schema version %d %v, want %d", v, err, len(migrations)-1)
		}
		if tok, err := s.TokenByHash(ctx, "h1"); err != nil || tok.Name != "old" || !tok.ExpiresAt.IsZero() || tok.Expired(time.Now()) {
			t.Fatalf("the token of before the migration: %+v %v", tok, err)
		}
	})
}

// TestDeleteBundleAcrossStores: two stores on one database (two server
// processes) agree on whether a bundle is in use, and a job naming the
// bundle is not queued, nor resumed, while it is deleted through the
// other store: CreateJob's and Resume's checks wait for DeleteBundle.
func TestDeleteBundleAcrossStores(t *testing.T) {
	eachDSN(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s1, s2 := open(t, dsn), open(t, dsn)
		mustCluster(t, s1, "c1")
		if _, err := s1.CreateJob(ctx, Job{ID: "j1", Cluster: "c1", Playbook: "p", Options: Options{OfflineBundle: "b1"}}, nil); err != nil {
			t.Fatal(err)
		}
		removed := 0
		remove := func() error { removed++; return nil }
		var inUse *BundleInUseError
		if err := s2.DeleteBundle(ctx, "c1", "b1", remove); !errors.As(err, &inUse) || inUse.JobID != "j1" || inUse.Status != Queued || removed != 0 {
			t.Fatalf("delete of the bundle the other store's queued job names: %v (removed %d times)", err, removed)
		}
		if !strings.Contains(inUse.Error(), "job j1 (queued)") || !strings.Contains(inUse.Error(), "cluster c1") {
			t.Errorf("the refusal does not name the job and the cluster: %v", inUse)
		}
		if err := s2.DeleteBundle(ctx, "c1", "b2", remove); err != nil || removed != 1 {
			t.Fatalf("delete of a bundle no job names: %v (removed %d times)", err, removed)
		}
		if err := s2.DeleteBundle(ctx, "c9", "b2", remove); !errors.Is(err, ErrNotFound) || removed != 1 {
			t.Fatalf("delete for an unknown cluster: %v", err)
		}
		if _, err := s2.Cancel(ctx, "j1"); err != nil {
			t.Fatal(err)
		}

		// DeleteBundle holds the cluster while it removes: the other
		// store's CreateJob runs its check only after that.
		inside, release := make(chan struct{}), make(chan struct{})
		var gone, checked atomic.Bool
		done := make(chan error, 1)
		go func() {
			done <- s2.DeleteBundle(ctx, "c1", "b1", func() error {
				close(inside)
				<-release
				gone.Store(true)
				return nil
			})
		}()
		<-inside
		errGone := errors.New("bundle b1 is gone")
		created := make(chan error, 1)
		go func() {
			_, err := s1.CreateJob(ctx, Job{ID: "j2", Cluster: "c1", Playbook: "p", Options: Options{OfflineBundle: "b1"}}, func() error {
				checked.Store(true)
				if gone.Load() {
					return errGone
				}
				return nil
			})
			created <- err
		}()
		time.Sleep(300 * time.Millisecond)
		if checked.Load() {
			t.Fatal("CreateJob ran its check while DeleteBundle held the cluster")
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if err := <-created; err != errGone {
			t.Fatalf("CreateJob after the delete: %v, want its check's error as it is", err)
		}
		if _, err := s1.Job(ctx, "j2"); !errors.Is(err, ErrNotFound) {
			t.Errorf("the refused job was stored: %v", err)
		}
		if _, err := s1.Resume(ctx, "j1", func(j Job) error {
			if j.ID != "j1" || j.Options.OfflineBundle != "b1" {
				t.Errorf("Resume's check got %+v", j)
			}
			return errGone
		}); err != errGone {
			t.Fatalf("Resume refused by its check: %v", err)
		}
		if j, err := s2.Job(ctx, "j1"); err != nil || j.Status != Cancelled {
			t.Errorf("the job whose resume was refused: %+v %v", j, err)
		}
	})
}

// TestSQLiteFilesPrivate: the database and its -wal and -shm are 0600, a
// new one from the start and one an older kubexm left 0644 when opened
// again (issue 45).
func TestSQLiteFilesPrivate(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "kubexm.db")
	check := func(when string) {
		t.Helper()
		for _, f := range []string{p, p + "-wal", p + "-shm"} {
			st, err := os.Stat(f)
			if err != nil {
				t.Fatalf("%s: %v", when, err)
			}
			if st.Mode().Perm() != 0o600 {
				t.Errorf("%s: %s is %04o", when, filepath.Base(f), st.Mode().Perm())
			}
		}
	}
	s := open(t, p)
	mustCluster(t, s, "c1")
	check("new")
	for _, f := range []string{p, p + "-wal", p + "-shm"} {
		if err := os.Chmod(f, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s2 := open(t, p)
	mustCluster(t, s2, "c2")
	check("reopened")
}
