package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mensylisir/kubexm/engine"
	"github.com/mensylisir/kubexm/engine/inventory"
	"github.com/mensylisir/kubexm/engine/output"
	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/engine/transport/ssh"
	"github.com/mensylisir/kubexm/schema"
)

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(s string) error { *m = append(*m, s); return nil }

func runMain(args []string) {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	inv := fs.String("i", "", "")
	tags := fs.String("tags", "", "")
	check := fs.Bool("check", false, "")
	resume := fs.String("resume", "", "")
	jsonOut := fs.Bool("json", false, "")
	var extra multi
	fs.Var(&extra, "e", "")
	fs.Parse(args[1:])
	pbPath := fs.Arg(0)
	c, _, err := schema.Load(*inv)
	if err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	iv, err := schema.Inventory(c, *inv)
	if err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	pb, err := engine.Load(context.Background(), pbPath, engine.LoadOptions{Builtins: builtinMap()})
	if err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	ev, err := engine.ParseExtraVars(extra)
	if err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	wd, _ := filepath.Abs(filepath.Join(".kubexm", c.Metadata.Name))
	os.MkdirAll(wd, 0o755)
	var sink engine.Sink = output.NewText(os.Stdout, 1)
	if *jsonOut {
		sink = output.NewJSON(os.Stdout)
	}
	opts := engine.RunOptions{
		Connect: func(ctx context.Context, h *inventory.Host) (transport.Transport, error) {
			return ssh.Dial(ctx, h, ssh.Options{HostKeyChecking: ssh.Off})
		},
		Check: *check, ExtraVars: ev, WorkDir: wd, Resume: *resume, Output: sink,
	}
	if *tags != "" {
		opts.Tags = strings.Split(*tags, ",")
	}
	rc, err := engine.Run(context.Background(), pb, iv, opts)
	if err != nil {
		fmt.Println("RUN ERROR:", err)
		os.Exit(1)
	}
	_ = rc
}
