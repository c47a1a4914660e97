package lifecycle

import (
	"fmt"

	"github.com/mensylisir/kubexm/schema/matrix"
	"github.com/mensylisir/kubexm/schema/sample"
	"github.com/mensylisir/kubexm/schema/validate"
)

// SampleConfig is the sample cluster file of kubexm create config: an
// all-in-one cluster named name on this machine, at the Kubernetes version
// version names (a patch of a minor the built-in support matrix lists, or
// the minor alone: its newest checked patch).
func SampleConfig(name, version string) (string, error) {
	s, err := matrix.BuiltinSupport()
	if err != nil {
		return "", err
	}
	if version, err = s.KubernetesVersion(version); err != nil {
		return "", err
	}
	if err := validate.CheckClusterName(name); err != nil {
		return "", fmt.Errorf("--name: %w", err)
	}
	return sample.Config(s, name, version, sample.LocalIPv4()), nil
}
