package jobstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// migrations are applied in order, each once, at Open; a database records
// the versions it has in schema_migrations. Never edit a released one: add
// the next. {{serial}} and {{blob}} are the dialect's auto-increment key and
// byte string types.
var migrations = []string{
	1: `
CREATE TABLE clusters (
	name       TEXT PRIMARY KEY,
	version    INTEGER NOT NULL,
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL
);
CREATE TABLE cluster_versions (
	cluster    TEXT NOT NULL REFERENCES clusters(name),
	version    INTEGER NOT NULL,
	sealed     {{blob}} NOT NULL,
	masked     TEXT NOT NULL,
	created_by TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	PRIMARY KEY (cluster, version)
);
CREATE TABLE jobs (
	id             TEXT PRIMARY KEY,
	cluster        TEXT NOT NULL REFERENCES clusters(name),
	config_version INTEGER NOT NULL,
	playbook       TEXT NOT NULL,
	options        TEXT NOT NULL,
	status         TEXT NOT NULL,
	current_task   TEXT NOT NULL DEFAULT '',
	error          TEXT NOT NULL DEFAULT '',
	worker         TEXT NOT NULL DEFAULT '',
	run_id         TEXT NOT NULL DEFAULT '',
	resume         INTEGER NOT NULL DEFAULT 0,
	attempts       INTEGER NOT NULL DEFAULT 0,
	cancel_request INTEGER NOT NULL DEFAULT 0,
	created_by     TEXT NOT NULL,
	created_at     BIGINT NOT NULL,
	started_at     BIGINT NOT NULL DEFAULT 0,
	finished_at    BIGINT NOT NULL DEFAULT 0,
	heartbeat_at   BIGINT NOT NULL DEFAULT 0
);
-- One active job per cluster, kept by the database itself so that two
-- servers racing on one cluster cannot both win.
CREATE UNIQUE INDEX jobs_one_active_per_cluster ON jobs (cluster) WHERE status IN ('queued', 'running', 'interrupted');
CREATE INDEX jobs_status ON jobs (status, created_at);
CREATE TABLE job_events (
	id     {{serial}},
	job_id TEXT NOT NULL REFERENCES jobs(id),
	time   BIGINT NOT NULL,
	kind   TEXT NOT NULL,
	task   TEXT NOT NULL DEFAULT '',
	host   TEXT NOT NULL DEFAULT '',
	status TEXT NOT NULL DEFAULT '',
	data   TEXT NOT NULL DEFAULT ''
);
CREATE INDEX job_events_job ON job_events (job_id, id);
CREATE TABLE tokens (
	name       TEXT PRIMARY KEY,
	sha256     TEXT NOT NULL UNIQUE,
	role       TEXT NOT NULL,
	created_at BIGINT NOT NULL
);
CREATE TABLE audit (
	id     {{serial}},
	time   BIGINT NOT NULL,
	actor  TEXT NOT NULL,
	action TEXT NOT NULL,
	target TEXT NOT NULL,
	detail TEXT NOT NULL DEFAULT ''
);
`,
	// Tokens may expire; 0 is never (every token made before).
	2: `ALTER TABLE tokens ADD COLUMN expires_at BIGINT NOT NULL DEFAULT 0`,
	// A job's extra vars as given, sealed: options.extra_vars keeps them
	// masked. NULL for the jobs made before, which carry them in clear.
	3: `ALTER TABLE jobs ADD COLUMN sealed_vars {{blob}}`,
}

func (s *sqlStore) migrate(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback()
	if s.dialect == "postgres" {
		// Servers and workers starting together: one migrates, the others
		// wait for it and find nothing left to do.
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(7283462)`); err != nil {
			return fmt.Errorf("migrate: lock: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	var have sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&have); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if int(have.Int64) > len(migrations)-1 {
		return fmt.Errorf("the database has schema version %d, newer than this kubexm knows (%d): upgrade kubexm", have.Int64, len(migrations)-1)
	}
	for v := int(have.Int64) + 1; v < len(migrations); v++ {
		ddl := migrations[v]
		if s.dialect == "postgres" {
			ddl = strings.NewReplacer("{{serial}}", "BIGSERIAL PRIMARY KEY", "{{blob}}", "BYTEA").Replace(ddl)
		} else {
			ddl = strings.NewReplacer("{{serial}}", "INTEGER PRIMARY KEY AUTOINCREMENT", "{{blob}}", "BLOB").Replace(ddl)
		}
		for _, stmt := range strings.Split(ddl, ";\n") {
			if strings.TrimSpace(stmt) == "" {
				continue
			}
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("migration %d: %w", v, err)
			}
		}
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`), v, time.Now().UnixMilli()); err != nil {
			return fmt.Errorf("migration %d: %w", v, err)
		}
	}
	return tx.Commit()
}
