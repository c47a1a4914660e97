package main

import (
	"context"
	"os"
	"path/filepath"
	"sync"

	"github.com/mensylisir/kubexm/engine/inventory"
	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/engine/transport/ssh"
	"github.com/mensylisir/kubexm/schema"
)

// connector opens the SSH transport of a host; the engine itself runs the
// control machine and the inventory's local hosts on the local transport.
// Host keys and upload slots are shared by every host of the run, so it is
// built once per process.
type connector struct {
	policy      ssh.HostKeyChecking
	uploadForks int

	once        sync.Once
	knownHosts  *ssh.KnownHosts
	khErr       error
	uploadSlots chan struct{}
	sums        *ssh.SumCache
}

func (c *connector) connect(ctx context.Context, h *inventory.Host) (transport.Transport, error) {
	c.once.Do(func() {
		home, _ := os.UserHomeDir()
		var read []string
		if home != "" {
			read = append(read, filepath.Join(home, ".ssh", "known_hosts"))
		}
		// The kubexm known_hosts sits at the root of the work dir, beside
		// every cluster's directory, so re-created clusters keep trusting the
		// same hosts.
		if c.khErr = os.MkdirAll(".kubexm", 0o755); c.khErr != nil {
			return
		}
		c.knownHosts, c.khErr = ssh.NewKnownHosts(c.policy, read, filepath.Join(".kubexm", "known_hosts"))
		forks := c.uploadForks
		if forks <= 0 {
			forks = 10
		}
		c.uploadSlots = make(chan struct{}, forks)
		c.sums = &ssh.SumCache{}
	})
	if c.khErr != nil {
		return nil, c.khErr
	}
	t, err := ssh.Dial(ctx, h, ssh.Options{KnownHosts: c.knownHosts, UploadSlots: c.uploadSlots, Sums: c.sums})
	if err != nil {
		// Not t: a nil *ssh.Transport in a non-nil interface would be closed.
		return nil, err
	}
	return t, nil
}

func loadInventory(path string, s *schema.Support) (*inventory.Inventory, error) {
	c, warnings, err := schema.LoadWith(path, s)
	for _, w := range warnings {
		os.Stderr.WriteString("warning: " + w.String() + "\n")
	}
	if err != nil {
		return nil, err
	}
	return schema.Inventory(c, path)
}
