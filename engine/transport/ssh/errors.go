package ssh

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
)

// Cause classifies why a host could not be reached, so callers (the
// connectivity check, the summary) can react without parsing messages.
type Cause string

// The causes a DialError reports.
const (
	CauseRefused        Cause = "connection refused"
	CauseNoRoute        Cause = "no route to host"
	CauseTimeout        Cause = "timeout"
	CauseDNS            Cause = "name not resolved"
	CauseAuth           Cause = "authentication refused"
	CauseHostKeyChanged Cause = "host key changed"
	CauseHostKeyUnknown Cause = "host key unknown"
	CauseBastion        Cause = "bastion unreachable"
	CauseOther          Cause = "connection failed"
)

// DialError is a failure to establish the SSH connection to a host.
type DialError struct {
	Host  string // inventory name
	Addr  string // host:port that was dialled
	Cause Cause
	Hint  string
	Err   error
}

func (e *DialError) Error() string {
	msg := fmt.Sprintf("host %s (%s): %s: %v", e.Host, e.Addr, e.Cause, e.Err)
	if e.Hint != "" {
		msg += "\n  hint: " + e.Hint
	}
	return msg
}

func (e *DialError) Unwrap() error { return e.Err }

// hostKeyError is returned by the host key callback; classify finds it in
// the handshake's error chain.
type hostKeyError struct {
	cause Cause
	msg   string
	file  string // the known_hosts file to fix: the one with the old key, or kubexm's
}

func (e *hostKeyError) Error() string { return e.msg }

func classify(host, addr, user string, err error) *DialError {
	var de *DialError
	if errors.As(err, &de) {
		return de
	}
	d := &DialError{Host: host, Addr: addr, Err: err, Cause: CauseOther}
	reach := fmt.Sprintf("cannot connect to %s; check the network policy, the firewall and that sshd is running there", addr)
	var hk *hostKeyError
	var dnsErr *net.DNSError
	var nerr net.Error
	switch {
	case errors.As(err, &hk):
		d.Cause = hk.cause
		host, port, _ := net.SplitHostPort(addr)
		if hk.cause == CauseHostKeyChanged {
			d.Hint = fmt.Sprintf("the key %s presents is not the one recorded in %s; if the machine was reinstalled, remove its old line (ssh-keygen -f %s -R %s) and run again", addr, hk.file, hk.file, knownHostsName(addr))
		} else {
			d.Hint = fmt.Sprintf("%s is not in known_hosts and --ssh-host-key-checking=strict; add it (ssh-keyscan -p %s %s >> %s) or use accept-new", addr, port, host, hk.file)
		}
	case errors.Is(err, syscall.ECONNREFUSED):
		d.Cause, d.Hint = CauseRefused, reach
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		d.Cause, d.Hint = CauseNoRoute, reach
	case errors.As(err, &dnsErr):
		d.Cause, d.Hint = CauseDNS, "check the host's address in cluster.yaml and the control machine's DNS"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, errConnectTimeout), errors.As(err, &nerr) && nerr.Timeout():
		d.Cause, d.Hint = CauseTimeout, reach
	case strings.Contains(err.Error(), "unable to authenticate"), strings.Contains(err.Error(), "no supported methods remain"):
		d.Cause = CauseAuth
		d.Hint = fmt.Sprintf("check the user (%s), private key, passphrase or password for this host in cluster.yaml, and that the key is in ~%s/.ssh/authorized_keys", user, user)
	}
	return d
}

var errConnectTimeout = errors.New("connect timeout")
