package operator

import (
	"encoding/json"
	"fmt"

	"github.com/Masterminds/semver/v3"
	"github.com/goccy/go-yaml"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigsyaml "sigs.k8s.io/yaml"

	kxschema "github.com/mensylisir/kubexm/schema"
)

// StatusOf is a Cluster object's status as the schema's type (which names
// its fields with yaml tags, as the CRD does).
func StatusOf(obj *unstructured.Unstructured) (kxschema.ClusterStatus, error) {
	st, err := kxschema.DecodeStatus(obj.Object["status"])
	if err != nil {
		return st, fmt.Errorf("%s: %w", obj.GetName(), err)
	}
	return st, nil
}

// SetStatus puts st into the object.
func SetStatus(obj *unstructured.Unstructured, st kxschema.ClusterStatus) error {
	data, err := yaml.Marshal(st)
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	js, err := sigsyaml.YAMLToJSON(data)
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(js, &m); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	// Unstructured content holds integers as int64.
	if g, ok := m["observedGeneration"].(float64); ok {
		m["observedGeneration"] = int64(g)
	}
	if cs, ok := m["conditions"].([]any); ok {
		for _, c := range cs {
			if cm, ok := c.(map[string]any); ok {
				if g, ok := cm["observedGeneration"].(float64); ok {
					cm["observedGeneration"] = int64(g)
				}
			}
		}
	}
	obj.Object["status"] = m
	return nil
}

func versionLess(a, b string) bool {
	va, errA := semver.NewVersion(a)
	vb, errB := semver.NewVersion(b)
	if errA != nil || errB != nil {
		return a < b
	}
	return va.LessThan(vb)
}
