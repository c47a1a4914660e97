// Package client is the client of the kubexm server's API that the CLI's
// verbs use with --server: requests with the server's errors turned into
// hints, bundle uploads, backup downloads and following a job's event
// stream.
package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mensylisir/kubexm/bundle/tarz"
	"github.com/mensylisir/kubexm/engine"
	"github.com/mensylisir/kubexm/engine/model"
	"github.com/mensylisir/kubexm/lifecycle"
	"github.com/mensylisir/kubexm/service/jobstore"
)

// Client is the small client of the kubexm API the CLI verbs use.
type Client struct {
	// Base is the server's URL; HTTP the client of short requests.
	Base  *url.URL
	HTTP  *http.Client
	token string
}

// Options reach a kubexm server.
type Options struct {
	// Server is the server's URL; Token the API token ($KUBEXM_TOKEN when
	// empty).
	Server string
	Token  string
	// CA is a CA certificate file to trust the server with; Insecure
	// trusts any certificate.
	CA       string
	Insecure bool
}

// New is a client of the server of o.
func New(o Options) (*Client, error) {
	if o.Server == "" {
		return nil, errors.New("no server: give --server URL or set KUBEXM_SERVER")
	}
	u, err := url.Parse(o.Server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--server %q: want http(s)://host:port", o.Server)
	}
	tok := o.Token
	if tok == "" {
		tok = os.Getenv("KUBEXM_TOKEN")
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: o.Insecure} //nolint:gosec // only when asked for
	if o.CA != "" {
		pem, err := os.ReadFile(o.CA)
		if err != nil {
			return nil, fmt.Errorf("--ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca %s: no PEM certificate in it", o.CA)
		}
		tc.RootCAs = pool
	}
	return &Client{Base: u, token: tok, HTTP: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}}, nil
}

// Get decodes the JSON answer of GET path into v.
func (c *Client) Get(ctx context.Context, path string, query url.Values, v any) error {
	if len(query) > 0 {
		path += "?" + query.Encode()
	}
	return c.Do(ctx, c.HTTP, http.MethodGet, path, "", nil, http.StatusOK, v)
}

// Do sends a request (path may end in ?query) and decodes an answer of
// status want into v.
func (c *Client) Do(ctx context.Context, hc *http.Client, method, path, ctype string, body io.Reader, want int, v any) error {
	resp, err := c.Send(ctx, hc, method, path, ctype, body, want)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("kubexm server %s: %s %s: %w", c.Base.Redacted(), method, resp.Request.URL.Path, err)
	}
	if v != nil {
		return json.Unmarshal(data, v)
	}
	return nil
}

// Send sends a request and returns the answer of status want, its body
// still to be read (and closed); any other answer is an error with the
// server's message and a hint.
func (c *Client) Send(ctx context.Context, hc *http.Client, method, path, ctype string, body io.Reader, want int) (*http.Response, error) {
	p, query, _ := strings.Cut(path, "?")
	u := c.Base.JoinPath(p)
	u.RawQuery = query
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, err
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if f, ok := body.(*os.File); ok {
		if st, err := f.Stat(); err == nil {
			req.ContentLength = st.Size()
		}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, c.unreachable(err)
	}
	if resp.StatusCode != want {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, c.statusError(method, p, resp.StatusCode, data)
	}
	return resp, nil
}

// unreachable is the error of a request that got no answer.
func (c *Client) unreachable(err error) error {
	return fmt.Errorf("kubexm server %s: %w (is kubexm server running there? check --server, and --ca or --insecure-skip-tls-verify for its certificate)", c.Base.Redacted(), err)
}

// statusError is the error of an answer that is not the one wanted: the
// server's message, the status and a hint of what to do about it.
func (c *Client) statusError(method, path string, code int, body []byte) error {
	var e struct {
		Error string
		JobID string `json:"job_id"`
	}
	msg := fmt.Sprintf("HTTP %d", code)
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		msg = fmt.Sprintf("%s (HTTP %d)", e.Error, code)
	}
	hint := ""
	cluster, sum, isBundle := strings.Cut(strings.TrimPrefix(path, "/api/v1/clusters/"), "/bundles/")
	switch {
	case code == http.StatusUnauthorized:
		hint = "; give an API token with --token or $KUBEXM_TOKEN (kubexm server token create NAME on the server makes one)"
	case code == http.StatusForbidden:
		hint = "; ask for an operator token (kubexm server token create NAME --role operator)"
	case code == http.StatusNotFound && isBundle && strings.Contains(e.Error, sum):
		hint = fmt.Sprintf("; kubexm bundle list --server %s --cluster %s lists its bundles", c.Base.Redacted(), cluster)
	case code == http.StatusNotFound && strings.HasPrefix(path, "/api/v1/clusters/"):
		hint = fmt.Sprintf("; kubexm get clusters --server %s lists the registered clusters (a verb with -f cluster.yaml --server registers one)", c.Base.Redacted())
	case code == http.StatusConflict && e.JobID != "":
		hint = fmt.Sprintf("; kubexm get job %s --server %s shows the job", e.JobID, c.Base.Redacted())
	}
	return fmt.Errorf("kubexm server %s: %s %s: %s%s", c.Base.Redacted(), method, path, msg, hint)
}

// Streaming is the client for uploads and event streams, which may take
// longer than any fixed timeout.
func (c *Client) Streaming() *http.Client {
	return &http.Client{Transport: c.HTTP.Transport}
}

// ExtraVars are the -e values as a job carries them: an @file is
// read here (the server refuses to read files for a client), so the whole
// set is sent as one mapping then.
func ExtraVars(vars []string) ([]string, error) {
	file := false
	for _, v := range vars {
		file = file || strings.HasPrefix(strings.TrimSpace(v), "@")
	}
	if !file {
		return vars, nil
	}
	m, err := engine.ParseExtraVars(vars)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("extra vars: %w", err)
	}
	return []string{string(data)}, nil
}

// EnsureBundle makes sure the server has the bundle at path for cluster,
// uploading it unless a bundle of the same sha256 is there, and returns
// its sha256.
func (c *Client) EnsureBundle(ctx context.Context, cluster, path string, errw io.Writer) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("--offline-bundle: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	size, err := io.Copy(h, f)
	if err != nil {
		return "", fmt.Errorf("--offline-bundle %s: %w", path, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	var have struct {
		Bundles []struct {
			SHA256 string `json:"sha256"`
		} `json:"bundles"`
	}
	if err := c.Do(ctx, c.HTTP, http.MethodGet, "/api/v1/clusters/"+cluster+"/bundles", "", nil, http.StatusOK, &have); err != nil {
		return "", err
	}
	for _, b := range have.Bundles {
		if b.SHA256 == sum {
			fmt.Fprintf(errw, "offline bundle %s (sha256 %s): the server has it\n", path, sum)
			return sum, nil
		}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	start := time.Now()
	fmt.Fprintf(errw, "offline bundle %s (sha256 %s, %d MiB): uploading\n", path, sum, size>>20)
	var up struct {
		SHA256 string `json:"sha256"`
	}
	head := make([]byte, 4)
	_, _ = f.ReadAt(head, 0)
	if err := c.Do(ctx, c.Streaming(), http.MethodPost, "/api/v1/clusters/"+cluster+"/bundles?sha256="+sum, tarz.MediaType(head), f, http.StatusCreated, &up); err != nil {
		return "", err
	}
	if up.SHA256 != sum {
		return "", fmt.Errorf("offline bundle %s: the server stored sha256 %s, the file has %s (changed while it was sent?)", path, up.SHA256, sum)
	}
	fmt.Fprintf(errw, "offline bundle uploaded, verified and unpacked on the server in %s\n", time.Since(start).Round(time.Millisecond))
	return sum, nil
}

// FollowJob shows the job's events as they come until it ends: the
// engine's through sink, the service's own (a worker took the job, it was
// interrupted and resumed) as lines on errw. A dropped connection is
// picked up where it broke (Last-Event-ID). The error says how the job
// ended, with the exit status kubexm play would have.
func (c *Client) FollowJob(ctx context.Context, id string, sink model.Sink, errw io.Writer) error {
	j, err := c.FollowEvents(ctx, id, func(data []byte) { ShowEvent(data, sink, errw) }, errw)
	if err != nil {
		return err
	}
	return JobResult(j)
}

// FollowEvents hands each stored event of the job (as the stream sends
// it) to show until the job ends, and returns the job as it ended.
func (c *Client) FollowEvents(ctx context.Context, id string, show func([]byte), errw io.Writer) (jobstore.Job, error) {
	var last int64
	hc := c.Streaming()
	for failures := 0; ; {
		j, ended, err := c.streamOnce(ctx, hc, id, &last, show)
		switch {
		case ended && err == nil:
			return j, nil
		case ctx.Err() != nil:
			return j, &lifecycle.ExitError{Err: fmt.Errorf("stopped following; job %s goes on on the server (kubexm get job %s --server %s)", id, id, c.Base.String()), Code: 130}
		case failures == 5:
			return j, fmt.Errorf("event stream of job %s: %w (kubexm get job %s --server %s shows it)", id, err, id, c.Base.String())
		}
		failures++
		fmt.Fprintf(errw, "event stream of job %s broke (%v); following on from event %d\n", id, err, last)
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(failures) * time.Second):
		}
	}
}

func JobResult(j jobstore.Job) error {
	switch j.Status {
	case jobstore.Succeeded:
		return nil
	case jobstore.Cancelled:
		return &lifecycle.ExitError{Err: fmt.Errorf("job %s was cancelled", j.ID), Code: 130}
	}
	return &lifecycle.ExitError{Err: fmt.Errorf("job %s %s: %s", j.ID, j.Status, j.Error), Code: 2}
}

// streamOnce reads one connection of the job's event stream; ended says
// whether the stream's end (with the job) came.
func (c *Client) streamOnce(ctx context.Context, hc *http.Client, id string, last *int64, show func([]byte)) (jobstore.Job, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base.JoinPath("/api/v1/jobs", id, "events", "stream").String(), nil)
	if err != nil {
		return jobstore.Job{}, false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if *last > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(*last, 10))
	}
	resp, err := hc.Do(req)
	if err != nil {
		return jobstore.Job{}, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return jobstore.Job{}, false, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	var kind, data string
	var evID int64
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			evID, _ = strconv.ParseInt(strings.TrimPrefix(line, "id: "), 10, 64)
		case strings.HasPrefix(line, "event: "):
			kind = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		case line == "" && kind == "end":
			var j jobstore.Job
			if err := json.Unmarshal([]byte(data), &j); err != nil {
				return j, false, fmt.Errorf("the stream's end: %w", err)
			}
			return j, true, nil
		case line == "" && kind != "":
			show([]byte(data))
			*last = evID
			kind, data = "", ""
		}
	}
	if err := sc.Err(); err != nil {
		return jobstore.Job{}, false, err
	}
	return jobstore.Job{}, false, io.ErrUnexpectedEOF
}

// ShowEvent shows one stored event: an engine event through sink, one of
// the service's own as a line.
func ShowEvent(data []byte, sink model.Sink, errw io.Writer) {
	stored, ok := ServiceEvent(data, errw)
	if !ok {
		return
	}
	var e model.Event
	if err := json.Unmarshal(stored.Data, &e); err != nil {
		fmt.Fprintf(errw, "event %d does not decode: %v\n", stored.ID, err)
		return
	}
	sink.Emit(e)
}

// ServiceEvent decodes a stored event and shows it on errw when it is one
// of the service's own (a worker took the job, ...); ok says it is the
// run's, for the caller to show.
func ServiceEvent(data []byte, errw io.Writer) (jobstore.Event, bool) {
	var stored jobstore.Event
	if err := json.Unmarshal(data, &stored); err != nil {
		fmt.Fprintf(errw, "an event that does not decode: %v\n", err)
		return stored, false
	}
	if strings.HasPrefix(stored.Kind, "job_") {
		var svc struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(stored.Data, &svc)
		line := strings.ReplaceAll(stored.Kind, "_", " ") + ":"
		if stored.Kind == "job_end" {
			line += " " + stored.Status
		}
		if svc.Message != "" {
			line += " " + svc.Message
		}
		fmt.Fprintln(errw, line)
		return stored, false
	}
	return stored, true
}

// Download writes the answer of GET path to the file to, through a
// temporary file beside it that is renamed only when its size and sha256
// are the ones the server sent (Content-Length, X-Kubexm-Sha256).
func (c *Client) Download(ctx context.Context, path, to string) (int64, string, error) {
	resp, err := c.Send(ctx, c.Streaming(), http.MethodGet, path, "", nil, http.StatusOK)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	want := strings.ToLower(resp.Header.Get("X-Kubexm-Sha256"))
	if len(want) != 64 {
		return 0, "", fmt.Errorf("kubexm server %s: GET %s: the answer carries no sha256 (X-Kubexm-Sha256) to check the download against", c.Base.Redacted(), path)
	}
	tmp, err := os.CreateTemp(filepath.Dir(to), "."+filepath.Base(to)+".part-*")
	if err != nil {
		return 0, "", err
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return 0, "", err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), resp.Body)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, "", fmt.Errorf("download %s: %w", path, err)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return n, "", fmt.Errorf("download %s: %d bytes received of %d; nothing was written", path, n, resp.ContentLength)
	}
	got := hex.EncodeToString(h.Sum(nil))
	if got != want {
		return n, "", fmt.Errorf("download %s: sha256 %s, the server says %s; nothing was written", path, got, want)
	}
	// Link rather than rename: an existing file is never replaced.
	if err := os.Link(tmp.Name(), to); err != nil {
		return n, "", err
	}
	return n, got, nil
}

// Queue registers the cluster file config (a new config version), uploads
// the offline bundle at bundlePath (if any) unless the server has it, and
// queues playbook with opts; it returns the job's id. Its progress is
// told on errw.
func (c *Client) Queue(ctx context.Context, config []byte, playbook string, opts jobstore.Options, bundlePath string, errw io.Writer) (string, error) {
	var cv jobstore.ClusterVersion
	if err := c.Do(ctx, c.HTTP, http.MethodPost, "/api/v1/clusters", "application/yaml", bytes.NewReader(config), http.StatusCreated, &cv); err != nil {
		return "", err
	}
	if bundlePath != "" {
		var err error
		if opts.OfflineBundle, err = c.EnsureBundle(ctx, cv.Cluster, bundlePath, errw); err != nil {
			return "", err
		}
	}
	req, err := json.Marshal(map[string]any{"cluster": cv.Cluster, "playbook": playbook, "config_version": cv.Version, "options": opts})
	if err != nil {
		return "", err
	}
	var acc struct {
		JobID string `json:"job_id"`
	}
	if err := c.Do(ctx, c.HTTP, http.MethodPost, "/api/v1/jobs", "application/json", bytes.NewReader(req), http.StatusAccepted, &acc); err != nil {
		return "", err
	}
	fmt.Fprintf(errw, "kubexm server %s: job %s runs %s on cluster %s (config version %d)\n", c.Base.Host, acc.JobID, playbook, cv.Cluster, cv.Version)
	return acc.JobID, nil
}

// ErrNoReport says a job wrote no certificate report.
var ErrNoReport = errors.New("the job wrote none")

// CertsReport is the certificate report job id (a certs-check run) left
// in its cluster's work directory on the server. One job runs on a
// cluster at a time, so the report is this job's unless it was written
// before the job started (a playbook of the server's that writes it
// elsewhere): then the error is ErrNoReport.
func (c *Client) CertsReport(ctx context.Context, id string) ([]byte, error) {
	var j jobstore.Job
	if err := c.Get(ctx, "/api/v1/jobs/"+url.PathEscape(id), nil, &j); err != nil {
		return nil, err
	}
	path := "/api/v1/clusters/" + url.PathEscape(j.Cluster) + "/certs-report"
	resp, err := c.Send(ctx, c.HTTP, http.MethodGet, path, "", nil, http.StatusOK)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("kubexm server %s: %s: %w", c.Base.Redacted(), path, err)
	}
	written, err := time.Parse(time.RFC3339Nano, resp.Header.Get("X-Kubexm-Report-Time"))
	if err != nil || (!j.StartedAt.IsZero() && written.Before(j.StartedAt.Add(-time.Minute))) {
		return nil, fmt.Errorf("kubexm server %s: the certificate report of cluster %s was written %s, before job %s started (%s): %w",
			c.Base.Redacted(), j.Cluster, resp.Header.Get("X-Kubexm-Report-Time"), id, j.StartedAt.Format(time.RFC3339), ErrNoReport)
	}
	return data, nil
}

// QueueRun registers the cluster file of req on the server (a new config
// version), uploads its offline bundle unless the server has it, and
// queues playbook with the options a job carries (tags, skip-tags, limit,
// check, diff, -e, the backup's name, and what more sets); it returns the
// job's id.
func (c *Client) QueueRun(ctx context.Context, playbook string, req lifecycle.Request, errw io.Writer, more ...func(*jobstore.Options)) (string, error) {
	extra, err := ExtraVars(req.ExtraVars)
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(req.Inventory)
	if err != nil {
		return "", err
	}
	opts := jobstore.Options{Tags: req.Tags, SkipTags: req.SkipTags, Limit: req.Limit, Check: req.Check, Diff: req.Diff, ExtraVars: extra, Backup: req.Backup}
	for _, m := range more {
		m(&opts)
	}
	return c.Queue(ctx, data, playbook, opts, req.OfflineBundle, errw)
}

// CheckJobFlags refuses what a job of playbook on server cannot carry: the flags
// given (changed says which) that name files or state on this machine or
// tune the engine of the run itself, and a --backup naming a file here
// rather than a backup the server made.
func CheckJobFlags(playbook, server string, req lifecycle.Request, changed func(flag string) bool) error {
	for _, name := range []string{"start-at-task", "forks", "resume", "roles-path", "overlay", "workdir", "no-journal", "backup"} {
		if (name == "backup" && playbook == "restore") || (name == "forks" && playbook == jobstore.CommandPlaybook) {
			continue // carried by the job
		}
		if changed(name) {
			return fmt.Errorf("--%s does not go to a kubexm server (a job carries --tags, --skip-tags, --limit, --check, --diff, -e and --offline-bundle); run without --server to use it", name)
		}
	}
	if strings.ContainsRune(req.Backup, '/') {
		return fmt.Errorf("--backup %s: with --server it names a backup the server made (kubexm backup list --server %s --cluster NAME), not a file here", req.Backup, server)
	}
	return nil
}
