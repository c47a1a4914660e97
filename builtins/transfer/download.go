package transfer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/mensylisir/kubexm/builtins/controlfs"
	"github.com/mensylisir/kubexm/builtins/onhost"
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
		Summary: "Fetch a file from a URL (or mirrors) or a local path into the work directory on the control machine, check its sha256, optionally unpack it.",
		Doc: "Runs on the control machine. A relative `dest` is under the cluster's work directory, typically " +
			"`<component>/<version>/<arch>/` as in the work-dir layout; a dest ending in `/` receives the URL's file name. " +
			"A sha256 is required for URLs: `sha256`, or else `checksums`, checksums files read in order (URLs, following " +
			"redirects, or control-machine paths) of which the first that names the file gives its sum, as Ansible's " +
			"get_url takes `checksum: sha256:<url>`. A checksums file is either in sha256sum format (lines " +
			"`<sha256>  [*][dir/]<file>`) or holds nothing but the file's 64-hex digest (as dl.k8s.io's `<file>.sha256`); " +
			"the name looked up is the base name of `src` or of the first URL. A file already there with that sum is not " +
			"fetched again (ok, unchanged; the control machine's sums are recorded with the file's stat, so this reads no " +
			"large file). Each mirror in `urls` is tried in order, each with `retries` attempts and a doubling pause; an " +
			"interrupted transfer resumes from `<dest>.part` with an HTTP Range request; a file is renamed into place only " +
			"once its sum is right. When every mirror fails, the error lists each URL with its failure. Hosts running the " +
			"task at once share one download (a lock on dest's directory).\n\n" +
			"With `extract`, the file is a tar archive (plain, gzip or bzip2) unpacked into dest's directory under the same " +
			"lock when `creates` is missing there or the archive was fetched in this run: each regular file at the " +
			"archive's top level after `strip_components` is written beside it and renamed into place, so a reader never " +
			"sees half a file (directories, links and deeper files are left out). In check mode nothing is written; the " +
			"checksums files are read (they change nothing) and the result says what would be fetched or unpacked.",
		Control: true,
		Args: []step.Arg{
			{Name: "url", Type: step.String, Doc: "URL to fetch (http or https)."},
			{Name: "urls", Type: step.List, Doc: "Mirrors tried in order; use instead of url."},
			{Name: "src", Type: step.String, Doc: "A file on the control machine to copy instead of a URL."},
			{Name: "dest", Type: step.String, Required: true, Doc: "File (or directory ending in /) under the work directory, or an absolute path."},
			{Name: "sha256", Type: step.String, Aliases: []string{"checksum"}, Doc: "Expected sha256 (hex); required for URLs unless checksums gives it. When given, checksums is not read."},
			{Name: "checksums", Type: step.List, Doc: "Checksums files (http(s) URLs or control-machine paths) read in order when sha256 is empty; the first that lists the file gives its sum."},
			{Name: "extract", Type: step.Bool, Default: false, Doc: "Unpack the tar archive into dest's directory (needs creates)."},
			{Name: "strip_components", Type: step.Int, Default: 0, Doc: "Leading path components dropped from the archive's members when unpacking."},
			{Name: "creates", Type: step.String, Doc: "With extract: a file the archive holds, relative to dest's directory; present means unpacked."},
			{Name: "hint", Type: step.String, Doc: "Added to the error when src, the checksums files or the file's entry in them are not found: what to give instead."},
			{Name: "mode", Type: step.Mode, Default: "0644", Doc: "Mode of the file."},
			{Name: "retries", Type: step.Int, Default: 3, Doc: "Attempts per URL."},
			{Name: "timeout", Type: step.Duration, Default: "30m", Doc: "Limit for one attempt."},
		},
		Examples: []string{"download:\n  urls:\n    - https://github.com/etcd-io/etcd/releases/download/v{{ .etcd_version }}/etcd-v{{ .etcd_version }}-linux-{{ .arch }}.tar.gz\n" +
			"    - \"{{ .mirror }}/etcd/v{{ .etcd_version }}/etcd-v{{ .etcd_version }}-linux-{{ .arch }}.tar.gz\"\n  dest: etcd/{{ .etcd_version }}/{{ .arch }}/\n  sha256: \"{{ index .etcd_sha256 .arch }}\"",
			"download:\n  urls:\n    - https://dl.k8s.io/release/{{ .kube_version }}/bin/linux/{{ .arch }}/kubelet\n" +
				"  checksums:\n    - https://dl.k8s.io/release/{{ .kube_version }}/bin/linux/{{ .arch }}/kubelet.sha256\n  dest: kubernetes/{{ .kube_version }}/{{ .arch }}/",
			"download:\n  src: /srv/mirror/etcd-v{{ .etcd_version }}-linux-{{ .arch }}.tar.gz\n  checksums:\n    - /srv/mirror/SHA256SUMS\n" +
				"  dest: etcd/{{ .etcd_version }}/{{ .arch }}/\n  extract: true\n  strip_components: 1\n  creates: etcd"},
	}
}

func (d downloadBuiltin) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	var urls []string
	if args.Has("url") {
		urls = append(urls, args.String("url"))
	}
	urls = append(urls, NonEmpty(args.Strings("urls"))...)
	src := args.String("src")
	hint := strings.TrimSpace(args.String("hint"))
	if (len(urls) == 0) == (src == "") {
		return step.Result{}, onhost.Missing(hint, "download: give url/urls or src (one of them)")
	}
	want := strings.ToLower(strings.TrimSpace(args.String("sha256")))
	sums := NonEmpty(args.Strings("checksums"))
	if len(urls) > 0 && want == "" && len(sums) == 0 {
		return step.Result{}, onhost.Missing(hint, "download: sha256 or checksums is required for URLs (the file's hex sha256, so a tampered or truncated download is caught)")
	}
	if want != "" {
		if !transport.IsSHA256Hex(want) {
			return step.Result{}, fmt.Errorf("download: sha256 %q is not 64 hex digits", want)
		}
	}
	for _, u := range urls {
		if !IsHTTPURL(u) {
			return step.Result{}, fmt.Errorf("download: %q is not an http(s) URL", u)
		}
	}
	extract, creates := args.Bool("extract"), args.String("creates")
	strip := args.Int("strip_components")
	if extract && creates == "" {
		return step.Result{}, fmt.Errorf("download: extract needs creates (a file the archive holds, relative to dest's directory), which tells that it is unpacked")
	}
	if strip < 0 {
		return step.Result{}, fmt.Errorf("download: strip_components must not be negative")
	}
	base := filepath.Base(src)
	if len(urls) > 0 {
		pu, _ := url.Parse(urls[0])
		base = path.Base(pu.Path)
	}
	dest, err := controlfs.ResolveDest(env, args.String("dest"), base)
	if err != nil {
		return step.Result{}, err
	}
	mode := args.Mode("mode")
	retries := max(args.Int("retries"), 1)
	timeout := args.Duration("timeout")
	data := map[string]any{"dest": dest}
	if want == "" && len(sums) > 0 {
		// Read also in check mode: it changes nothing, and a sum that
		// cannot be found fails the real run too.
		if want, err = d.sumFromChecksums(ctx, env, sums, base, retries, hint); err != nil {
			return step.Result{}, err
		}
	}
	if src != "" && want == "" {
		if want, err = env.Control.Sha256(ctx, src, false); err != nil {
			return step.Result{}, fmt.Errorf("download: src: %w", err)
		}
		if want == "" {
			return step.Result{}, onhost.Missing(hint, "download: src %s does not exist on the control machine", src)
		}
	}
	data["sha256"] = want
	if creates != "" && !filepath.IsAbs(creates) {
		creates = filepath.Join(filepath.Dir(dest), creates)
	}
	// done tells whether dest has the sum and, with extract, is unpacked.
	// The control machine's sums are kept with the file's stat: a re-run
	// reads a file only when it changed.
	done := func() (have bool, unpacked bool, err error) {
		sum, err := env.Control.Sha256(ctx, dest, false)
		if err != nil || sum != want {
			return false, false, err
		}
		if !extract {
			return true, true, nil
		}
		_, err = os.Stat(creates)
		if errors.Is(err, fs.ErrNotExist) {
			return true, false, nil
		}
		return true, err == nil, err
	}
	have, unpacked, err := done()
	if err != nil {
		return step.Result{}, fmt.Errorf("download: %w", err)
	}
	if have && unpacked {
		return step.Result{Data: data}, nil
	}
	if env.Check {
		if have {
			return step.Result{Changed: true, Msg: "would extract " + dest + " into " + filepath.Dir(dest), Data: data}, nil
		}
		if _, err := os.Stat(src); src != "" && errors.Is(err, fs.ErrNotExist) {
			return step.Result{}, onhost.Missing(hint, "download: src %s does not exist on the control machine", src)
		}
		msg := "would download " + dest
		if extract {
			msg += " and extract it"
		}
		return step.Result{Changed: true, Msg: msg, Data: data}, nil
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return step.Result{}, fmt.Errorf("download: %w", err)
	}
	unlock, err := flock.Lock(ctx, filepath.Dir(dest))
	if err != nil {
		return step.Result{}, err
	}
	defer unlock()
	// Another host's run may have finished the work while we waited.
	if have, unpacked, err = done(); err != nil {
		return step.Result{}, fmt.Errorf("download: %w", err)
	}
	if have && unpacked {
		return step.Result{Data: data}, nil
	}
	var msg string
	if !have {
		if msg, err = d.fetchAny(ctx, env, urls, src, dest, want, mode, retries, timeout, hint, data); err != nil {
			return step.Result{}, err
		}
	}
	if extract {
		// A file fetched now is unpacked again even where creates exists:
		// what is beside it came from another archive.
		n, err := extractTop(ctx, dest, filepath.Dir(dest), strip)
		if err != nil {
			return step.Result{}, fmt.Errorf("download: extract %s: %w", dest, err)
		}
		if _, err := os.Stat(creates); err != nil {
			return step.Result{}, fmt.Errorf("download: extracted %d files of %s (strip_components=%d), but not %s: check creates and strip_components", n, dest, strip, creates)
		}
		msg = strings.TrimPrefix(msg+"; ", "; ") + fmt.Sprintf("extracted %d files into %s", n, filepath.Dir(dest))
		data["extracted"] = n
	}
	return step.Result{Changed: true, Msg: msg, Data: data}, nil
}

// fetchAny copies src, or fetches the first URL that serves the file with
// the sum want, to dest.
func (d downloadBuiltin) fetchAny(ctx context.Context, env *step.Env, urls []string, src, dest, want string, mode os.FileMode, retries int, timeout time.Duration, hint string, data map[string]any) (string, error) {
	if src != "" {
		if err := copyLocal(src, dest, want, mode); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return "", onhost.Missing(hint, "download: src %s does not exist on the control machine", src)
			}
			return "", fmt.Errorf("download: %w", err)
		}
		return "copied " + src + " to " + dest, nil
	}
	var failures []string
	for _, u := range urls {
		for attempt := 1; attempt <= retries; attempt++ {
			err := d.fetch(ctx, env, u, dest, want, mode, timeout)
			if err == nil {
				data["url"] = u
				return "downloaded " + u, nil
			}
			if ctx.Err() != nil {
				return "", fmt.Errorf("download %s: %w", u, ctx.Err())
			}
			onhost.Logf(env, "download %s (attempt %d/%d): %v", u, attempt, retries, err)
			if attempt == retries {
				failures = append(failures, fmt.Sprintf("%s: %v", u, err))
				break
			}
			if err := onhost.Sleep(ctx, d.backoff<<(attempt-1)); err != nil {
				return "", err
			}
		}
	}
	return "", fmt.Errorf("download to %s failed from every URL:\n  %s", dest, strings.Join(failures, "\n  "))
}

func IsHTTPURL(u string) bool {
	pu, err := url.Parse(u)
	return err == nil && (pu.Scheme == "http" || pu.Scheme == "https") && pu.Host != ""
}

// nonEmpty drops empty entries: a templated list item that rendered to ""
// names nothing.
func NonEmpty(l []string) []string {
	out := l[:0:0]
	for _, s := range l {
		if strings.TrimSpace(s) != "" {
			out = append(out, s)
		}
	}
	return out
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
		onhost.Logf(env, "download %s: resuming at %d bytes", u, offset)
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
	pw := NewProgress(env, u, offset, total)
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

// Progress logs a line every 5 seconds of a transfer.
type Progress struct {
	env         *step.Env
	url         string
	done, total int64
	last        time.Time
}

// NewProgress counts a transfer of url to env's log, offset bytes already
// there of total (-1: unknown).
func NewProgress(env *step.Env, url string, offset, total int64) *Progress {
	return &Progress{env: env, url: url, done: offset, total: total, last: time.Now()}
}

func (p *Progress) Write(b []byte) (int, error) {
	p.done += int64(len(b))
	if time.Since(p.last) >= 5*time.Second {
		p.last = time.Now()
		if p.total > 0 {
			onhost.Logf(p.env, "download %s: %d%% (%d/%d MiB)", p.url, p.done*100/p.total, p.done>>20, p.total>>20)
		} else {
			onhost.Logf(p.env, "download %s: %d MiB", p.url, p.done>>20)
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
