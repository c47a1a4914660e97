// Package testhosts gives integration and end-to-end tests the test machines
// started by test/hosts/up.sh: systemd-nspawn containers with systemd as PID 1
// and sshd, one IP each on a per-run bridge. Tests either read an already
// running set from the environment (FromEnv, after `source <state>/hosts.env`)
// or start and stop their own (Up, Down).
package testhosts

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Host is one test machine.
type Host struct {
	Name    string
	Address string
	Port    int
}

// Set is the machines of one run.
type Set struct {
	Hosts []Host
	// KeyPath is the private key that logs in as root (and as SudoUser).
	KeyPath string
	// Gateway is the host's address on the run's bridge: the machines reach
	// the control machine there, e.g. to fetch artifacts a test serves.
	Gateway       string
	InventoryPath string // a ready-to-use kubexm cluster.yaml
	Prefix        string // names the run; Down takes it
	SSHConfigPath string
	// SudoUser is a non-root user whose sudo asks for SudoPassword; it can
	// also log in with that password over SSH.
	SudoUser     string
	SudoPassword string
}

// The environment variables written to hosts.env by up.sh.
const (
	envPrefix    = "KUBEXM_TEST_PREFIX"
	envHosts     = "KUBEXM_TEST_HOSTS"
	envKey       = "KUBEXM_TEST_KEY"
	envGateway   = "KUBEXM_TEST_GATEWAY"
	envInventory = "KUBEXM_TEST_INVENTORY"
	envSSHConfig = "KUBEXM_TEST_SSH_CONFIG"
	envSudoUser  = "KUBEXM_TEST_SUDO_USER"
	envSudoPass  = "KUBEXM_TEST_SUDO_PASSWORD"
	envCache     = "KUBEXM_TEST_CACHE"
	envScripts   = "KUBEXM_TEST_SCRIPTS"
	defaultCache = "/var/cache/kubexm-test"
)

// FromEnv returns the machines described by the KUBEXM_TEST_* variables that
// `source <state>/hosts.env` sets.
func FromEnv() (*Set, error) {
	if os.Getenv(envHosts) == "" {
		return nil, fmt.Errorf("%s is not set: no test machines; run `make hosts-up N=3` and `source <state>/hosts.env` (up prints the path)", envHosts)
	}
	return parse(os.Getenv, "environment")
}

// Load returns the machines described by a hosts.env file written by up.sh.
func Load(envFile string) (*Set, error) {
	f, err := os.Open(envFile)
	if err != nil {
		return nil, fmt.Errorf("read test machines: %w", err)
	}
	defer f.Close()
	vars := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if !ok {
			return nil, fmt.Errorf("%s:%d: want KEY=value, got %q", envFile, n, line)
		}
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
			v = v[1 : len(v)-1]
		}
		vars[strings.TrimSpace(k)] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", envFile, err)
	}
	return parse(func(k string) string { return vars[k] }, envFile)
}

func parse(get func(string) string, source string) (*Set, error) {
	s := &Set{
		KeyPath:       get(envKey),
		Gateway:       get(envGateway),
		InventoryPath: get(envInventory),
		Prefix:        get(envPrefix),
		SSHConfigPath: get(envSSHConfig),
		SudoUser:      get(envSudoUser),
		SudoPassword:  get(envSudoPass),
	}
	for _, entry := range strings.Fields(get(envHosts)) {
		name, addr, ok := strings.Cut(entry, "=")
		if !ok || name == "" || addr == "" {
			return nil, fmt.Errorf("%s: %s entry %q: want name=address[:port]", source, envHosts, entry)
		}
		h := Host{Name: name, Address: addr, Port: 22}
		if a, p, ok := strings.Cut(addr, ":"); ok {
			port, err := strconv.Atoi(p)
			if err != nil || port < 1 || port > 65535 {
				return nil, fmt.Errorf("%s: %s entry %q: bad port %q", source, envHosts, entry, p)
			}
			h.Address, h.Port = a, port
		}
		s.Hosts = append(s.Hosts, h)
	}
	if len(s.Hosts) == 0 {
		return nil, fmt.Errorf("%s: %s lists no hosts", source, envHosts)
	}
	if s.KeyPath == "" {
		return nil, fmt.Errorf("%s: %s is not set", source, envKey)
	}
	return s, nil
}

// Host returns the machine with the given name or address.
func (s *Set) Host(nameOrAddress string) (Host, error) {
	for _, h := range s.Hosts {
		if h.Name == nameOrAddress || h.Address == nameOrAddress {
			return h, nil
		}
	}
	names := make([]string, len(s.Hosts))
	for i, h := range s.Hosts {
		names[i] = h.Name
	}
	return Host{}, fmt.Errorf("no test machine %q in run %s (have %s)", nameOrAddress, s.Prefix, strings.Join(names, ", "))
}

// SSH runs script as root on host (a name or an address) with the system ssh
// client, independent of kubexm's own transport, and returns its stdout. A
// non-zero exit is an error that carries the exit status and stderr.
func (s *Set) SSH(ctx context.Context, host, script string) (string, error) {
	h, err := s.Host(host)
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "ssh", s.sshArgs(h, "root", script)...)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("ssh root@%s (%s): %w; stderr: %s", h.Name, h.Address, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

func (s *Set) sshArgs(h Host, user, script string) []string {
	return []string{
		"-i", s.KeyPath,
		"-p", strconv.Itoa(h.Port),
		"-o", "BatchMode=yes",
		"-o", "IdentitiesOnly=yes",
		"-o", "StrictHostKeyChecking=no",
		"-o", "UserKnownHostsFile=/dev/null",
		"-o", "LogLevel=ERROR",
		"-o", "ConnectTimeout=5",
		user + "@" + h.Address,
		"--", script,
	}
}

// Up starts n machines as run prefix (a random one when empty) with
// test/hosts/up.sh, or returns the run's machines if they are already up. It
// needs root. Call Down with the returned Prefix when done, also after an
// error: a failed up can leave parts of the run behind. env adds settings of
// up.sh, such as "KUBELET=1" for machines that will run kubelet.
func Up(ctx context.Context, n int, prefix string, env ...string) (*Set, error) {
	if prefix == "" {
		var err error
		if prefix, err = NewPrefix(); err != nil {
			return nil, err
		}
	}
	if err := runScript(ctx, "up.sh", append([]string{"N=" + strconv.Itoa(n), "PREFIX=" + prefix}, env...)...); err != nil {
		return nil, err
	}
	return Load(filepath.Join(StateDir(prefix), "hosts.env"))
}

// NewPrefix returns a random run prefix, for a caller that must know the
// prefix before Up returns, to Down even a failed run.
func NewPrefix() (string, error) {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random prefix: %w", err)
	}
	return "g" + hex.EncodeToString(b), nil
}

// Down stops the run's machines and removes everything up.sh made for it
// (test/hosts/down.sh). It fails if anything is left behind.
func Down(ctx context.Context, prefix string) error {
	if prefix == "" {
		return errors.New("testhosts.Down: empty prefix")
	}
	return runScript(ctx, "down.sh", "PREFIX="+prefix, "HALT_WAIT=5")
}

// PowerOff cuts the power of one machine of the run (test/hosts/poweroff.sh):
// all its processes are killed at once. Its disk and address stay; Up with
// the run's prefix and size boots it again.
func PowerOff(ctx context.Context, prefix, node string) error {
	if prefix == "" {
		return errors.New("testhosts.PowerOff: empty prefix")
	}
	return runScript(ctx, "poweroff.sh", "PREFIX="+prefix, "NODE="+node)
}

// StateDir is where up.sh keeps the run's key, ssh_config, hosts.env and
// cluster.yaml.
func StateDir(prefix string) string {
	cache := os.Getenv(envCache)
	if cache == "" {
		cache = defaultCache
	}
	return filepath.Join(cache, "runs", prefix)
}

// Script returns the path of one of the test/hosts scripts.
func Script(name string) (string, error) {
	dir, err := scriptsDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, name), nil
}

func runScript(ctx context.Context, name string, env ...string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("test/hosts/%s needs root (systemd-nspawn, netns, cgroups); run the tests as root", name)
	}
	path, err := Script(name)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "bash", path)
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", strings.Join(env, " "), path, err, out)
	}
	return nil
}

// scriptsDir finds test/hosts: $KUBEXM_TEST_SCRIPTS, or the module root above
// the working directory (go test runs in the package's directory).
func scriptsDir() (string, error) {
	if d := os.Getenv(envScripts); d != "" {
		return d, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find test/hosts: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "test", "hosts", "up.sh")); err == nil {
			return filepath.Join(dir, "test", "hosts"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("test/hosts/up.sh not found above the working directory; set %s to the test/hosts directory", envScripts)
		}
		dir = parent
	}
}
