package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/mensylisir/kubexm/schema/matrix"

	"github.com/mensylisir/kubexm/schema/validate"

	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/engine/transport/ssh"
	"github.com/mensylisir/kubexm/inventory"
	"github.com/mensylisir/kubexm/schema"
)

// Connector opens the SSH transport of a host; the engine itself runs the
// control machine and the inventory's local hosts on the local transport.
// Host keys and upload slots are shared by every host of the run, so it is
// built once per process.
type Connector struct {
	// Policy is how host keys are checked; UploadForks how many file
	// transfers run at once across all hosts (0: 10).
	Policy      ssh.HostKeyChecking
	UploadForks int
	// Observe, when set, hears of every SSH connection (--conn-events-fd).
	Observe func(ssh.ConnEvent)
	// Dial, when set, makes the TCP connections (--confine-dial).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Persist, when set, keeps the run's connections open after it
	// (--ssh-persist): HandOver starts the keeper.
	Persist *ssh.Persist

	once        sync.Once
	knownHosts  *ssh.KnownHosts
	khErr       error
	uploadSlots chan struct{}
	sums        *transport.SumCache
}

// Connect opens h's SSH transport.
func (c *Connector) Connect(ctx context.Context, h *inventory.Host) (transport.Transport, error) {
	c.once.Do(func() {
		home, _ := os.UserHomeDir()
		var read []string
		if home != "" {
			read = append(read, filepath.Join(home, ".ssh", "known_hosts"))
		}
		// The host keys kubexm trusts must not depend on the directory it
		// runs from: a run from elsewhere would accept a changed key as new.
		dir, err := StateDir()
		if err != nil {
			c.khErr = err
			return
		}
		if c.khErr = os.MkdirAll(dir, 0o700); c.khErr != nil {
			return
		}
		c.knownHosts, c.khErr = ssh.NewKnownHosts(c.Policy, read, filepath.Join(dir, "known_hosts"))
		forks := c.UploadForks
		if forks <= 0 {
			forks = 10
		}
		c.uploadSlots = make(chan struct{}, forks)
		c.sums = &transport.SumCache{}
	})
	if c.khErr != nil {
		return nil, c.khErr
	}
	t, err := ssh.Dial(ctx, h, ssh.Options{KnownHosts: c.knownHosts, UploadSlots: c.uploadSlots, Sums: c.sums, SumRecords: hostSumRecords, Observe: c.Observe, Dial: c.Dial, Persist: c.Persist})
	if err != nil {
		// Not t: a nil *ssh.Transport in a non-nil interface would be closed.
		return nil, err
	}
	return t, nil
}

// PersistDir is where --ssh-persist keeps its sockets: in StateDir.
func PersistDir() (string, error) {
	dir, err := StateDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "ssh"), nil
}

// HandOver starts a keeper (this executable's `ssh-keeper` command, in its
// own session so it outlives the run) for the connections the run closed,
// when --ssh-persist asks for them to be kept. The keeper's configuration,
// with the hosts' passwords, goes through its standard input only.
func (c *Connector) HandOver() error {
	if c.Persist == nil {
		return nil
	}
	cfg, err := c.Persist.HandOver()
	if err != nil || cfg == nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("ssh-persist: %w", err)
	}
	cmd := exec.Command(self, "ssh-keeper")
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// The keeper runs kubexm's main too: a profile asked of this command
	// is not the keeper's to overwrite.
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "KUBEXM_CPUPROFILE=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	// What a keeper could not keep (a host that refused it, a dial that
	// failed) is the next run's dial's to report; the log says why too.
	if log, err := openKeeperLog(c.Persist.Dir); err == nil {
		defer log.Close()
		cmd.Stdout, cmd.Stderr = log, log
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("ssh-persist: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("ssh-persist: start the keeper: %w", err)
	}
	_, werr := in.Write(cfg)
	if cerr := in.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("ssh-persist: hand the connections to the keeper: %w", werr)
	}
	return cmd.Process.Release()
}

// keeperLogMax bounds the keepers' log: it starts again beyond.
const keeperLogMax = 1 << 20

func openKeeperLog(dir string) (*os.File, error) {
	p := filepath.Join(dir, "keeper.log")
	flags := os.O_CREATE | os.O_WRONLY | os.O_APPEND
	if fi, err := os.Stat(p); err == nil && fi.Size() > keeperLogMax {
		flags |= os.O_TRUNC
	}
	return os.OpenFile(p, flags, 0o600)
}

// hostSumRecords is where a host keeps the sha256 sums of the files kubexm
// compared, with their stat (engine/transport/ssh's sumFunc): under kubexm's
// state directory on the host, which delete-cluster removes.
const hostSumRecords = "/var/lib/kubexm/sums"

// StateDir is where kubexm keeps what belongs to the user rather than to
// one directory (the SSH host keys it trusts): $KUBEXM_HOME, else ~/.kubexm.
func StateDir() (string, error) {
	if d := os.Getenv("KUBEXM_HOME"); d != "" {
		return filepath.Abs(d)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no home directory to keep trusted SSH host keys in (~/.kubexm/known_hosts): %w; set HOME or KUBEXM_HOME", err)
	}
	return filepath.Join(home, ".kubexm"), nil
}

// ClusterFile is the -i file of a run, read and decoded once: the loader
// takes the hooks of a cluster file from it, and LoadInventory checks it
// against the playbook's support matrix.
type ClusterFile struct {
	Path string
	data []byte
	err  error // reading it
	// decoded is a cluster file's decoding; nil for an Ansible-style
	// inventory and for a file with no tree to decode (LoadInventory
	// reports why).
	decoded *validate.Decoded
}

// ReadClusterFile reads -i once. A file that cannot be read is reported
// by LoadInventory: a listing of the playbook needs no inventory.
func ReadClusterFile(path string) *ClusterFile {
	f := &ClusterFile{Path: path}
	if f.data, f.err = os.ReadFile(path); f.err != nil || f.ansible() {
		return f
	}
	f.decoded, _ = validate.DecodeFile(path, f.data)
	return f
}

// ansible says the file is an Ansible-style inventory, in YAML or INI.
func (f *ClusterFile) ansible() bool {
	return inventory.IsAnsibleYAML(f.data) || strings.HasSuffix(f.Path, ".ini") || inventory.LooksLikeINI(f.data)
}

// LoadInventory makes the inventory of -i: a cluster.yaml (or KubeKey v3
// file) checked against the support matrix s, or an Ansible-style
// inventory in YAML or INI for playbooks that are not about a cluster.
func LoadInventory(f *ClusterFile, s *matrix.Support) (*inventory.Inventory, error) {
	if f.err != nil {
		return nil, fmt.Errorf("inventory: %w", f.err)
	}
	switch {
	case inventory.IsAnsibleYAML(f.data):
		return inventory.ParseAnsibleYAML(f.Path, f.data)
	case strings.HasSuffix(f.Path, ".ini") || inventory.LooksLikeINI(f.data):
		return inventory.ParseAnsibleINI(f.Path, f.data)
	}
	var c *schema.Cluster
	var warnings []schema.Warning
	var err error
	if f.decoded != nil {
		c, warnings, err = f.decoded.Check(s)
		f.decoded = nil // Check changes what it checked: a second load parses again
	} else {
		c, warnings, err = validate.ParseWith(f.Path, f.data, s)
	}
	for _, w := range warnings {
		os.Stderr.WriteString("warning: " + w.String() + "\n")
	}
	if err != nil {
		return nil, err
	}
	return schema.Inventory(c, f.Path)
}

// connEvent is a line of --conn-events-fd: the host and what happened to
// one of its SSH connections (dialed, dial_failed, closed). The worker of
// `kubexm server` counts them as metrics; the line carries no error text.
type connEvent struct {
	Host  string `json:"host"`
	Event string `json:"event"`
}

// ReportConns makes c write a connEvent line to the file descriptor fd for
// each SSH connection event.
func (c *Connector) ReportConns(fd int) error {
	f := os.NewFile(uintptr(fd), "conn-events")
	if _, err := f.Stat(); err != nil {
		return fmt.Errorf("--conn-events-fd %d: %w", fd, err)
	}
	// Not inherited by the commands the run starts on this machine: one
	// left running would keep the worker's pipe open.
	syscall.CloseOnExec(fd)
	var mu sync.Mutex
	enc := json.NewEncoder(f)
	c.Observe = func(e ssh.ConnEvent) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(connEvent{Host: e.Host, Event: string(e.Kind)})
	}
	return nil
}
