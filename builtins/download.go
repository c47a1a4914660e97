package builtins

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/internal/flock"
)

// downloadBuiltin works on the control machine's file system directly: it
// appends to a .part file to resume, which the Transport interface (whole
// file writes) cannot express, and a Control builtin always runs locally.
type downloadBuiltin struct {
	// backoff is the first wait between attempts; it doubles each time.
	backoff time.Duration
	client  *http.Client
}

func newDownload() downloadBuiltin {
	return downloadBuiltin{backoff: time.Second, client: &http.Client{}}
}

func (downloadBuiltin) Spec() step.Spec {
	return step.Spec{
		Name:    "download",
		Summary: "Fetch a file from a URL (or mirrors) or a local path into the work directory on the control machine.",
		Doc: "Runs on the control machine. A relative `dest` is under the cluster's work directory, typically " +
			"`<component>/<version>/<arch>/` as in the work-dir layout; a dest ending in `/` receives the URL's file name. " +
			"`sha256` is required for URLs: a file already there with that sum is not fetched again (ok, unchanged). " +
			"Each mirror in `urls` is tried in order, each with `retries` attempts and a doubling pause; an interrupted " +
			"transfer resumes from `<dest>.part` with an HTTP Range request. When every mirror fails, the error lists " +
			"each URL with its failure. Hosts running the task at once share one download (a lock on dest's directory).",
		Control: true,
		Args: []step.Arg{
			{Name: "url", Type: step.String, Doc: "URL to fetch (http or https)."},
			{Name: "urls", Type: step.List, Doc: "Mirrors tried in order; use instead of url."},
			{Name: "src", Type: step.String, Doc: "A file on the control machine to copy instead of a URL."},
			{Name: "dest", Type: step.String, Required: true, Doc: "File (or directory ending in /) under the work directory, or an absolute path."},
			{Name: "sha256", Type: step.String, Aliases: []string{"checksum"}, Doc: "Expected sha256 (hex); required for URLs."},
			{Name: "mode", Type: step.Mode, Default: "0644", Doc: "Mode of the file."},
			{Name: "retries", Type: step.Int, Default: 3, Doc: "Attempts per URL."},
			{Name: "timeout", Type: step.Duration, Default: "30m", Doc: "Limit for one attempt."},
		},
		Examples: []string{"download:\n  urls:\n    - https://github.com/etcd-io/etcd/releases/download/v{{ .etcd_version }}/etcd-v{{ .etcd_version }}-linux-{{ .arch }}.tar.gz\n" +
			"    - \"{{ .mirror }}/etcd/v{{ .etcd_version }}/etcd-v{{ .etcd_version }}-linux-{{ .arch }}.tar.gz\"\n  dest: etcd/{{ .etcd_version }}/{{ .arch }}/\n  sha256: \"{{ index .etcd_sha256 .arch }}\""},
	}
}

func (d downloadBuiltin) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	var urls []string
	if args.Has("url") {
		urls = append(urls, args.String("url"))
	}
	urls = append(urls, args.Strings("urls")...)
	src := args.String("src")
	if (len(urls) == 0) == (src == "") {
		return step.Result{}, fmt.Errorf("download: give url/urls or src (one of them)")
	}
	want := strings.ToLower(strings.TrimSpace(args.String("sha256")))
	if len(urls) > 0 && want == "" {
		return step.Result{}, fmt.Errorf("download: sha256 is required for URLs (the file's hex sha256, so a tampered or truncated download is caught)")
	}
	if want != "" {
		if b, err := hex.DecodeString(want); err != nil || len(b) != sha256.Size {
			return step.Result{}, fmt.Errorf("download: sha256 %q is not 64 hex digits", want)
		}
	}
	for _, u := range urls {
		pu, err := url.Parse(u)
		if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			return step.Result{}, fmt.Errorf("download: %q is not an http(s) URL", u)
		}
	}
	base := filepath.Base(src)
	if len(urls) > 0 {
		pu, _ := url.Parse(urls[0])
		base = path.Base(pu.Path)
	}
	dest, err := resolveDest(env, args.String("dest"), base)
	if err != nil {
		return step.Result{}, err
	}
	mode := args.Mode("mode")
	data := map[string]any{"dest": dest}
	if src != "" && want == "" {
		if want, err = env.Control.Sha256(ctx, src, false); err != nil {
			return step.Result{}, fmt.Errorf("download: src: %w", err)
		}
		if want == "" {
			return step.Result{}, fmt.Errorf("download: src %s does not exist on the control machine", src)
		}
	}
	data["sha256"] = want
	// The control machine's sums are kept with the file's stat: a re-run
	// reads a file only when it changed.
	if have, err := env.Control.Sha256(ctx, dest, false); err != nil {
		return step.Result{}, err
	} else if have == want {
		return step.Result{Data: data}, nil
	}
	if env.Check {
		return step.Result{Changed: true, Msg: "would download " + dest, Data: data}, nil
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return step.Result{}, fmt.Errorf("download: %w", err)
	}
	unlock, err := flock.Lock(ctx, filepath.Dir(dest))
	if err != nil {
		return step.Result{}, err
	}
	defer unlock()
	// Another host's run may have finished the file while we waited.
	if have, err := transport.FileSha256(dest); err != nil {
		return step.Result{}, err
	} else if have == want {
		return step.Result{Data: data}, nil
	}
	if src != "" {
		if err := copyLocal(src, dest, want, mode); err != nil {
			return step.Result{}, fmt.Errorf("download: %w", err)
		}
		return step.Result{Changed: true, Msg: "copied " + src + " to " + dest, Data: data}, nil
	}
	retries := max(args.Int("retries"), 1)
	timeout := args.Duration("timeout")
	var failures []string
	for _, u := range urls {
		for attempt := 1; attempt <= retries; attempt++ {
			err := d.fetch(ctx, env, u, dest, want, mode, timeout)
			if err == nil {
				data["url"] = u
				return step.Result{Changed: true, Msg: "downloaded " + u, Data: data}, nil
			}
			if ctx.Err() != nil {
				return step.Result{}, fmt.Errorf("download %s: %w", u, ctx.Err())
			}
			logf(env, "download %s (attempt %d/%d): %v", u, attempt, retries, err)
			if attempt == retries {
				failures = append(failures, fmt.Sprintf("%s: %v", u, err))
				break
			}
			if err := sleepCtx(ctx, d.backoff<<(attempt-1)); err != nil {
				return step.Result{}, err
			}
		}
	}
	return step.Result{}, fmt.Errorf("download to %s failed from every URL:\n  %s", dest, strings.Join(failures, "\n  "))
}

// resolveDest puts a relative dest under the work directory and appends
// base to a directory.
func resolveDest(env *step.Env, dest, base string) (string, error) {
	if dest == "" {
		return "", fmt.Errorf("download: dest is empty")
	}
	dir := strings.HasSuffix(dest, "/")
	if !filepath.IsAbs(dest) {
		if env.WorkDir == "" {
			return "", fmt.Errorf("download: dest %s is relative and no work directory is set", dest)
		}
		dest = filepath.Join(env.WorkDir, dest)
	}
	if fi, err := os.Stat(dest); dir || (err == nil && fi.IsDir()) {
		if base == "" || base == "/" || base == "." {
			return "", fmt.Errorf("download: dest %s is a directory and the URL names no file; give a file name", dest)
		}
		dest = filepath.Join(dest, base)
	}
	return filepath.Clean(dest), nil
}

// fetch makes one attempt, resuming dest.part when it exists.
func (d downloadBuiltin) fetch(ctx context.Context, env *step.Env, u, dest, want string, mode os.FileMode, timeout time.Duration) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	part := dest + ".part"
	var offset int64
	if fi, err := os.Stat(part); err == nil {
		offset = fi.Size()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	if offset > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", offset))
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	flags := os.O_CREATE | os.O_WRONLY
	switch {
	case resp.StatusCode == http.StatusPartialContent && offset > 0:
		flags |= os.O_APPEND
		logf(env, "download %s: resuming at %d bytes", u, offset)
	case resp.StatusCode == http.StatusOK:
		flags |= os.O_TRUNC
		offset = 0
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		// The .part is complete or not a prefix of this file: start over.
		os.Remove(part)
		return fmt.Errorf("HTTP %s for a resumed request; restarting", resp.Status)
	default:
		return fmt.Errorf("HTTP %s", resp.Status)
	}
	f, err := os.OpenFile(part, flags, 0o644)
	if err != nil {
		return err
	}
	total := resp.ContentLength
	if total >= 0 {
		total += offset
	}
	pw := &progress{env: env, url: u, done: offset, total: total, last: time.Now()}
	_, copyErr := io.Copy(f, io.TeeReader(resp.Body, pw))
	closeErr := f.Close()
	if copyErr != nil {
		return copyErr
	}
	if closeErr != nil {
		return closeErr
	}
	have, err := transport.FileSha256(part)
	if err != nil {
		return err
	}
	if have != want {
		os.Remove(part)
		return fmt.Errorf("sha256 mismatch: got %s, want %s", have, want)
	}
	if err := os.Chmod(part, mode); err != nil {
		return err
	}
	return os.Rename(part, dest)
}

// progress logs a line every 5 seconds of a transfer.
type progress struct {
	env         *step.Env
	url         string
	done, total int64
	last        time.Time
}

func (p *progress) Write(b []byte) (int, error) {
	p.done += int64(len(b))
	if time.Since(p.last) >= 5*time.Second {
		p.last = time.Now()
		if p.total > 0 {
			logf(p.env, "download %s: %d%% (%d/%d MiB)", p.url, p.done*100/p.total, p.done>>20, p.total>>20)
		} else {
			logf(p.env, "download %s: %d MiB", p.url, p.done>>20)
		}
	}
	return len(b), nil
}

func copyLocal(src, dest, want string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dest + ".part"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(out, h), in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		os.Remove(tmp)
		return fmt.Errorf("%s: sha256 mismatch: got %s, want %s", src, got, want)
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return err
	}
	return os.Rename(tmp, dest)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
