package pki

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mensylisir/kubexm/engine/step"
)

const day = 24 * time.Hour

// ParseValidity reads a certificate lifetime: a Go duration ("8760h"), a
// whole or fractional number of days or years ("365d", "10y", "1.5y"), or a
// number of seconds. A year counts 365 days.
func ParseValidity(v any) (time.Duration, error) {
	s, ok := v.(string)
	if !ok {
		return step.ToDuration(v)
	}
	s = strings.TrimSpace(s)
	unit := map[byte]time.Duration{'d': day, 'y': 365 * day}
	if n := len(s); n > 1 {
		if u, ok := unit[s[n-1]]; ok {
			f, err := strconv.ParseFloat(s[:n-1], 64)
			if err != nil || f < 0 {
				return 0, fmt.Errorf("%q is not a duration such as \"8760h\", \"365d\" or \"10y\"", s)
			}
			return time.Duration(f * float64(u)), nil
		}
	}
	d, err := step.ToDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as \"8760h\", \"365d\" or \"10y\"", s)
	}
	return d, nil
}

// formatDuration prints whole days as "30d" and anything else as Go does.
func formatDuration(d time.Duration) string {
	if d > 0 && d%day == 0 {
		return fmt.Sprintf("%dd", d/day)
	}
	return d.String()
}
