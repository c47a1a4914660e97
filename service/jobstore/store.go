// Package jobstore persists what service mode needs: registered clusters
// and the versions of their cluster.yaml, jobs and their events, API tokens
// and the audit log. One implementation serves SQLite (embedded, the
// default) and PostgreSQL (for workers on more than one machine).
package jobstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Status is where a job is in its life.
type Status string

const (
	Queued      Status = "queued"
	Running     Status = "running"
	Succeeded   Status = "succeeded"
	Failed      Status = "failed"
	Cancelled   Status = "cancelled"
	Interrupted Status = "interrupted" // its worker stopped heart-beating; any worker resumes it
)

// Statuses lists every status, in the order of a job's life.
var Statuses = []Status{Queued, Running, Interrupted, Succeeded, Failed, Cancelled}

// Active says whether a job in this status holds its cluster: one such job
// per cluster at a time.
func (s Status) Active() bool { return s == Queued || s == Running || s == Interrupted }

// Options are the `kubexm play` flags a job may carry.
type Options struct {
	Tags      []string `json:"tags,omitempty"`
	SkipTags  []string `json:"skip_tags,omitempty"`
	Limit     string   `json:"limit,omitempty"`
	Check     bool     `json:"check,omitempty"`
	Diff      bool     `json:"diff,omitempty"`
	ExtraVars []string `json:"extra_vars,omitempty"` // name=value or a {...} mapping, as -e
	// OfflineBundle is the sha256 of a bundle uploaded for the job's
	// cluster (POST /api/v1/clusters/NAME/bundles): the job runs with
	// --offline-bundle of it.
	OfflineBundle string `json:"offline_bundle,omitempty"`
	// Backup names an archive in the cluster's backups directory on the
	// server (what a backup job made there): a restore job runs with
	// --backup of it.
	Backup string `json:"backup,omitempty"`
	// Command makes the job an ad-hoc command (playbook CommandPlaybook):
	// the worker runs `kubexm run command` with it instead of a playbook.
	Command *Command `json:"command,omitempty"`
}

// CommandPlaybook is the playbook name of a job that runs an ad-hoc
// command (Options.Command) rather than a playbook.
const CommandPlaybook = "run-command"

// Command is `kubexm run command` as a job: the hosts, the command and
// how it runs. Stored as given, as extra vars are: no secrets in it.
type Command struct {
	Argv       []string `json:"argv"`
	Nodes      []string `json:"nodes,omitempty"`
	Groups     []string `json:"groups,omitempty"`
	Limit      string   `json:"limit,omitempty"` // a host pattern, as --limit
	Shell      bool     `json:"shell,omitempty"`
	Become     bool     `json:"become,omitempty"`
	BecomeUser string   `json:"become_user,omitempty"`
	Timeout    string   `json:"timeout,omitempty"` // a Go duration
	Forks      int      `json:"forks,omitempty"`
}

// Job is one run of a playbook on a registered cluster.
type Job struct {
	ID            string    `json:"id"`
	Cluster       string    `json:"cluster"`
	ConfigVersion int       `json:"config_version"`
	Playbook      string    `json:"playbook"`
	Options       Options   `json:"options"`
	Status        Status    `json:"status"`
	CurrentTask   string    `json:"current_task,omitempty"`
	Error         string    `json:"error,omitempty"`
	Worker        string    `json:"worker,omitempty"`
	RunID         string    `json:"run_id,omitempty"` // the engine's run, continued on resume
	Resume        bool      `json:"resume,omitempty"` // the next attempt continues RunID
	Attempts      int       `json:"attempts"`
	CancelRequest bool      `json:"cancel_requested,omitempty"`
	CreatedBy     string    `json:"created_by,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
	StartedAt     time.Time `json:"started_at,omitzero"`
	FinishedAt    time.Time `json:"finished_at,omitzero"`
	HeartbeatAt   time.Time `json:"heartbeat_at,omitzero"`
	// SealedVars are the extra vars as given, sealed (the worker opens
	// them); Options.ExtraVars holds them masked. Never in the API.
	SealedVars []byte `json:"-"`
}

// Event is one line of a job's history: an engine event (task start, host
// result, recap, ...) or a state change the service made.
type Event struct {
	ID     int64           `json:"id"`
	JobID  string          `json:"job_id"`
	Time   time.Time       `json:"time"`
	Kind   string          `json:"kind"`
	Task   string          `json:"task,omitempty"`
	Host   string          `json:"host,omitempty"`
	Status string          `json:"status,omitempty"`
	Data   json.RawMessage `json:"data,omitempty"` // the engine's event as it printed it (secrets masked)
}

// Cluster is a registered cluster.
type Cluster struct {
	Name      string    `json:"name"`
	Version   int       `json:"version"` // the newest config version
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// ClusterVersion is one registered cluster.yaml. Sealed is the document as
// given, encrypted; Masked is it with defaults filled in and every secret
// masked, the only form the API returns.
type ClusterVersion struct {
	Cluster   string    `json:"cluster"`
	Version   int       `json:"version"`
	Masked    string    `json:"config"`
	Sealed    []byte    `json:"-"`
	CreatedBy string    `json:"created_by,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// Token is an API bearer token; only the SHA-256 of its value is stored.
type Token struct {
	Name      string    `json:"name"`
	Role      string    `json:"role"`
	CreatedAt time.Time `json:"created_at"`
	// ExpiresAt is when the token stops working; zero for never.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// Expired says whether the token no longer works at now.
func (t Token) Expired(now time.Time) bool {
	return !t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt)
}

// AuditEntry records who did what through the API.
type AuditEntry struct {
	ID     int64     `json:"id"`
	Time   time.Time `json:"time"`
	Actor  string    `json:"actor"`
	Action string    `json:"action"`
	Target string    `json:"target"`
	Detail string    `json:"detail,omitempty"`
}

// JobFilter narrows Jobs; zero fields match everything.
type JobFilter struct {
	Cluster string
	Status  Status
	Limit   int
}

var (
	// ErrNotFound: no such cluster, job or token.
	ErrNotFound = errors.New("not found")
	// ErrLost: the job is no longer this worker's (it was marked
	// interrupted, or finished elsewhere).
	ErrLost = errors.New("job is no longer held by this worker")
	// ErrState: the job is not in a state that allows the request.
	ErrState = errors.New("job state does not allow this")
)

// ConflictError says a cluster already has an active job.
type ConflictError struct {
	Cluster string
	JobID   string
	Status  Status
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("cluster %s already has job %s (%s); one job runs on a cluster at a time: wait for it, or cancel it", e.Cluster, e.JobID, e.Status)
}

// BundleInUseError says an active job names an offline bundle that was to
// be deleted.
type BundleInUseError struct {
	Cluster string
	SHA256  string
	JobID   string
	Status  Status
}

func (e *BundleInUseError) Error() string {
	return fmt.Sprintf("bundle %s of cluster %s is used by job %s (%s): delete it when the job has ended, or cancel the job", e.SHA256, e.Cluster, e.JobID, e.Status)
}

// Store is what the API server and the workers need from the database.
type Store interface {
	// PutCluster registers a new version of a cluster's config (version 1
	// registers the cluster).
	PutCluster(ctx context.Context, name string, sealed []byte, masked, by string) (ClusterVersion, error)
	Clusters(ctx context.Context) ([]Cluster, error)
	Cluster(ctx context.Context, name string) (Cluster, error)
	// ClusterVersions lists a cluster's versions, newest first, without
	// their sealed documents.
	ClusterVersions(ctx context.Context, name string) ([]ClusterVersion, error)
	// ClusterConfig returns one version with its sealed document; version
	// 0 is the newest.
	ClusterConfig(ctx context.Context, name string, version int) (ClusterVersion, error)

	// CreateJob queues j (its ID, Cluster, ConfigVersion, Playbook, Options
	// and CreatedBy are used); a *ConflictError when the cluster has an
	// active job. check, when not nil, runs holding the cluster (see
	// DeleteBundle) just before the job is written; its error refuses the
	// job and is returned as it is.
	CreateJob(ctx context.Context, j Job, check func() error) (Job, error)
	Job(ctx context.Context, id string) (Job, error)
	Jobs(ctx context.Context, f JobFilter) ([]Job, error)
	// Claim gives worker the oldest queued or interrupted job, in one
	// transaction so that no other worker gets it; nil when there is none.
	Claim(ctx context.Context, worker string) (*Job, error)
	// Heartbeat records that worker still runs the job, and says whether a
	// cancel was asked; ErrLost when the job is no longer the worker's.
	Heartbeat(ctx context.Context, id, worker string) (cancel bool, err error)
	// SetProgress records the running task and the engine's run id.
	SetProgress(ctx context.Context, id, worker, runID, task string) error
	// Finish ends a running job; ErrLost when it is no longer the worker's.
	Finish(ctx context.Context, id, worker string, s Status, msg string) error
	// Interrupt hands a running job back (its worker is stopping): any
	// worker resumes it.
	Interrupt(ctx context.Context, id, worker, msg string) error
	// Cancel cancels a queued or interrupted job at once and asks the
	// worker of a running one to stop it.
	Cancel(ctx context.Context, id string) (Job, error)
	// Resume queues a failed, cancelled or interrupted job again to
	// continue its run; a *ConflictError when its cluster is busy. check,
	// when not nil, runs as CreateJob's does, given the job.
	Resume(ctx context.Context, id string, check func(Job) error) (Job, error)
	// DeleteBundle runs remove, which removes the uploaded offline bundle
	// sha256 of cluster, holding the cluster: a *BundleInUseError instead
	// when an active job names the bundle. CreateJob and Resume hold the
	// cluster for their checks too, in whichever process sharing the
	// database they run: no job naming the bundle is queued between the
	// look at the jobs and the removal.
	DeleteBundle(ctx context.Context, cluster, sha256 string, remove func() error) error
	// ReapStale marks interrupted the running jobs whose heartbeat is older
	// than ttl, and returns their ids.
	ReapStale(ctx context.Context, ttl time.Duration) ([]string, error)
	AddEvents(ctx context.Context, evs ...Event) error
	// Events returns a job's events with an ID above after, oldest first.
	Events(ctx context.Context, jobID string, after int64, limit int) ([]Event, error)
	// JobCounts counts the jobs per status.
	JobCounts(ctx context.Context) (map[Status]int, error)

	// AddToken stores a token by the SHA-256 of its value; a zero
	// expires never expires.
	AddToken(ctx context.Context, name, sha256hex, role string, expires time.Time) error
	TokenByHash(ctx context.Context, sha256hex string) (Token, error)
	Tokens(ctx context.Context) ([]Token, error)
	DeleteToken(ctx context.Context, name string) error

	Audit(ctx context.Context, e AuditEntry) error
	AuditLog(ctx context.Context, limit int) ([]AuditEntry, error)

	// Dialect is "sqlite" or "postgres".
	Dialect() string
	Close() error
}
