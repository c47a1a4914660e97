package funcs

import (
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"reflect"
	"strings"

	"github.com/Masterminds/semver/v3"
	"github.com/goccy/go-yaml"

	"github.com/mensylisir/kubexm/engine/transport"
	"github.com/mensylisir/kubexm/internal/yamlguard"
)

// The kubexm functions shared by templates and expressions. Each one checks
// its input and returns an error rather than a zero value, so a typo in a
// CIDR fails the task instead of configuring a wrong address.

// cidrHost returns the n-th address of a prefix; a negative n counts from the
// end (-1 is the last address), as in Terraform's cidrhost.
func cidrHost(cidr string, n any) (string, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(cidr))
	if err != nil {
		return "", fmt.Errorf("cidrHost: %w", err)
	}
	num, err := toBigInt(n)
	if err != nil {
		return "", fmt.Errorf("cidrHost: host number: %w", err)
	}
	p = p.Masked()
	addr := p.Addr()
	hostBits := addr.BitLen() - p.Bits()
	size := new(big.Int).Lsh(big.NewInt(1), uint(hostBits))
	if num.Sign() < 0 {
		num.Add(num, size)
	}
	if num.Sign() < 0 || num.Cmp(size) >= 0 {
		return "", fmt.Errorf("cidrHost: %s has %s addresses, host number %v is out of range", p, size, n)
	}
	raw := addr.AsSlice()
	sum := new(big.Int).Add(new(big.Int).SetBytes(raw), num)
	out := sum.FillBytes(make([]byte, len(raw)))
	res, _ := netip.AddrFromSlice(out) // len(out) is 4 or 16: cannot fail
	return res.String(), nil
}

// cidrContains reports whether cidr contains an address or a whole prefix.
func cidrContains(cidr, ipOrCidr string) (bool, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(cidr))
	if err != nil {
		return false, fmt.Errorf("cidrContains: %w", err)
	}
	p = p.Masked()
	s := strings.TrimSpace(ipOrCidr)
	if strings.Contains(s, "/") {
		q, err := netip.ParsePrefix(s)
		if err != nil {
			return false, fmt.Errorf("cidrContains: %w", err)
		}
		return q.Bits() >= p.Bits() && p.Contains(q.Masked().Addr()), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return false, fmt.Errorf("cidrContains: %w", err)
	}
	return p.Contains(a.Unmap()) || p.Contains(a), nil
}

// ipFamily returns "IPv4" or "IPv6" (the spellings of a Service's
// ipFamilies) for an address or a prefix.
func ipFamily(ipOrCidr string) (string, error) {
	s := strings.TrimSpace(ipOrCidr)
	var a netip.Addr
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return "", fmt.Errorf("ipFamily: %w", err)
		}
		a = p.Addr()
	} else {
		var err error
		if a, err = netip.ParseAddr(s); err != nil {
			return "", fmt.Errorf("ipFamily: %w", err)
		}
	}
	if a.Unmap().Is4() {
		return "IPv4", nil
	}
	return "IPv6", nil
}

// shquote makes values safe to put into shell text (shell:, command: cmd,
// wait_for command): each value becomes one POSIX shell word, single-quoted
// when it holds anything but letters, digits and -_./:,+@%; a list gives one
// word per item, separated by spaces, so `for p in {{ .pkgs | shquote }}`
// loops over the items. sprig's quote is not this: it writes a Go
// double-quoted string, inside which the shell still expands $(...) and `...`.
// A NUL byte cannot be part of a shell word, so it is an error.
func shquote(values ...any) (string, error) {
	var words []string
	var add func(v any) error
	add = func(v any) error {
		switch x := v.(type) {
		case nil:
			words = append(words, "''")
		case []any:
			for _, e := range x {
				if err := add(e); err != nil {
					return err
				}
			}
		case []string:
			for _, e := range x {
				if err := add(e); err != nil {
					return err
				}
			}
		case map[string]any:
			return fmt.Errorf("shquote: a map has no shell form; quote its values one by one")
		default:
			s := fmt.Sprint(x)
			if strings.IndexByte(s, 0) >= 0 {
				return fmt.Errorf("shquote: %q holds a NUL byte, which no shell word can carry", s)
			}
			if strings.Contains(s, "=") {
				// NAME=value unquoted at the start of a command would be an
				// assignment, not a word.
				words = append(words, "'"+strings.ReplaceAll(s, "'", `'\''`)+"'")
			} else {
				words = append(words, transport.ShellQuote(s))
			}
		}
		return nil
	}
	for _, v := range values {
		if err := add(v); err != nil {
			return "", err
		}
	}
	return strings.Join(words, " "), nil
}

// joinHostPort brackets IPv6 addresses: "[fd00::1]:6443".
func joinHostPort(host string, port any) (string, error) {
	switch p := port.(type) {
	case string:
		return net.JoinHostPort(host, p), nil
	default:
		n, err := toBigInt(port)
		if err != nil {
			return "", fmt.Errorf("joinHostPort: port: %w", err)
		}
		return net.JoinHostPort(host, n.String()), nil
	}
}

// versionAtLeast compares versions the way Kubernetes writes them
// ("v1.29.3", "1.29"): true when v >= minimum.
func versionAtLeast(v, minimum string) (bool, error) {
	have, err := semver.NewVersion(v)
	if err != nil {
		return false, fmt.Errorf("versionAtLeast: version %q: %w", v, err)
	}
	want, err := semver.NewVersion(minimum)
	if err != nil {
		return false, fmt.Errorf("versionAtLeast: minimum %q: %w", minimum, err)
	}
	return !have.LessThan(want), nil
}

// semverCompare is sprig's function, repeated for expressions.
func semverCompare(constraint, version string) (bool, error) {
	c, err := semver.NewConstraint(constraint)
	if err != nil {
		return false, fmt.Errorf("semverCompare: constraint %q: %w", constraint, err)
	}
	v, err := semver.NewVersion(version)
	if err != nil {
		return false, fmt.Errorf("semverCompare: version %q: %w", version, err)
	}
	return c.Check(v), nil
}

// toYAML drops the final newline like Helm's toYaml, so that
// `{{ .x | toYaml | nindent 4 }}` leaves no blank line.
func toYAML(v any) (string, error) {
	out, err := yaml.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("toYaml: %w", err)
	}
	return strings.TrimSuffix(string(out), "\n"), nil
}

func fromYAML(s string) (any, error) {
	// Its text is often a host's reply, which kubexm does not trust.
	// Aliases are expanded into plain values, so a handful of them is all
	// a reply may hold.
	limits := yamlguard.Limits{MaxBytes: 8 << 20, MaxDepth: 100, MaxAliases: 10}
	if err := yamlguard.Check([]byte(s), limits); err != nil {
		return nil, fmt.Errorf("fromYaml: %w", err)
	}
	var v any
	if err := yaml.Unmarshal([]byte(s), &v); err != nil {
		return nil, fmt.Errorf("fromYaml: %w", err)
	}
	return v, nil
}

func toBigInt(n any) (*big.Int, error) {
	rv := reflect.ValueOf(n)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return big.NewInt(rv.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return new(big.Int).SetUint64(rv.Uint()), nil
	case reflect.Float32, reflect.Float64:
		f := rv.Float()
		if f != float64(int64(f)) {
			return nil, fmt.Errorf("%v is not a whole number", f)
		}
		return big.NewInt(int64(f)), nil
	case reflect.String:
		i, ok := new(big.Int).SetString(strings.TrimSpace(rv.String()), 10)
		if !ok {
			return nil, fmt.Errorf("%q is not a number", rv.String())
		}
		return i, nil
	}
	return nil, fmt.Errorf("%T is not a number", n)
}

// The adapters below give the functions the shape expr-lang wants
// (func(...any) (any, error)); argument types are checked here because
// expressions are compiled without a typed environment.

func exprArgs(name string, params []any, want int) error {
	if len(params) != want {
		return fmt.Errorf("%s: want %d arguments, got %d", name, want, len(params))
	}
	return nil
}

func exprString(name string, params []any, i int) (string, error) {
	s, ok := params[i].(string)
	if !ok {
		return "", fmt.Errorf("%s: argument %d must be a string, got %s", name, i+1, TypeName(params[i]))
	}
	return s, nil
}

func strFunc1[R any](name string, fn func(string) (R, error)) func(...any) (any, error) {
	return func(params ...any) (any, error) {
		if err := exprArgs(name, params, 1); err != nil {
			return nil, err
		}
		a, err := exprString(name, params, 0)
		if err != nil {
			return nil, err
		}
		return fn(a)
	}
}

func strFunc2[R any](name string, fn func(string, string) (R, error)) func(...any) (any, error) {
	return func(params ...any) (any, error) {
		if err := exprArgs(name, params, 2); err != nil {
			return nil, err
		}
		a, err := exprString(name, params, 0)
		if err != nil {
			return nil, err
		}
		b, err := exprString(name, params, 1)
		if err != nil {
			return nil, err
		}
		return fn(a, b)
	}
}

func strAnyFunc(name string, fn func(string, any) (string, error)) func(...any) (any, error) {
	return func(params ...any) (any, error) {
		if err := exprArgs(name, params, 2); err != nil {
			return nil, err
		}
		a, err := exprString(name, params, 0)
		if err != nil {
			return nil, err
		}
		return fn(a, params[1])
	}
}

// TypeName names a value's type for messages in YAML terms.
func TypeName(v any) string {
	switch v.(type) {
	case nil:
		return "nil"
	case string:
		return "string"
	case bool:
		return "bool"
	case map[string]any:
		return "map"
	case []any:
		return "list"
	case int, int64, uint64, int32, uint32, int16, uint16, int8, uint8, uint:
		return "int"
	case float64, float32:
		return "float"
	}
	return fmt.Sprintf("%T", v)
}
