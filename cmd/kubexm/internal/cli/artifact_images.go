package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/mensylisir/kubexm/imagepush"
	"github.com/mensylisir/kubexm/lifecycle"
)

type pushFlags struct {
	file, bundle, workDir string
	rolesPath             []string
	jobs                  int
}

func newArtifactImagesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "images",
		Short: "The images of an offline bundle in a private registry",
	}
	var f pushFlags
	push := &cobra.Command{
		Use:   "push",
		Short: "Push every image the cluster needs to registry.privateRegistry",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if f.file, err = clusterFile(f.file); err != nil {
				return err
			}
			return pushImages(cmd.Context(), cmd.OutOrStdout(), f)
		},
	}
	fl := push.Flags()
	addClusterFileFlag(fl, &f.file)
	fl.StringVar(&f.bundle, "offline-bundle", "", "push the images of this bundle of kubexm artifact export (verified and unpacked into the work directory)")
	fl.StringVar(&f.workDir, "workdir", "", "work directory (default .kubexm/<cluster name>)")
	fl.StringSliceVar(&f.rolesPath, "roles-path", nil, "directories searched for roles (their support matrix checks the cluster file)")
	fl.IntVar(&f.jobs, "jobs", 4, "images pushed at once")
	cmd.AddCommand(push)
	return cmd
}

func pushImages(ctx context.Context, w io.Writer, f pushFlags) error {
	p, err := lifecycle.PlanPush(ctx, lifecycle.PushRequest{Inventory: f.file, OfflineBundle: f.bundle, WorkDir: f.workDir, RolesPath: f.rolesPath},
		func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) })
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
	res, err := imagepush.Push(ctx, tgt, images, imagepush.Options{Jobs: f.jobs, Progress: func(ev imagepush.Event) {
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
