// Package valid holds the rules of cluster.yaml's values that the format
// (schema), its validation (schema/validate) and the role variables' types
// share: names, addresses, endpoints.
package valid

import (
	"fmt"
	"net/netip"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/mensylisir/kubexm/internal/sysdirs"
)

// DNS1123Label is one label of a DNS-1123 name.
var DNS1123Label = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// IsDNS1123Subdomain accepts a lowercase DNS-1123 name.
func IsDNS1123Subdomain(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if !DNS1123Label.MatchString(l) {
			return false
		}
	}
	return true
}

// IsHostname accepts DNS names in any case, and a leading "*." wildcard when
// wildcard is set (certificate SANs).
func IsHostname(s string, wildcard bool) bool {
	if wildcard {
		s = strings.TrimPrefix(s, "*.")
	}
	// An all-numeric last label is a mistyped IP (10.0.0.300), not a name.
	last := s[strings.LastIndexByte(s, '.')+1:]
	if last != "" && strings.Trim(last, "0123456789") == "" {
		return false
	}
	return IsDNS1123Subdomain(strings.ToLower(s))
}

// IsLocalAddress is the control machine itself (localhost).
func IsLocalAddress(a string) bool {
	return strings.EqualFold(a, "localhost")
}

// IsHostOrIP accepts an IP address or a DNS name.
func IsHostOrIP(s string) bool {
	if _, err := netip.ParseAddr(s); err == nil {
		return true
	}
	return IsHostname(s, false)
}

// IsHostPort accepts host, host:port, IPv6 or [IPv6]:port.
func IsHostPort(s string) bool {
	if IsHostOrIP(s) {
		return true
	}
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return false
	}
	host, port := s[:i], s[i+1:]
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || strings.TrimLeft(port, "0123456789") != "" {
		return false
	}
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		a, err := netip.ParseAddr(host[1 : len(host)-1])
		return err == nil && a.Is6()
	}
	return IsHostOrIP(host) && !strings.Contains(host, ":")
}

// PathChars are the characters a path written for a role may hold: none
// means anything to a shell, a systemd unit, YAML or TOML.
var PathChars = regexp.MustCompile(`^[A-Za-z0-9._+@/-]+$`)

// PathProblem says what is wrong with v as an absolute host path (and,
// with system, as a directory that is not the system's), or "".
func PathProblem(v string, system bool) (msg, hint string) {
	switch {
	case !strings.HasPrefix(v, "/"):
		return fmt.Sprintf("%q is not an absolute path", v), "write an absolute path such as /var/lib/etcd"
	case !PathChars.MatchString(v):
		return fmt.Sprintf("path %q holds characters that a path here must not have", v), "letters, digits and . _ + @ / - only"
	case path.Clean(v) != v:
		return fmt.Sprintf("path %q is not normalised", v), fmt.Sprintf("write it as %s", path.Clean(v))
	case system && sysdirs.Contains(v):
		return fmt.Sprintf("%s is a system directory or holds one", v), "delete removes this directory; give one of its own, e.g. /var/lib/<name>"
	}
	return "", ""
}

// HasControl reports a control character in s.
func HasControl(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0
}

// The forms of a container runtime's version, a feature gate's name and a
// kubelet flag.
var (
	RuntimeVersion = regexp.MustCompile(`^v?\d+\.\d+\.\d+(-[0-9A-Za-z.]+)?$`)
	FeatureGate    = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
	// A kubelet flag is written into the ExecStart line of kubelet.service:
	// whitespace would split it, quotes, backslashes and $ are systemd's
	// quoting and expansion (the role writes % as %%).
	KubeletArg = regexp.MustCompile(`^--[a-z0-9][a-z0-9-]*(=[^\s"'\\$]*)?$`)
)

// Semverish is a version as vMAJOR.MINOR.PATCH.
var Semverish = regexp.MustCompile(`^v\d+\.\d+\.\d+$`)

// Package names: Debian policy 5.6.1 (lower case, digits, + - .; at least
// two characters, starting alphanumeric), optionally with dpkg's :arch; RPM
// names also allow upper case and _ (NetworkManager, perl-Data_Dumper).
var (
	DebName = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+(:[a-z0-9][a-z0-9-]*)?$`)
	RpmName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.+-]*$`)
)

// Kubernetes label syntax (k8s.io/apimachinery validation): a key is an
// optional DNS-1123 subdomain prefix and "/", then a name of at most 63
// alphanumerics, - _ . starting and ending alphanumeric; a value is empty or
// such a name.
var LabelName = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)

// LabelKeyError says why k is not a label (or taint) key, or "".
func LabelKeyError(k string) string {
	name := k
	if prefix, n, ok := strings.Cut(k, "/"); ok {
		if !IsDNS1123Subdomain(prefix) {
			return fmt.Sprintf("prefix %q is not a DNS-1123 subdomain", prefix)
		}
		name = n
	}
	if len(name) > 63 || !LabelName.MatchString(name) {
		return fmt.Sprintf("name %q must be 1-63 letters, digits, - _ . starting and ending with a letter or digit", name)
	}
	return ""
}

// MinorRE is a Kubernetes minor, vMAJOR.MINOR.
var MinorRE = regexp.MustCompile(`^v(\d+)\.(\d+)$`)

// MinorOf returns "v1.37" for "v1.37.2", or "" when v is not vX.Y.Z.
func MinorOf(v string) string {
	if !Semverish.MatchString(v) {
		return ""
	}
	return v[:strings.LastIndexByte(v, '.')]
}

// CompareMinor orders two minors (vMAJOR.MINOR) as -1, 0 or 1.
func CompareMinor(a, b string) int {
	pa, pb := MinorRE.FindStringSubmatch(a), MinorRE.FindStringSubmatch(b)
	if pa == nil || pb == nil {
		return strings.Compare(a, b)
	}
	for i := 1; i <= 2; i++ {
		x, _ := strconv.Atoi(pa[i])
		y, _ := strconv.Atoi(pb[i])
		if x != y {
			return x - y
		}
	}
	return 0
}

// ComparePatch compares two versions of one minor by their patch numbers.
func ComparePatch(a, b string) int {
	x, _ := strconv.Atoi(a[strings.LastIndexByte(a, '.')+1:])
	y, _ := strconv.Atoi(b[strings.LastIndexByte(b, '.')+1:])
	return x - y
}

// SecretVarName marks variables whose values are secrets: masked by
// `config view` and in every output and journal of a run.
var SecretVarName = regexp.MustCompile(`(?i)password|passwd|passphrase|secret|token|private_?key|api_?key|credential|(^|[_.-])(pass|pwd|auth)([_.-]|$)`)
