package validate

import (
	"github.com/mensylisir/kubexm/schema"

	"fmt"
	"os"
	"strings"

	"github.com/mensylisir/kubexm/schema/internal/fieldpath"
	"github.com/mensylisir/kubexm/schema/internal/valid"
)

// validateAddons checks spec.addons: names, one source each, and that every
// file an add-on of the user's names is there, so that nothing runs before
// a missing manifest or chart is found. Whether a built-in name is installed
// is the support matrix's question (spec.addons[*]).
func validateAddons(c *schema.Cluster, ps *schema.Problems) {
	seen := map[string]string{}
	for i, a := range c.Spec.Addons {
		p := fieldpath.Index("spec.addons", i)
		name := strings.TrimSpace(a.Name)
		np := p
		if a.Sources != nil || a.Namespace != "" {
			np = fieldpath.Child(p, "name")
		}
		switch {
		case name == "":
			ps.Add(np, "e.g. name: my-addon", "an add-on needs a name")
		case a.Kind() != schema.AddonBuiltin && (len(name) > 53 || !valid.DNS1123Label.MatchString(name)):
			ps.Add(np, "lower-case letters, digits and -, at most 53 characters (a Helm release name)", "%q is not an add-on name", a.Name)
		case a.Kind() == schema.AddonBuiltin && !valid.IsDNS1123Subdomain(name):
			ps.Add(np, "lower-case letters, digits, - and .", "%q is not an add-on name", a.Name)
		}
		if first, dup := seen[name]; dup && name != "" {
			ps.Add(np, "each add-on once; give the second another name", "add-on %q is also %s", name, first)
		}
		seen[name] = p
		if a.Namespace != "" && !valid.DNS1123Label.MatchString(a.Namespace) {
			ps.Add(fieldpath.Child(p, "namespace"), "a namespace name: lower-case letters, digits and -", "%q is not a namespace name", a.Namespace)
		}
		if a.Sources == nil {
			continue
		}
		sp := fieldpath.Child(p, "sources")
		y, ch := a.Sources.Yaml, a.Sources.Chart
		switch {
		case y != nil && ch != nil:
			ps.Add(sp, "split it into two add-ons, one with yaml and one with chart", "an add-on has yaml or chart sources, not both")
			continue
		case y == nil && ch == nil:
			ps.Add(sp, "sources.yaml.path (manifests) or sources.chart.path (a Helm chart)", "an add-on's sources name yaml or chart")
			continue
		case y != nil:
			validateAddonYaml(c, ps, fieldpath.Child(sp, "yaml"), y)
		default:
			validateAddonChart(c, ps, fieldpath.Child(sp, "chart"), ch)
		}
	}
}

func validateAddonYaml(c *schema.Cluster, ps *schema.Problems, p string, y *schema.AddonYaml) {
	if len(y.Path) == 0 {
		ps.Add(fieldpath.Child(p, "path"), "a list of manifest files relative to the cluster file", "no manifests")
	}
	for j, f := range y.Path {
		fp := fieldpath.Index(fieldpath.Child(p, "path"), j)
		if strings.Contains(f, "://") {
			ps.Add(fp, "download it next to the cluster file and name the file: kubexm applies local files only (air-gapped)", "%q is a URL", f)
			continue
		}
		checkAddonFile(c, ps, fp, f, false, "a manifest file (YAML) relative to the cluster file")
	}
}

func validateAddonChart(c *schema.Cluster, ps *schema.Problems, p string, ch *schema.AddonChart) {
	if ch.Path == "" {
		hint := "path: a chart .tgz or directory relative to the cluster file"
		if ch.Repo != "" {
			hint = fmt.Sprintf("kubexm installs charts from local files (also offline): helm pull --repo %s %s", ch.Repo, ch.Name)
			if ch.Version != "" {
				hint += " --version " + ch.Version
			}
			hint += ", then set path to the .tgz"
		}
		ps.Add(fieldpath.Child(p, "path"), hint, "a chart add-on needs path")
	} else {
		checkAddonFile(c, ps, fieldpath.Child(p, "path"), ch.Path, true, "a chart: a packaged .tgz or a directory with Chart.yaml, relative to the cluster file")
	}
	if ch.ValuesFile != "" {
		checkAddonFile(c, ps, fieldpath.Child(p, "valuesFile"), ch.ValuesFile, false, "a YAML values file relative to the cluster file")
	}
	switch v := ch.Values.(type) {
	case nil, map[string]any:
	case []any:
		for j, e := range v {
			if s, ok := e.(string); !ok || !strings.Contains(s, "=") || strings.HasPrefix(s, "=") {
				ps.Add(fieldpath.Index(fieldpath.Child(p, "values"), j), "key=value in helm --set syntax, e.g. replicaCount=2", "not a key=value entry")
			}
		}
	default:
		ps.Add(fieldpath.Child(p, "values"), "a mapping of values, or a list of key=value entries", "expected a mapping or a list")
	}
}

// checkAddonFile wants f (relative to the cluster file) to exist: a regular
// file, or a directory when dirOK.
func checkAddonFile(c *schema.Cluster, ps *schema.Problems, p, f string, dirOK bool, hint string) {
	abs := c.ResolvePath(f)
	st, err := os.Stat(abs)
	switch {
	case err != nil:
		ps.Add(p, hint, "%s not found", abs)
	case st.IsDir() && !dirOK:
		ps.Add(p, hint, "%s is a directory", abs)
	case st.IsDir():
		if _, err := os.Stat(abs + "/Chart.yaml"); err != nil {
			ps.Add(p, hint, "%s has no Chart.yaml", abs)
		}
	}
}
