package schema

import (
	"fmt"

	"github.com/goccy/go-yaml"
)

//go:generate go run ./internal/gen -crd ../roles/cluster-resource/files/crd.yaml

// Resource returns the cluster as its Cluster resource holds it: Masked,
// and without the fields the resource's schema leaves out (crdSecretFields),
// which an API server refuses in a server-side apply.
func (c *Cluster) Resource() *Cluster {
	m := c.Masked()
	for i := range m.Spec.Hosts {
		h := &m.Spec.Hosts[i]
		h.Password, h.Passphrase, h.SudoPassword = "", "", ""
		if h.Bastion != nil {
			h.Bastion.Password, h.Bastion.Passphrase = "", ""
		}
	}
	if m.Spec.Bastion != nil {
		m.Spec.Bastion.Password, m.Spec.Bastion.Passphrase = "", ""
	}
	for k, a := range m.Spec.Registry.Auths {
		a.Password = ""
		m.Spec.Registry.Auths[k] = a
	}
	return m
}

// ResourceYAML is Resource as the YAML a server-side apply sends, without
// empty mappings (an unset section such as operator: {}). An API server
// that applies {} where this field manager's last field of that mapping
// was (spec.operator.enabled: true, then false) stores null, which the
// CRD's schema refuses ("must be of type object"); a mapping left out is
// removed with its fields instead.
func (c *Cluster) ResourceYAML() ([]byte, error) {
	out, err := Marshal(c.Resource())
	if err != nil {
		return nil, err
	}
	var doc yaml.MapSlice
	if err := yaml.UnmarshalWithOptions(out, &doc, yaml.UseOrderedMap()); err != nil {
		return nil, fmt.Errorf("the Cluster resource: %w", err)
	}
	if out, err = yaml.MarshalWithOptions(pruneEmptyMaps(doc), yaml.IndentSequence(true)); err != nil {
		return nil, fmt.Errorf("marshal the Cluster resource: %w", err)
	}
	return out, nil
}

// pruneEmptyMaps is v without the mappings that are empty, or become empty
// when theirs are left out (lists keep their items: an empty list may
// say something).
func pruneEmptyMaps(v any) any {
	switch x := v.(type) {
	case yaml.MapSlice:
		out := yaml.MapSlice{}
		for _, item := range x {
			val := pruneEmptyMaps(item.Value)
			if m, ok := val.(yaml.MapSlice); ok && len(m) == 0 {
				continue
			}
			out = append(out, yaml.MapItem{Key: item.Key, Value: val})
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, item := range x {
			out[i] = pruneEmptyMaps(item)
		}
		return out
	}
	return v
}
