package jobstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	_ "modernc.org/sqlite"             // the "sqlite" database/sql driver, pure Go
)

type sqlStore struct {
	db      *sql.DB
	dialect string
	now     func() time.Time
}

// Open connects to the database named by dsn and brings its schema up to
// date: postgres://... or postgresql://... is PostgreSQL, anything else a
// SQLite file (an optional sqlite: prefix is dropped).
func Open(ctx context.Context, dsn string) (Store, error) {
	s := &sqlStore{now: time.Now}
	var err error
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		s.dialect = "postgres"
		s.db, err = sql.Open("pgx", dsn)
	default:
		s.dialect = "sqlite"
		path := strings.TrimPrefix(dsn, "sqlite:")
		if path == "" {
			return nil, errors.New("no database: give a SQLite file or a postgres:// URL")
		}
		if err := privateFiles(path); err != nil {
			return nil, err
		}
		// WAL lets readers go on while one writer writes; busy_timeout
		// makes a second process (kubexm worker on the same file) wait for
		// the lock instead of failing; _txlock=immediate takes the write
		// lock when a transaction begins, so two claims never interleave.
		q := url.Values{}
		q.Add("_pragma", "busy_timeout(10000)")
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "foreign_keys(1)")
		q.Add("_pragma", "synchronous(NORMAL)")
		q.Set("_txlock", "immediate")
		s.db, err = sql.Open("sqlite", "file:"+path+"?"+q.Encode())
		if err == nil {
			// A few connections serve many readers; more only contend
			// for the one file.
			s.db.SetMaxOpenConns(8)
			s.db.SetMaxIdleConns(8)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	if err := s.db.PingContext(ctx); err != nil {
		s.db.Close()
		return nil, fmt.Errorf("open database (%s): %w", s.dialect, err)
	}
	if err := s.migrate(ctx); err != nil {
		s.db.Close()
		return nil, err
	}
	return s, nil
}

// privateFiles makes the SQLite file and its -wal and -shm readable by
// this user only: they hold the tokens' hashes, the job records and the
// sealed cluster files. SQLite gives the -wal and -shm it creates the mode
// of the database file, so a new database is created 0600 first; an
// existing one, made by an older kubexm 0644, is tightened.
func privateFiles(path string) error {
	if strings.HasPrefix(path, ":memory:") || strings.HasPrefix(path, "file:") {
		return nil
	}
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("open database: %w", err)
		}
	}
	return nil
}

func (s *sqlStore) Dialect() string { return s.dialect }
func (s *sqlStore) Close() error    { return s.db.Close() }

// q turns the ? placeholders the queries are written with into PostgreSQL's
// $1, $2, ...
func (s *sqlStore) q(query string) string {
	if s.dialect != "postgres" {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func isUnique(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "23505"
	}
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed")
}

func (s *sqlStore) PutCluster(ctx context.Context, name string, sealed []byte, masked, by string) (ClusterVersion, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return ClusterVersion{}, err
	}
	defer tx.Rollback()
	now := s.now()
	var v int
	err = tx.QueryRowContext(ctx, s.q(`SELECT version FROM clusters WHERE name = ?`+s.forUpdate()), name).Scan(&v)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		v = 1
		_, err = tx.ExecContext(ctx, s.q(`INSERT INTO clusters (name, version, created_at, updated_at) VALUES (?, 1, ?, ?)`), name, ms(now), ms(now))
	case err == nil:
		v++
		_, err = tx.ExecContext(ctx, s.q(`UPDATE clusters SET version = ?, updated_at = ? WHERE name = ?`), v, ms(now), name)
	}
	if err != nil {
		if isUnique(err) {
			return ClusterVersion{}, fmt.Errorf("cluster %s was registered at the same time by another request; retry", name)
		}
		return ClusterVersion{}, fmt.Errorf("register cluster %s: %w", name, err)
	}
	if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO cluster_versions (cluster, version, sealed, masked, created_by, created_at) VALUES (?, ?, ?, ?, ?, ?)`),
		name, v, sealed, masked, by, ms(now)); err != nil {
		return ClusterVersion{}, fmt.Errorf("register cluster %s: %w", name, err)
	}
	if err := tx.Commit(); err != nil {
		return ClusterVersion{}, fmt.Errorf("register cluster %s: %w", name, err)
	}
	return ClusterVersion{Cluster: name, Version: v, Masked: masked, CreatedBy: by, CreatedAt: fromMS(ms(now))}, nil
}

func (s *sqlStore) forUpdate() string {
	if s.dialect == "postgres" {
		return " FOR UPDATE"
	}
	return "" // SQLite: the transaction already holds the write lock
}

func (s *sqlStore) Clusters(ctx context.Context) ([]Cluster, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name, version, created_at, updated_at FROM clusters ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Cluster
	for rows.Next() {
		var c Cluster
		var ca, ua int64
		if err := rows.Scan(&c.Name, &c.Version, &ca, &ua); err != nil {
			return nil, err
		}
		c.CreatedAt, c.UpdatedAt = fromMS(ca), fromMS(ua)
		out = append(out, c)
	}
	return out, rows.Err()
}

func (s *sqlStore) Cluster(ctx context.Context, name string) (Cluster, error) {
	c := Cluster{Name: name}
	var ca, ua int64
	err := s.db.QueryRowContext(ctx, s.q(`SELECT version, created_at, updated_at FROM clusters WHERE name = ?`), name).Scan(&c.Version, &ca, &ua)
	if errors.Is(err, sql.ErrNoRows) {
		return c, fmt.Errorf("cluster %s: %w", name, ErrNotFound)
	}
	c.CreatedAt, c.UpdatedAt = fromMS(ca), fromMS(ua)
	return c, err
}

func (s *sqlStore) ClusterVersions(ctx context.Context, name string) ([]ClusterVersion, error) {
	if _, err := s.Cluster(ctx, name); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT version, masked, created_by, created_at FROM cluster_versions WHERE cluster = ? ORDER BY version DESC`), name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ClusterVersion
	for rows.Next() {
		v := ClusterVersion{Cluster: name}
		var ca int64
		if err := rows.Scan(&v.Version, &v.Masked, &v.CreatedBy, &ca); err != nil {
			return nil, err
		}
		v.CreatedAt = fromMS(ca)
		out = append(out, v)
	}
	return out, rows.Err()
}

func (s *sqlStore) ClusterConfig(ctx context.Context, name string, version int) (ClusterVersion, error) {
	if version == 0 {
		c, err := s.Cluster(ctx, name)
		if err != nil {
			return ClusterVersion{}, err
		}
		version = c.Version
	}
	v := ClusterVersion{Cluster: name, Version: version}
	var ca int64
	err := s.db.QueryRowContext(ctx, s.q(`SELECT sealed, masked, created_by, created_at FROM cluster_versions WHERE cluster = ? AND version = ?`), name, version).
		Scan(&v.Sealed, &v.Masked, &v.CreatedBy, &ca)
	if errors.Is(err, sql.ErrNoRows) {
		return v, fmt.Errorf("cluster %s version %d: %w", name, version, ErrNotFound)
	}
	v.CreatedAt = fromMS(ca)
	return v, err
}

const jobColumns = `id, cluster, config_version, playbook, options, status, current_task, error, worker, run_id, resume, attempts, cancel_request, created_by, created_at, started_at, finished_at, heartbeat_at, sealed_vars`

type scanner interface{ Scan(...any) error }

func scanJob(r scanner) (Job, error) {
	var j Job
	var opts string
	var resume, cancel int
	var ca, sa, fa, ha int64
	err := r.Scan(&j.ID, &j.Cluster, &j.ConfigVersion, &j.Playbook, &opts, &j.Status, &j.CurrentTask, &j.Error, &j.Worker, &j.RunID,
		&resume, &j.Attempts, &cancel, &j.CreatedBy, &ca, &sa, &fa, &ha, &j.SealedVars)
	if err != nil {
		return j, err
	}
	if err := json.Unmarshal([]byte(opts), &j.Options); err != nil {
		return j, fmt.Errorf("job %s: options: %w", j.ID, err)
	}
	j.Resume, j.CancelRequest = resume != 0, cancel != 0
	j.CreatedAt, j.StartedAt, j.FinishedAt, j.HeartbeatAt = fromMS(ca), fromMS(sa), fromMS(fa), fromMS(ha)
	return j, nil
}

func (s *sqlStore) CreateJob(ctx context.Context, j Job, check func() error) (Job, error) {
	if _, err := s.Cluster(ctx, j.Cluster); err != nil {
		return Job{}, err
	}
	opts, err := json.Marshal(j.Options)
	if err != nil {
		return Job{}, err
	}
	j.Status, j.CreatedAt = Queued, fromMS(ms(s.now()))
	var refused error
	err = s.orConflict(ctx, j.Cluster, func() error {
		return s.inClusterTx(ctx, j.Cluster, func(tx *sql.Tx) error {
			if check != nil {
				if refused = check(); refused != nil {
					return refused
				}
			}
			_, err := tx.ExecContext(ctx, s.q(`INSERT INTO jobs (id, cluster, config_version, playbook, options, status, created_by, created_at, sealed_vars) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
				j.ID, j.Cluster, j.ConfigVersion, j.Playbook, string(opts), j.Status, j.CreatedBy, ms(j.CreatedAt), j.SealedVars)
			return err
		})
	})
	var ce *ConflictError
	if refused != nil || errors.As(err, &ce) || errors.Is(err, ErrNotFound) {
		return Job{}, err
	}
	if err != nil {
		return Job{}, fmt.Errorf("create job: %w", err)
	}
	return j, nil
}

// inClusterTx runs fn in a transaction that holds cluster's row (FOR
// UPDATE on PostgreSQL; on SQLite the immediate transaction holds the
// whole database): two such transactions on one cluster, in any processes
// sharing the database, never interleave. fn's error rolls it back.
func (s *sqlStore) inClusterTx(ctx context.Context, cluster string, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var one int
	err = tx.QueryRowContext(ctx, s.q(`SELECT 1 FROM clusters WHERE name = ?`+s.forUpdate()), cluster).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("cluster %s: %w", cluster, ErrNotFound)
	}
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

func (s *sqlStore) DeleteBundle(ctx context.Context, cluster, sha256 string, remove func() error) error {
	var removeErr error
	err := s.inClusterTx(ctx, cluster, func(tx *sql.Tx) error {
		// The unique index leaves at most one active job per cluster; the
		// loop does not rely on it.
		rows, err := tx.QueryContext(ctx, s.q(`SELECT `+jobColumns+` FROM jobs WHERE cluster = ? AND status IN ('queued', 'running', 'interrupted')`), cluster)
		if err != nil {
			return err
		}
		var user *Job
		for rows.Next() {
			j, err := scanJob(rows)
			if err != nil {
				rows.Close()
				return err
			}
			if j.Options.OfflineBundle == sha256 && user == nil {
				user = &j
			}
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if user != nil {
			return &BundleInUseError{Cluster: cluster, SHA256: sha256, JobID: user.ID, Status: user.Status}
		}
		removeErr = remove()
		return removeErr
	})
	var inUse *BundleInUseError
	if removeErr != nil || errors.As(err, &inUse) || errors.Is(err, ErrNotFound) || err == nil {
		return err
	}
	return fmt.Errorf("delete bundle %s of cluster %s: %w", sha256, cluster, err)
}

// orConflict runs write, which makes a job active on cluster; when the
// unique index refuses it, it names the job that holds the cluster. That
// job may end between the two statements: then write is tried again.
func (s *sqlStore) orConflict(ctx context.Context, cluster string, write func() error) error {
	var err error
	for range 5 {
		if err = write(); !isUnique(err) {
			return err
		}
		var id string
		var st Status
		qerr := s.db.QueryRowContext(ctx, s.q(`SELECT id, status FROM jobs WHERE cluster = ? AND status IN ('queued', 'running', 'interrupted')`), cluster).Scan(&id, &st)
		if qerr == nil {
			return &ConflictError{Cluster: cluster, JobID: id, Status: st}
		}
		if !errors.Is(qerr, sql.ErrNoRows) {
			return qerr
		}
	}
	return fmt.Errorf("cluster %s: jobs kept starting and ending while this one was queued: %w", cluster, err)
}

func (s *sqlStore) Job(ctx context.Context, id string) (Job, error) {
	j, err := scanJob(s.db.QueryRowContext(ctx, s.q(`SELECT `+jobColumns+` FROM jobs WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return j, fmt.Errorf("job %s: %w", id, ErrNotFound)
	}
	return j, err
}

func (s *sqlStore) Jobs(ctx context.Context, f JobFilter) ([]Job, error) {
	query := `SELECT ` + jobColumns + ` FROM jobs WHERE 1 = 1`
	var args []any
	if f.Cluster != "" {
		query += ` AND cluster = ?`
		args = append(args, f.Cluster)
	}
	if f.Status != "" {
		query += ` AND status = ?`
		args = append(args, string(f.Status))
	}
	query += ` ORDER BY created_at DESC, id`
	if f.Limit > 0 {
		query += ` LIMIT ` + strconv.Itoa(f.Limit)
	}
	rows, err := s.db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

func (s *sqlStore) Claim(ctx context.Context, worker string) (*Job, error) {
	now := ms(s.now())
	// One statement: on PostgreSQL the row lock with SKIP LOCKED lets
	// concurrent claims pass over each other's job; SQLite runs a write
	// statement alone. An interrupted job is resumed, not started over.
	pick := `SELECT id FROM jobs WHERE status IN ('queued', 'interrupted') ORDER BY created_at, id LIMIT 1`
	if s.dialect == "postgres" {
		pick += ` FOR UPDATE SKIP LOCKED`
	}
	row := s.db.QueryRowContext(ctx, s.q(`UPDATE jobs SET
		status = 'running', worker = ?, heartbeat_at = ?, attempts = attempts + 1, current_task = '', error = '',
		resume = CASE WHEN status = 'interrupted' AND run_id <> '' THEN 1 ELSE resume END,
		started_at = CASE WHEN started_at = 0 THEN ? ELSE started_at END
		WHERE id = (`+pick+`) AND status IN ('queued', 'interrupted')
		RETURNING `+jobColumns), worker, now, now)
	j, err := scanJob(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("claim a job: %w", err)
	}
	return &j, nil
}

func (s *sqlStore) Heartbeat(ctx context.Context, id, worker string) (bool, error) {
	var cancel int
	err := s.db.QueryRowContext(ctx, s.q(`UPDATE jobs SET heartbeat_at = ? WHERE id = ? AND worker = ? AND status = 'running' RETURNING cancel_request`),
		ms(s.now()), id, worker).Scan(&cancel)
	if errors.Is(err, sql.ErrNoRows) {
		return false, fmt.Errorf("job %s: %w", id, ErrLost)
	}
	return cancel != 0, err
}

func (s *sqlStore) SetProgress(ctx context.Context, id, worker, runID, task string) error {
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE jobs SET current_task = ?, run_id = CASE WHEN ? <> '' THEN ? ELSE run_id END
		WHERE id = ? AND worker = ? AND status = 'running'`), task, runID, runID, id, worker)
	return lost(id, res, err)
}

func lost(id string, res sql.Result, err error) error {
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return fmt.Errorf("job %s: %w", id, ErrLost)
	}
	return nil
}

func (s *sqlStore) Finish(ctx context.Context, id, worker string, st Status, msg string) error {
	if st.Active() {
		return fmt.Errorf("finish job %s: %s is not an end state", id, st)
	}
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE jobs SET status = ?, error = ?, finished_at = ?, current_task = '', resume = 0
		WHERE id = ? AND worker = ? AND status = 'running'`), string(st), msg, ms(s.now()), id, worker)
	return lost(id, res, err)
}

func (s *sqlStore) Interrupt(ctx context.Context, id, worker, msg string) error {
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE jobs SET status = 'interrupted', worker = '', error = ?, current_task = '' WHERE id = ? AND worker = ? AND status = 'running'`), msg, id, worker)
	return lost(id, res, err)
}

func (s *sqlStore) Cancel(ctx context.Context, id string) (Job, error) {
	now := ms(s.now())
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE jobs SET
		status = CASE WHEN status = 'running' THEN status ELSE 'cancelled' END,
		finished_at = CASE WHEN status = 'running' THEN finished_at ELSE ? END,
		cancel_request = CASE WHEN status = 'running' THEN 1 ELSE cancel_request END
		WHERE id = ? AND status IN ('queued', 'running', 'interrupted')`), now, id)
	if err != nil {
		return Job{}, fmt.Errorf("cancel job %s: %w", id, err)
	}
	j, jerr := s.Job(ctx, id)
	if jerr != nil {
		return j, jerr
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return j, fmt.Errorf("job %s is %s, not queued, running or interrupted: %w", id, j.Status, ErrState)
	}
	return j, nil
}

func (s *sqlStore) Resume(ctx context.Context, id string, check func(Job) error) (Job, error) {
	j, err := s.Job(ctx, id)
	if err != nil {
		return j, err
	}
	var res sql.Result
	var refused error
	err = s.orConflict(ctx, j.Cluster, func() error {
		return s.inClusterTx(ctx, j.Cluster, func(tx *sql.Tx) error {
			if check != nil {
				if refused = check(j); refused != nil {
					return refused
				}
			}
			var err error
			res, err = tx.ExecContext(ctx, s.q(`UPDATE jobs SET status = 'queued', resume = CASE WHEN run_id <> '' THEN 1 ELSE 0 END,
			cancel_request = 0, error = '', finished_at = 0, worker = ''
			WHERE id = ? AND status IN ('failed', 'cancelled', 'interrupted')`), id)
			return err
		})
	})
	var ce *ConflictError
	if refused != nil || errors.As(err, &ce) {
		return j, err
	}
	if err != nil {
		return j, fmt.Errorf("resume job %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return j, fmt.Errorf("job %s is %s; only a failed, cancelled or interrupted job can be resumed: %w", id, j.Status, ErrState)
	}
	return s.Job(ctx, id)
}

func (s *sqlStore) ReapStale(ctx context.Context, ttl time.Duration) ([]string, error) {
	now := s.now()
	rows, err := s.db.QueryContext(ctx, s.q(`UPDATE jobs SET status = 'interrupted', worker = '', cancel_request = 0
		WHERE status = 'running' AND heartbeat_at < ? RETURNING id, worker`), ms(now.Add(-ttl)))
	if err != nil {
		return nil, fmt.Errorf("reap stale jobs: %w", err)
	}
	var ids []string
	for rows.Next() {
		var id, w string
		if err := rows.Scan(&id, &w); err != nil {
			rows.Close()
			return nil, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, id := range ids {
		data, _ := json.Marshal(map[string]string{"message": fmt.Sprintf("no heartbeat from its worker for %s: interrupted; a worker resumes it from the engine's journal", ttl)})
		if err := s.AddEvents(ctx, Event{JobID: id, Time: now, Kind: "job_interrupted", Status: string(Interrupted), Data: data}); err != nil {
			return ids, err
		}
	}
	return ids, nil
}

func (s *sqlStore) AddEvents(ctx context.Context, evs ...Event) error {
	if len(evs) == 0 {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	stmt, err := tx.PrepareContext(ctx, s.q(`INSERT INTO job_events (job_id, time, kind, task, host, status, data) VALUES (?, ?, ?, ?, ?, ?, ?)`))
	if err != nil {
		return err
	}
	defer stmt.Close()
	for _, e := range evs {
		t := e.Time
		if t.IsZero() {
			t = s.now()
		}
		if _, err := stmt.ExecContext(ctx, e.JobID, ms(t), e.Kind, e.Task, e.Host, e.Status, string(e.Data)); err != nil {
			return fmt.Errorf("store events of job %s: %w", e.JobID, err)
		}
	}
	return tx.Commit()
}

func (s *sqlStore) Events(ctx context.Context, jobID string, after int64, limit int) ([]Event, error) {
	if limit <= 0 {
		limit = 1000
	}
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT id, time, kind, task, host, status, data FROM job_events WHERE job_id = ? AND id > ? ORDER BY id LIMIT `+strconv.Itoa(limit)), jobID, after)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		e := Event{JobID: jobID}
		var t int64
		var data string
		if err := rows.Scan(&e.ID, &t, &e.Kind, &e.Task, &e.Host, &e.Status, &data); err != nil {
			return nil, err
		}
		e.Time = fromMS(t)
		if data != "" {
			e.Data = json.RawMessage(data)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

func (s *sqlStore) JobCounts(ctx context.Context) (map[Status]int, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT status, COUNT(*) FROM jobs GROUP BY status`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[Status]int{}
	for _, st := range Statuses {
		out[st] = 0
	}
	for rows.Next() {
		var st Status
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, err
		}
		out[st] = n
	}
	return out, rows.Err()
}

func (s *sqlStore) AddToken(ctx context.Context, name, hash, role string, expires time.Time) error {
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO tokens (name, sha256, role, created_at, expires_at) VALUES (?, ?, ?, ?, ?)`), name, hash, role, ms(s.now()), ms(expires))
	if isUnique(err) {
		return fmt.Errorf("a token named %s exists already: delete it first", name)
	}
	return err
}

const tokenColumns = `name, role, created_at, expires_at`

func scanToken(sc interface{ Scan(...any) error }) (Token, error) {
	var t Token
	var ca, ea int64
	err := sc.Scan(&t.Name, &t.Role, &ca, &ea)
	t.CreatedAt, t.ExpiresAt = fromMS(ca), fromMS(ea)
	return t, err
}

func (s *sqlStore) TokenByHash(ctx context.Context, hash string) (Token, error) {
	t, err := scanToken(s.db.QueryRowContext(ctx, s.q(`SELECT `+tokenColumns+` FROM tokens WHERE sha256 = ?`), hash))
	if errors.Is(err, sql.ErrNoRows) {
		return t, fmt.Errorf("token: %w", ErrNotFound)
	}
	return t, err
}

func (s *sqlStore) Tokens(ctx context.Context) ([]Token, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+tokenColumns+` FROM tokens ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Token
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

func (s *sqlStore) DeleteToken(ctx context.Context, name string) error {
	res, err := s.db.ExecContext(ctx, s.q(`DELETE FROM tokens WHERE name = ?`), name)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("token %s: %w", name, ErrNotFound)
	}
	return nil
}

func (s *sqlStore) Audit(ctx context.Context, e AuditEntry) error {
	if e.Time.IsZero() {
		e.Time = s.now()
	}
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO audit (time, actor, action, target, detail) VALUES (?, ?, ?, ?, ?)`), ms(e.Time), e.Actor, e.Action, e.Target, e.Detail)
	return err
}

func (s *sqlStore) AuditLog(ctx context.Context, limit int) ([]AuditEntry, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id, time, actor, action, target, detail FROM audit ORDER BY id DESC LIMIT `+strconv.Itoa(limit))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []AuditEntry
	for rows.Next() {
		var e AuditEntry
		var t int64
		if err := rows.Scan(&e.ID, &t, &e.Actor, &e.Action, &e.Target, &e.Detail); err != nil {
			return nil, err
		}
		e.Time = fromMS(t)
		out = append(out, e)
	}
	return out, rows.Err()
}
