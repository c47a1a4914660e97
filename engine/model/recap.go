package model

import "strings"

// What the run and its callers read off a recap.

// FailedHosts says which hosts failed and which were unreachable.
func FailedHosts(rc *Recap) string {
	var failed, unreachable []string
	for _, h := range rc.Order {
		s := rc.Hosts[h]
		switch {
		case s.Failed > 0:
			failed = append(failed, h)
		case s.Unreachable > 0:
			unreachable = append(unreachable, h)
		}
	}
	var parts []string
	if len(failed) > 0 {
		parts = append(parts, "failed on "+strings.Join(failed, ", "))
	}
	if len(unreachable) > 0 {
		parts = append(parts, "unreachable: "+strings.Join(unreachable, ", "))
	}
	return strings.Join(parts, "; ")
}

// HostStats returns the recap's counts of a host, adding the host to the
// recap's order the first time.
func (rc *Recap) HostStats(name string) *HostStats {
	s, ok := rc.Hosts[name]
	if !ok {
		s = &HostStats{}
		rc.Hosts[name] = s
		rc.Order = append(rc.Order, name)
	}
	return s
}
