package lifecycle

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/mensylisir/kubexm/imagepush"
)

// PushImages pushes the images of req (PlanPush) to the cluster's
// registry and reports on w: a line per image as it is done, a progress
// line on a terminal, and the totals.
func PushImages(ctx context.Context, w io.Writer, req PushRequest) error {
	p, err := PlanPush(ctx, req, func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) })
	if err != nil {
		return err
	}
	tgt, images := p.Target, p.Images
	if err := imagepush.Check(ctx, tgt); err != nil {
		return err
	}
	tty := false
	if fd, ok := w.(*os.File); ok {
		tty = term.IsTerminal(int(fd.Fd()))
	}
	done := 0
	var shown time.Time
	res, err := imagepush.Push(ctx, tgt, images, imagepush.Options{Jobs: req.Jobs, Progress: func(ev imagepush.Event) {
		if ev.Done {
			done++
			if tty {
				fmt.Fprint(w, "\r\033[K")
			}
			state := "pushed"
			if ev.Pushed.Sent == 0 {
				state = "present"
			}
			fmt.Fprintf(w, "%-7s %s@%s (%s; %s sent)\n", state, ev.Pushed.Target, ev.Pushed.Digest, strings.Join(ev.Pushed.Archs, ", "), mib(ev.Pushed.Sent))
		}
		if tty && (ev.Done || time.Since(shown) > 200*time.Millisecond) {
			shown = time.Now()
			fmt.Fprintf(w, "\r\033[K%d of %d images, %s sent", done, len(images), mib(ev.Sent))
		}
	}})
	if tty {
		fmt.Fprint(w, "\r\033[K")
	}
	if err != nil {
		if res != nil && len(res.Images) > 0 {
			fmt.Fprintf(w, "%d images were pushed before the failure (listed above); the others are not in the registry\n", len(res.Images))
		}
		return err
	}
	fmt.Fprintf(w, "\n%d images in %s: %s sent, %s already there, in %s\n", len(res.Images), tgt.Registry, mib(res.Sent), mib(res.Skipped), res.Elapsed.Round(1e6))
	return nil
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
