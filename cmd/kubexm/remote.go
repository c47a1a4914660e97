package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/mensylisir/kubexm/engine/model"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mensylisir/kubexm/engine"
	"github.com/mensylisir/kubexm/engine/output"
	"github.com/mensylisir/kubexm/lifecycle"
	"github.com/mensylisir/kubexm/service/jobstore"
)

// A verb given --server URL runs on a kubexm server instead of this
// machine: the cluster file is registered there (a new config version),
// the offline bundle uploaded unless the server has it, the playbook
// queued as a job with the verb's options, and the job's events followed
// here and shown as a local run shows them.

// addRemoteFlags adds --server and how to reach it to a verb. Unlike
// kubexm get jobs, a verb does not read $KUBEXM_SERVER: a variable left in
// a shell must not move a create or a delete to another machine.
func addRemoteFlags(fl *pflag.FlagSet, f *clientFlags) {
	addServerFlags(fl, f, "run on this kubexm server (URL) as a job instead of on this machine, and follow its events here (docs/server.md)", "an operator's")
}

// addServerFlags adds --server, --token, --ca and
// --insecure-skip-tls-verify; serverHelp says what --server does to the
// verb, tokenRole which token it needs.
func addServerFlags(fl *pflag.FlagSet, f *clientFlags, serverHelp, tokenRole string) {
	fl.StringVar(&f.server, "server", "", serverHelp)
	fl.StringVar(&f.token, "token", "", "API token for --server: "+tokenRole+" (default $KUBEXM_TOKEN)")
	fl.StringVar(&f.ca, "ca", "", "CA certificate to trust --server with (its self-signed DATA-DIR/tls/cert.pem)")
	fl.BoolVar(&f.insecure, "insecure-skip-tls-verify", false, "do not check --server's certificate")
}

// refuseLocalFlags refuses the flags of names that were given: with
// --server they would name this machine's files or tune a run here.
func refuseLocalFlags(cmd *cobra.Command, names ...string) error {
	for _, name := range names {
		if fl := cmd.Flags().Lookup(name); fl != nil && fl.Changed {
			return fmt.Errorf("--%s does not go to a kubexm server (it names this machine's files or tunes a run here); run without --server to use it", name)
		}
	}
	return nil
}

// localOnlyFlags are run flags a job cannot carry: they name files or
// state on this machine, or tune the engine of the run itself.
var localOnlyFlags = []string{"start-at-task", "forks", "resume", "roles-path", "overlay", "workdir", "no-journal", "backup"}

// do sends a request (path may end in ?query) and decodes an answer of
// status want into v.
func (c *apiClient) do(ctx context.Context, hc *http.Client, method, path, ctype string, body io.Reader, want int, v any) error {
	resp, err := c.send(ctx, hc, method, path, ctype, body, want)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("kubexm server %s: %s %s: %w", c.base.Redacted(), method, resp.Request.URL.Path, err)
	}
	if v != nil {
		return json.Unmarshal(data, v)
	}
	return nil
}

// send sends a request and returns the answer of status want, its body
// still to be read (and closed); any other answer is an error with the
// server's message and a hint.
func (c *apiClient) send(ctx context.Context, hc *http.Client, method, path, ctype string, body io.Reader, want int) (*http.Response, error) {
	p, query, _ := strings.Cut(path, "?")
	u := c.base.JoinPath(p)
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
func (c *apiClient) unreachable(err error) error {
	return fmt.Errorf("kubexm server %s: %w (is kubexm server running there? check --server, and --ca or --insecure-skip-tls-verify for its certificate)", c.base.Redacted(), err)
}

// statusError is the error of an answer that is not the one wanted: the
// server's message, the status and a hint of what to do about it.
func (c *apiClient) statusError(method, path string, code int, body []byte) error {
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
		hint = fmt.Sprintf("; kubexm bundle list --server %s --cluster %s lists its bundles", c.base.Redacted(), cluster)
	case code == http.StatusNotFound && strings.HasPrefix(path, "/api/v1/clusters/"):
		hint = fmt.Sprintf("; kubexm get clusters --server %s lists the registered clusters (a verb with -f cluster.yaml --server registers one)", c.base.Redacted())
	case code == http.StatusConflict && e.JobID != "":
		hint = fmt.Sprintf("; kubexm get job %s --server %s shows the job", e.JobID, c.base.Redacted())
	}
	return fmt.Errorf("kubexm server %s: %s %s: %s%s", c.base.Redacted(), method, path, msg, hint)
}

// streaming is the client for uploads and event streams, which may take
// longer than any fixed timeout.
func (c *apiClient) streaming() *http.Client {
	return &http.Client{Transport: c.http.Transport}
}

// playRemote runs playbook with f on the server of cf, as a job.
func playRemote(cmd *cobra.Command, playbook string, f playFlags, cf clientFlags) error {
	c, id, err := queueRemote(cmd, playbook, f, cf)
	if err != nil {
		return err
	}
	if f.Output == "json" {
		return c.followJob(cmd.Context(), id, output.NewJSON(cmd.OutOrStdout()), cmd.ErrOrStderr())
	}
	sink, stop := textSink(cmd.OutOrStdout(), f.Verbose)
	defer stop()
	return c.followJob(cmd.Context(), id, sink, cmd.ErrOrStderr())
}

// queueRemote registers the cluster file of f on the server of cf (a new
// config version), uploads its offline bundle unless the server has it,
// and queues playbook with f's options; it returns the client and the
// job's id. A restore's --backup names a backup on the server.
func queueRemote(cmd *cobra.Command, playbook string, f playFlags, cf clientFlags, more ...func(*jobstore.Options)) (*apiClient, string, error) {
	ctx := cmd.Context()
	for _, name := range localOnlyFlags {
		if (name == "backup" && playbook == "restore") || (name == "forks" && playbook == jobstore.CommandPlaybook) {
			continue // carried by the job
		}
		if fl := cmd.Flags().Lookup(name); fl != nil && fl.Changed {
			return nil, "", fmt.Errorf("--%s does not go to a kubexm server (a job carries --tags, --skip-tags, --limit, --check, --diff, -e and --offline-bundle); run without --server to use it", name)
		}
	}
	if strings.ContainsRune(f.Backup, '/') {
		return nil, "", fmt.Errorf("--backup %s: with --server it names a backup the server made (kubexm backup list --server %s --cluster NAME), not a file here", f.Backup, cf.server)
	}
	cf.output = f.Output
	c, err := newAPIClient(&cf)
	if err != nil {
		return nil, "", err
	}
	extra, err := remoteExtraVars(f.ExtraVars)
	if err != nil {
		return nil, "", err
	}
	data, err := os.ReadFile(f.Inventory)
	if err != nil {
		return nil, "", err
	}
	errw := cmd.ErrOrStderr()
	var cv jobstore.ClusterVersion
	if err := c.do(ctx, c.http, http.MethodPost, "/api/v1/clusters", "application/yaml", bytes.NewReader(data), http.StatusCreated, &cv); err != nil {
		return nil, "", err
	}
	opts := jobstore.Options{Tags: f.Tags, SkipTags: f.SkipTags, Limit: f.Limit, Check: f.Check, Diff: f.Diff, ExtraVars: extra, Backup: f.Backup}
	for _, m := range more {
		m(&opts)
	}
	if f.OfflineBundle != "" {
		if opts.OfflineBundle, err = c.ensureBundle(ctx, cv.Cluster, f.OfflineBundle, errw); err != nil {
			return nil, "", err
		}
	}
	req, err := json.Marshal(map[string]any{"cluster": cv.Cluster, "playbook": playbook, "config_version": cv.Version, "options": opts})
	if err != nil {
		return nil, "", err
	}
	var acc struct {
		JobID string `json:"job_id"`
	}
	if err := c.do(ctx, c.http, http.MethodPost, "/api/v1/jobs", "application/json", bytes.NewReader(req), http.StatusAccepted, &acc); err != nil {
		return nil, "", err
	}
	fmt.Fprintf(errw, "kubexm server %s: job %s runs %s on cluster %s (config version %d)\n", c.base.Host, acc.JobID, playbook, cv.Cluster, cv.Version)
	return c, acc.JobID, nil
}

// remoteExtraVars are the -e values as a job carries them: an @file is
// read here (the server refuses to read files for a client), so the whole
// set is sent as one mapping then.
func remoteExtraVars(vars []string) ([]string, error) {
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

// ensureBundle makes sure the server has the bundle at path for cluster,
// uploading it unless a bundle of the same sha256 is there, and returns
// its sha256.
func (c *apiClient) ensureBundle(ctx context.Context, cluster, path string, errw io.Writer) (string, error) {
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
	if err := c.do(ctx, c.http, http.MethodGet, "/api/v1/clusters/"+cluster+"/bundles", "", nil, http.StatusOK, &have); err != nil {
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
	if err := c.do(ctx, c.streaming(), http.MethodPost, "/api/v1/clusters/"+cluster+"/bundles?sha256="+sum, "application/gzip", f, http.StatusCreated, &up); err != nil {
		return "", err
	}
	if up.SHA256 != sum {
		return "", fmt.Errorf("offline bundle %s: the server stored sha256 %s, the file has %s (changed while it was sent?)", path, up.SHA256, sum)
	}
	fmt.Fprintf(errw, "offline bundle uploaded, verified and unpacked on the server in %s\n", time.Since(start).Round(time.Millisecond))
	return sum, nil
}

// followJob shows the job's events as they come until it ends: the
// engine's through sink, the service's own (a worker took the job, it was
// interrupted and resumed) as lines on errw. A dropped connection is
// picked up where it broke (Last-Event-ID). The error says how the job
// ended, with the exit status kubexm play would have.
func (c *apiClient) followJob(ctx context.Context, id string, sink model.Sink, errw io.Writer) error {
	j, err := c.followEvents(ctx, id, func(data []byte) { showEvent(data, sink, errw) }, errw)
	if err != nil {
		return err
	}
	return jobResult(j)
}

// followEvents hands each stored event of the job (as the stream sends
// it) to show until the job ends, and returns the job as it ended.
func (c *apiClient) followEvents(ctx context.Context, id string, show func([]byte), errw io.Writer) (jobstore.Job, error) {
	var last int64
	hc := c.streaming()
	for failures := 0; ; {
		j, ended, err := c.streamOnce(ctx, hc, id, &last, show)
		switch {
		case ended && err == nil:
			return j, nil
		case ctx.Err() != nil:
			return j, &lifecycle.ExitError{Err: fmt.Errorf("stopped following; job %s goes on on the server (kubexm get job %s --server %s)", id, id, c.base.String()), Code: 130}
		case failures == 5:
			return j, fmt.Errorf("event stream of job %s: %w (kubexm get job %s --server %s shows it)", id, err, id, c.base.String())
		}
		failures++
		fmt.Fprintf(errw, "event stream of job %s broke (%v); following on from event %d\n", id, err, last)
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(failures) * time.Second):
		}
	}
}

func jobResult(j jobstore.Job) error {
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
func (c *apiClient) streamOnce(ctx context.Context, hc *http.Client, id string, last *int64, show func([]byte)) (jobstore.Job, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base.JoinPath("/api/v1/jobs", id, "events", "stream").String(), nil)
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

// showEvent shows one stored event: an engine event through sink, one of
// the service's own as a line.
func showEvent(data []byte, sink model.Sink, errw io.Writer) {
	stored, ok := serviceEvent(data, errw)
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

// serviceEvent decodes a stored event and shows it on errw when it is one
// of the service's own (a worker took the job, ...); ok says it is the
// run's, for the caller to show.
func serviceEvent(data []byte, errw io.Writer) (jobstore.Event, bool) {
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
