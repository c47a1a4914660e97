package schema

import (
	"fmt"
	"os"
	"strings"
)

// validateAddons checks spec.addons: names, one source each, and that every
// file an add-on of the user's names is there, so that nothing runs before
// a missing manifest or chart is found. Whether a built-in name is installed
// is the support matrix's question (spec.addons[*]).
func validateAddons(c *Cluster, ps *problems) {
	seen := map[string]string{}
	for i, a := range c.Spec.Addons {
		p := index("spec.addons", i)
		name := strings.TrimSpace(a.Name)
		np := p
		if a.Sources != nil || a.Namespace != "" {
			np = child(p, "name")
		}
		switch {
		case name == "":
			ps.add(np, "e.g. name: my-addon", "an add-on needs a name")
		case a.Kind() != AddonBuiltin && (len(name) > 53 || !dns1123Label.MatchString(name)):
			ps.add(np, "lower-case letters, digits and -, at most 53 characters (a Helm release name)", "%q is not an add-on name", a.Name)
		case a.Kind() == AddonBuiltin && !isDNS1123Subdomain(name):
			ps.add(np, "lower-case letters, digits, - and .", "%q is not an add-on name", a.Name)
		}
		if first, dup := seen[name]; dup && name != "" {
			ps.add(np, "each add-on once; give the second another name", "add-on %q is also %s", name, first)
		}
		seen[name] = p
		if a.Namespace != "" && !dns1123Label.MatchString(a.Namespace) {
			ps.add(child(p, "namespace"), "a namespace name: lower-case letters, digits and -", "%q is not a namespace name", a.Namespace)
		}
		if a.Sources == nil {
			continue
		}
		sp := child(p, "sources")
		y, ch := a.Sources.Yaml, a.Sources.Chart
		switch {
		case y != nil && ch != nil:
			ps.add(sp, "split it into two add-ons, one with yaml and one with chart", "an add-on has yaml or chart sources, not both")
			continue
		case y == nil && ch == nil:
			ps.add(sp, "sources.yaml.path (manifests) or sources.chart.path (a Helm chart)", "an add-on's sources name yaml or chart")
			continue
		case y != nil:
			c.validateAddonYaml(ps, child(sp, "yaml"), y)
		default:
			c.validateAddonChart(ps, child(sp, "chart"), ch)
		}
	}
}

func (c *Cluster) validateAddonYaml(ps *problems, p string, y *AddonYaml) {
	if len(y.Path) == 0 {
		ps.add(child(p, "path"), "a list of manifest files relative to the cluster file", "no manifests")
	}
	for j, f := range y.Path {
		fp := index(child(p, "path"), j)
		if strings.Contains(f, "://") {
			ps.add(fp, "download it next to the cluster file and name the file: kubexm applies local files only (air-gapped)", "%q is a URL", f)
			continue
		}
		c.checkAddonFile(ps, fp, f, false, "a manifest file (YAML) relative to the cluster file")
	}
}

func (c *Cluster) validateAddonChart(ps *problems, p string, ch *AddonChart) {
	if ch.Path == "" {
		hint := "path: a chart .tgz or directory relative to the cluster file"
		if ch.Repo != "" {
			hint = fmt.Sprintf("kubexm installs charts from local files (also offline): helm pull --repo %s %s", ch.Repo, ch.Name)
			if ch.Version != "" {
				hint += " --version " + ch.Version
			}
			hint += ", then set path to the .tgz"
		}
		ps.add(child(p, "path"), hint, "a chart add-on needs path")
	} else {
		c.checkAddonFile(ps, child(p, "path"), ch.Path, true, "a chart: a packaged .tgz or a directory with Chart.yaml, relative to the cluster file")
	}
	if ch.ValuesFile != "" {
		c.checkAddonFile(ps, child(p, "valuesFile"), ch.ValuesFile, false, "a YAML values file relative to the cluster file")
	}
	switch v := ch.Values.(type) {
	case nil, map[string]any:
	case []any:
		for j, e := range v {
			if s, ok := e.(string); !ok || !strings.Contains(s, "=") || strings.HasPrefix(s, "=") {
				ps.add(index(child(p, "values"), j), "key=value in helm --set syntax, e.g. replicaCount=2", "not a key=value entry")
			}
		}
	default:
		ps.add(child(p, "values"), "a mapping of values, or a list of key=value entries", "expected a mapping or a list")
	}
}

// checkAddonFile wants f (relative to the cluster file) to exist: a regular
// file, or a directory when dirOK.
func (c *Cluster) checkAddonFile(ps *problems, p, f string, dirOK bool, hint string) {
	abs := c.resolvePath(f)
	st, err := os.Stat(abs)
	switch {
	case err != nil:
		ps.add(p, hint, "%s not found", abs)
	case st.IsDir() && !dirOK:
		ps.add(p, hint, "%s is a directory", abs)
	case st.IsDir():
		if _, err := os.Stat(abs + "/Chart.yaml"); err != nil {
			ps.add(p, hint, "%s has no Chart.yaml", abs)
		}
	}
}

// AddonPaths returns spec.addons[i]'s files resolved against the cluster
// file: the manifests, the chart and the values file.
func (c *Cluster) addonPaths(a Addon) (manifests []string, chart, valuesFile string) {
	if a.Sources == nil {
		return nil, "", ""
	}
	if y := a.Sources.Yaml; y != nil {
		for _, f := range y.Path {
			manifests = append(manifests, c.resolvePath(f))
		}
	}
	if ch := a.Sources.Chart; ch != nil {
		if ch.Path != "" {
			chart = c.resolvePath(ch.Path)
		}
		if ch.ValuesFile != "" {
			valuesFile = c.resolvePath(ch.ValuesFile)
		}
	}
	return manifests, chart, valuesFile
}
