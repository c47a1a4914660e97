package validate

import (
	"errors"
	"fmt"
	"io"

	"github.com/mensylisir/kubexm/schema"
)

// Validation is the verdict on a cluster file for programs (config
// validate -o json|yaml): every problem and warning at its place, and
// what the file describes when it is valid.
type Validation struct {
	File     string        `json:"file"`
	Valid    bool          `json:"valid"`
	Cluster  *ValidCluster `json:"cluster,omitempty"`
	Problems []Finding     `json:"problems"`
	Warnings []Finding     `json:"warnings"`
}

// ValidCluster is what a valid cluster file describes.
type ValidCluster struct {
	Name              string `json:"name"`
	Hosts             int    `json:"hosts"`
	KubernetesVersion string `json:"kubernetesVersion"`
	KubernetesType    string `json:"kubernetesType"`
	EtcdType          string `json:"etcdType"`
	NetworkPlugin     string `json:"networkPlugin"`
}

// Write prints the verdict on a valid file for people: what it describes
// (an invalid file's problems are its error, its warnings are printed as
// they are read).
func (v *Validation) Write(w io.Writer) error {
	c := v.Cluster
	_, err := fmt.Fprintf(w, "%s: valid: cluster %s, %d hosts, Kubernetes %s (%s), etcd %s, %s\n",
		v.File, c.Name, c.Hosts, c.KubernetesVersion, c.KubernetesType, c.EtcdType, c.NetworkPlugin)
	return err
}

// Finding is a problem or a warning: file, line and column (0 for a
// defaulted value), the field and what is wrong.
type Finding struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Col     int    `json:"col"`
	Path    string `json:"path,omitempty"`
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
}

// NewValidation is the verdict on file from what loading it gave (c, its
// warnings and loadErr). A loadErr that is not about the file's content
// (unreadable, no such file) gives no verdict: it is returned.
func NewValidation(file string, c *schema.Cluster, warnings []schema.Warning, loadErr error) (*Validation, error) {
	v := &Validation{File: file, Valid: loadErr == nil, Problems: []Finding{}, Warnings: []Finding{}}
	for _, x := range warnings {
		v.Warnings = append(v.Warnings, Finding{File: x.Pos.File, Line: x.Pos.Line, Col: x.Pos.Col, Path: x.Path, Message: x.Message})
	}
	var problems *schema.Error
	switch {
	case errors.As(loadErr, &problems):
		for _, p := range problems.Problems {
			v.Problems = append(v.Problems, Finding{File: p.Pos.File, Line: p.Pos.Line, Col: p.Pos.Col, Path: p.Path, Message: p.Message, Hint: p.Hint})
		}
	case loadErr != nil:
		return nil, loadErr
	default:
		v.Cluster = &ValidCluster{Name: c.Metadata.Name, Hosts: len(c.Spec.Hosts), KubernetesVersion: c.Spec.Kubernetes.Version,
			KubernetesType: c.Spec.Kubernetes.Type, EtcdType: c.Spec.Etcd.Type, NetworkPlugin: c.Spec.Network.Plugin}
	}
	return v, nil
}
