package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestCLISurface keeps the whole command tree as users see it in
// testdata/surface.golden: every command's --help, its flags with their
// types, defaults and shorthands, its aliases, and what its argument check
// says to none, one and two arguments. A change to a command's
// declaration (a table row or Go) that changes any of it fails here;
// KUBEXM_UPDATE_SURFACE=1 rewrites the file, whose diff then shows the
// change for review.
func TestCLISurface(t *testing.T) {
	var b strings.Builder
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		describeCommand(t, &b, c)
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(newRootCmd())
	golden := filepath.Join("testdata", "surface.golden")
	if os.Getenv("KUBEXM_UPDATE_SURFACE") != "" {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gl), len(wl)) {
			g, w := "", ""
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("the command tree differs from %s from line %d:\n got: %q\nwant: %q\n(KUBEXM_UPDATE_SURFACE=1 rewrites it if the change is meant)", golden, i+1, g, w)
			}
		}
	}
}

func describeCommand(t *testing.T, b *strings.Builder, c *cobra.Command) {
	t.Helper()
	path := c.CommandPath()
	fmt.Fprintf(b, "=== %s\n", path)
	fmt.Fprintf(b, "use: %q aliases: %q runnable: %v hidden: %v disable-flag-parsing: %v silence-usage: %v annotations: %v\n",
		c.Use, c.Aliases, c.Runnable(), c.Hidden, c.DisableFlagParsing, c.SilenceUsage, c.Annotations)
	if c.Args != nil {
		for _, args := range [][]string{nil, {"x"}, {"all"}, {"x", "y"}} {
			fmt.Fprintf(b, "args %q: %v\n", args, c.Args(c, args))
		}
	}
	var flags []string
	add := func(kind string) func(f *pflag.Flag) {
		return func(f *pflag.Flag) {
			flags = append(flags, fmt.Sprintf("%s --%s -%s %s default=%q noopt=%q hidden=%v usage=%q",
				kind, f.Name, f.Shorthand, f.Value.Type(), f.DefValue, f.NoOptDefVal, f.Hidden, f.Usage))
		}
	}
	c.LocalFlags().VisitAll(add("local"))
	c.InheritedFlags().VisitAll(add("inherited"))
	slices.Sort(flags)
	for _, f := range flags {
		fmt.Fprintln(b, f)
	}
	// The help as `kubexm PATH --help` prints it.
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append(strings.Fields(strings.TrimPrefix(path, "kubexm")), "--help"))
	if err := root.Execute(); err != nil {
		fmt.Fprintf(b, "help error: %v\n", err)
	}
	b.WriteString(out.String())
}
