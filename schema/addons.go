package schema

// AddonPaths returns spec.addons[i]'s files resolved against the cluster
// file: the manifests, the chart and the values file.
func (c *Cluster) AddonPaths(a Addon) (manifests []string, chart, valuesFile string) {
	if a.Sources == nil {
		return nil, "", ""
	}
	if y := a.Sources.Yaml; y != nil {
		for _, f := range y.Path {
			manifests = append(manifests, c.ResolvePath(f))
		}
	}
	if ch := a.Sources.Chart; ch != nil {
		if ch.Path != "" {
			chart = c.ResolvePath(ch.Path)
		}
		if ch.ValuesFile != "" {
			valuesFile = c.ResolvePath(ch.ValuesFile)
		}
	}
	return manifests, chart, valuesFile
}
