package transfer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/mensylisir/kubexm/builtins/onhost"
	"github.com/mensylisir/kubexm/engine/step"
	"github.com/mensylisir/kubexm/engine/transport"
)

// maxChecksumsSize bounds what is read of a checksums file: a real one is a
// few KiB, and a wrong URL must not fill memory.
const maxChecksumsSize = 4 << 20

// checksumsTimeout limits one fetch of a checksums file.
const checksumsTimeout = 2 * time.Minute

// sumFromChecksums reads the checksums files locs in order and returns the
// sha256 the first of them gives for name; later files are not read.
func (d downloadBuiltin) sumFromChecksums(ctx context.Context, env *step.Env, locs []string, name string, retries int, hint string) (string, error) {
	var why []string
	for _, loc := range locs {
		text, err := d.readChecksums(ctx, env, loc, retries)
		if err != nil {
			why = append(why, err.Error())
			continue
		}
		if sum := findSum(text, name); sum != "" {
			return sum, nil
		}
		why = append(why, loc+" does not list it")
	}
	return "", onhost.Missing(hint, "download: no sha256 for %s (%s)", name, strings.Join(why, "; "))
}

// findSum returns the lower-case sha256 that text gives for name: from a
// sha256sum line "<sha256>  [*][dir/]name", or text itself when it is a
// bare digest (dl.k8s.io's <file>.sha256); "" when neither.
func findSum(text, name string) string {
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, " \t\r\n")
		if len(line) < 66 || !transport.IsSHA256Hex(line[:64]) || (line[64] != ' ' && line[64] != '\t') {
			continue
		}
		f := strings.TrimPrefix(strings.TrimLeft(line[64:], " \t"), "*")
		if f == name || (strings.HasSuffix(f, "/"+name) && !strings.ContainsAny(f[:len(f)-len(name)], " \t")) {
			return strings.ToLower(line[:64])
		}
	}
	if t := strings.TrimSpace(text); transport.IsSHA256Hex(t) {
		return strings.ToLower(t)
	}
	return ""
}

// readChecksums returns the text of a checksums file: an http(s) URL
// (redirects followed; a server error or a network failure is tried
// retries times, a 4xx answer once) or a path on the control machine.
// Errors name loc.
func (d downloadBuiltin) readChecksums(ctx context.Context, env *step.Env, loc string, retries int) (string, error) {
	if !IsHTTPURL(loc) {
		f, err := os.Open(loc)
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%s was not found", loc)
		}
		if err != nil {
			return "", err
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, maxChecksumsSize+1))
		if err != nil {
			return "", fmt.Errorf("%s: %w", loc, err)
		}
		if len(b) > maxChecksumsSize {
			return "", fmt.Errorf("%s is larger than %d MiB: not a checksums file", loc, maxChecksumsSize>>20)
		}
		return string(b), nil
	}
	var err error
	for attempt := 1; attempt <= max(retries, 1); attempt++ {
		var text string
		var final bool
		if text, final, err = d.getChecksums(ctx, loc); err == nil {
			return text, nil
		}
		if final || ctx.Err() != nil {
			break
		}
		onhost.Logf(env, "download %s (attempt %d/%d): %v", loc, attempt, retries, err)
		if attempt < retries {
			if serr := onhost.Sleep(ctx, d.backoff<<(attempt-1)); serr != nil {
				return "", serr
			}
		}
	}
	return "", err
}

// getChecksums makes one request; final tells that trying again is no use.
func (d downloadBuiltin) getChecksums(ctx context.Context, u string) (text string, final bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, checksumsTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", true, fmt.Errorf("%s: %w", u, err)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return "", false, err // the client's error names the URL
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return "", true, fmt.Errorf("%s was not found (HTTP %s)", u, resp.Status)
	case resp.StatusCode != http.StatusOK:
		return "", resp.StatusCode < 500, fmt.Errorf("%s: HTTP %s", u, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxChecksumsSize+1))
	if err != nil {
		return "", false, fmt.Errorf("%s: %w", u, err)
	}
	if len(b) > maxChecksumsSize {
		return "", true, fmt.Errorf("%s is larger than %d MiB: not a checksums file", u, maxChecksumsSize>>20)
	}
	return string(b), true, nil
}
