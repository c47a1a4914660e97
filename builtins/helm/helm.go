// Package helm is the helm builtin: a Helm chart installed, upgraded or
// uninstalled with the Helm SDK (helm.sh/helm/v3) from the control machine,
// never with a helm binary.
//
// It is a package of its own so that only what registers the builtins
// (builtins.All) compiles the SDK and the Kubernetes client libraries it
// brings; the other builtins' tests do not.
package helm

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/mensylisir/kubexm/engine/step"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/kube"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	"helm.sh/helm/v3/pkg/strvals"
)

// ManagedLabel marks the releases this builtin installed (a label of Helm's
// release record): state absent uninstalls only those, so a release of the
// same name that someone installed with helm is left alone.
const ManagedLabel = "managed-by-kubexm"

// configFunc makes the Helm action configuration for one namespace; tests
// give one with Helm's in-memory storage and a fake Kubernetes client.
type configFunc func(kubeconfig, namespace string, logf func(string, ...any)) (*action.Configuration, error)

// Builtins returns the builtins of this package.
func Builtins() []step.Builtin { return []step.Builtin{Builtin{}} }

// Builtin is the helm step type. Its zero value talks to the cluster of the
// kubeconfig.
type Builtin struct {
	newConfig configFunc
}

// Spec documents the builtin.
func (Builtin) Spec() step.Spec {
	return step.Spec{
		Name:    "helm",
		Summary: "Install, upgrade or uninstall a Helm chart with the Helm SDK, from the control machine",
		Doc: `Installs a chart (a chart directory or a packaged .tgz on the control
machine) as a Helm release, or upgrades the release, or uninstalls it
(state absent). It runs in the kubexm process on the control machine with the
Helm SDK (helm.sh/helm/v3; no helm binary anywhere) against the API server of
` + "`kubeconfig`" + `, and records the release as helm does (a Secret in the
release's namespace), so ` + "`helm list`" + ` shows it.

Values are merged as helm merges them: the chart's values.yaml, then each of
` + "`values_files`" + ` in order, then ` + "`values`" + ` (a mapping), then each
` + "`set`" + ` entry (helm's --set syntax, a.b=c). A release is installed when
there is none, and upgraded when the chart (name, version, templates, default
values, files) or the merged values differ from its last deployed revision, or
when that revision did not deploy; otherwise nothing is done and the task is
unchanged, so a second run reports 0 changed. Values are never printed: the
diff names the chart versions and says whether the values changed.

Under --check nothing is installed: the last revision is read (when the
kubeconfig exists) and the task reports what it would do. state absent
uninstalls only a release this builtin installed (the label ` + "`" + ManagedLabel + "`" + ` on
Helm's release record); a release someone else installed is reported and left.

Relative paths (chart, values_files, kubeconfig) are taken from the cluster's
work directory. Results: ` + "`release`, `namespace`, `revision`, `chart`, `version`, `status`" + `.`,
		Control: true,
		Args: []step.Arg{
			{Name: "chart", Type: step.String, Doc: "A chart directory or a packaged chart (.tgz) on the control machine; required unless state is absent."},
			{Name: "release", Type: step.String, Required: true, Doc: "Release name (a DNS-1123 label, at most 53 characters)."},
			{Name: "namespace", Type: step.String, Default: "default", Doc: "Namespace of the release and of the chart's namespaced objects."},
			{Name: "create_namespace", Type: step.Bool, Default: true, Doc: "Create the namespace when it does not exist (never deleted)."},
			{Name: "chart_name", Type: step.String, Doc: "When set, the chart must have this name (refused otherwise)."},
			{Name: "chart_version", Type: step.String, Doc: "When set, the chart must have this version (refused otherwise)."},
			{Name: "values", Type: step.Any, Doc: "Values over the chart's and values_files': a mapping, or a list of key=value entries taken as set entries (KubeKey's form)."},
			{Name: "values_files", Type: step.List, Doc: "YAML values files on the control machine, merged in order; empty entries are skipped."},
			{Name: "set", Type: step.List, Doc: "helm --set entries (key=value, a.b[0]=c), applied last."},
			{Name: "state", Type: step.String, Default: "present", Choices: []string{"present", "absent"}, Doc: "present installs or upgrades; absent uninstalls a release this builtin installed."},
			{Name: "kubeconfig", Type: step.String, Default: "kubeconfig", Doc: "The admin kubeconfig on the control machine (relative: in the work directory)."},
			{Name: "wait", Type: step.Bool, Default: true, Doc: "Wait until the release's Deployments, DaemonSets, StatefulSets and Pods are ready (and for the deletion when absent)."},
			{Name: "timeout", Type: step.Duration, Default: "5m", Doc: "How long an install, upgrade or uninstall may take."},
		},
		Examples: []string{`helm:
  chart: /srv/charts/ingress-nginx-4.11.3.tgz
  release: ingress-nginx
  namespace: ingress-nginx
  values_files: [/srv/values/ingress.yaml]
  set: ["controller.replicaCount=2"]
run_once: true`},
	}
}

// request is one task's arguments, checked.
type request struct {
	chart, release, namespace, kubeconfig string
	chartName, chartVersion               string
	createNamespace, wait, absent         bool
	timeout                               time.Duration
	values                                map[string]any
	valuesFiles, set                      []string
}

func (b Builtin) parse(env *step.Env, args step.Args) (*request, error) {
	r := &request{
		chart:           workPath(env, args.String("chart")),
		release:         args.String("release"),
		namespace:       cmp.Or(args.String("namespace"), "default"),
		kubeconfig:      workPath(env, cmp.Or(args.String("kubeconfig"), "kubeconfig")),
		createNamespace: args.Bool("create_namespace"),
		wait:            args.Bool("wait"),
		absent:          args.String("state") == "absent",
		timeout:         cmp.Or(args.Duration("timeout"), 5*time.Minute),
		chartName:       args.String("chart_name"),
		chartVersion:    args.String("chart_version"),
	}
	switch v := args["values"].(type) {
	case nil:
	case string:
		// A template of an absent value renders empty.
		if v != "" {
			return nil, fmt.Errorf("values: a mapping or a list of key=value entries, not the string %q", "...")
		}
	case map[string]any:
		r.values = v
	case []any:
		r.set = args.Strings("values")
	default:
		return nil, fmt.Errorf("values: a mapping or a list of key=value entries, not %T", v)
	}
	r.set = append(r.set, args.Strings("set")...)
	for _, f := range args.Strings("values_files") {
		if f != "" {
			r.valuesFiles = append(r.valuesFiles, workPath(env, f))
		}
	}
	if err := chartutil.ValidateReleaseName(r.release); err != nil {
		return nil, fmt.Errorf("release %q: %w (lower-case letters, digits and -, at most 53 characters)", r.release, err)
	}
	if !r.absent && args.String("chart") == "" {
		return nil, errors.New("chart is required: a chart directory or a .tgz on the control machine")
	}
	return r, nil
}

// workPath makes a relative path one in the work directory.
func workPath(env *step.Env, p string) string {
	if p == "" || filepath.IsAbs(p) || env.WorkDir == "" {
		return p
	}
	return filepath.Join(env.WorkDir, p)
}

// Run installs, upgrades or uninstalls the release.
func (b Builtin) Run(ctx context.Context, env *step.Env, args step.Args) (step.Result, error) {
	r, err := b.parse(env, args)
	if err != nil {
		return step.Result{}, err
	}
	if r.absent {
		return b.uninstall(env, r)
	}
	ch, err := loader.Load(r.chart)
	if err != nil {
		return step.Result{}, fmt.Errorf("chart %s: %w", r.chart, err)
	}
	if r.chartName != "" && ch.Metadata.Name != r.chartName || r.chartVersion != "" && ch.Metadata.Version != r.chartVersion {
		return step.Result{}, fmt.Errorf("chart %s is %s %s, not %s %s as asked", r.chart, ch.Metadata.Name, ch.Metadata.Version,
			cmp.Or(r.chartName, ch.Metadata.Name), cmp.Or(r.chartVersion, ch.Metadata.Version))
	}
	vals, err := r.mergedValues()
	if err != nil {
		return step.Result{}, err
	}
	data := map[string]any{"release": r.release, "namespace": r.namespace, "chart": ch.Metadata.Name, "version": ch.Metadata.Version}
	if env.Check {
		if _, err := os.Stat(r.kubeconfig); errors.Is(err, fs.ErrNotExist) {
			return step.Result{Changed: true, Msg: fmt.Sprintf("would install %s %s as %s (no kubeconfig %s yet)", ch.Metadata.Name, ch.Metadata.Version, r.release, r.kubeconfig), Data: data}, nil
		}
	}
	cfg, last, err := b.current(env, r)
	if err != nil {
		return step.Result{}, err
	}
	why, err := upgradeReason(last, ch, vals)
	if err != nil {
		return step.Result{}, err
	}
	if why == "" {
		data["revision"], data["status"] = last.Version, last.Info.Status.String()
		return step.Result{Msg: fmt.Sprintf("%s %s is deployed as %s revision %d", ch.Metadata.Name, ch.Metadata.Version, r.release, last.Version), Data: data}, nil
	}
	diff := ""
	if env.Diff {
		diff = describeChange(r.release, last, ch, why)
	}
	if env.Check {
		verb := "upgrade"
		if last == nil {
			verb = "install"
		}
		return step.Result{Changed: true, Msg: fmt.Sprintf("would %s %s: %s", verb, r.release, why), Diff: diff, Data: data}, nil
	}
	labels := map[string]string{ManagedLabel: "true"}
	var rel *release.Release
	if last == nil {
		in := action.NewInstall(cfg)
		in.ReleaseName, in.Namespace, in.CreateNamespace = r.release, r.namespace, r.createNamespace
		in.Wait, in.Timeout, in.Labels = r.wait, r.timeout, labels
		rel, err = in.RunWithContext(ctx, ch, vals)
	} else {
		up := action.NewUpgrade(cfg)
		up.Namespace, up.Wait, up.Timeout, up.Labels = r.namespace, r.wait, r.timeout, labels
		// The values are the whole set each time, as cluster.yaml says.
		up.ResetValues = true
		up.MaxHistory = 10
		rel, err = up.RunWithContext(ctx, r.release, ch, vals)
	}
	if err != nil {
		return step.Result{}, fmt.Errorf("%s %s as %s in %s: %w", ch.Metadata.Name, ch.Metadata.Version, r.release, r.namespace, err)
	}
	data["revision"], data["status"] = rel.Version, rel.Info.Status.String()
	return step.Result{Changed: true, Msg: fmt.Sprintf("%s %s deployed as %s revision %d (%s)", ch.Metadata.Name, ch.Metadata.Version, r.release, rel.Version, why), Diff: diff, Data: data}, nil
}

func (b Builtin) uninstall(env *step.Env, r *request) (step.Result, error) {
	data := map[string]any{"release": r.release, "namespace": r.namespace}
	if _, err := os.Stat(r.kubeconfig); errors.Is(err, fs.ErrNotExist) {
		return step.Result{Msg: fmt.Sprintf("no kubeconfig %s: no cluster to remove %s from", r.kubeconfig, r.release), Data: data}, nil
	}
	cfg, last, err := b.current(env, r)
	if err != nil {
		return step.Result{}, err
	}
	if last == nil {
		return step.Result{Msg: fmt.Sprintf("no release %s in %s", r.release, r.namespace), Data: data}, nil
	}
	if last.Labels[ManagedLabel] != "true" {
		return step.Result{Msg: fmt.Sprintf("release %s in %s was not installed by kubexm (no %s label): left alone", r.release, r.namespace, ManagedLabel), Data: data}, nil
	}
	if env.Check {
		return step.Result{Changed: true, Msg: fmt.Sprintf("would uninstall %s from %s", r.release, r.namespace), Data: data}, nil
	}
	un := action.NewUninstall(cfg)
	un.Wait, un.Timeout, un.IgnoreNotFound = r.wait, r.timeout, true
	if _, err := un.Run(r.release); err != nil {
		return step.Result{}, fmt.Errorf("uninstall %s from %s: %w", r.release, r.namespace, err)
	}
	return step.Result{Changed: true, Msg: fmt.Sprintf("uninstalled %s from %s", r.release, r.namespace), Data: data}, nil
}

func (b Builtin) config(env *step.Env, kubeconfig, namespace string) (*action.Configuration, error) {
	logf := func(string, ...any) {}
	if env.Logf != nil {
		logf = env.Logf
	}
	if b.newConfig != nil {
		return b.newConfig(kubeconfig, namespace, logf)
	}
	if _, err := os.Stat(kubeconfig); err != nil {
		return nil, fmt.Errorf("kubeconfig: %w (the admin kubeconfig kubexm writes into the work directory when it creates the cluster)", err)
	}
	cfg := new(action.Configuration)
	if err := cfg.Init(kube.GetConfig(kubeconfig, "", namespace), namespace, "secret", logf); err != nil {
		return nil, fmt.Errorf("helm configuration for %s: %w", kubeconfig, err)
	}
	return cfg, nil
}

// current is the Helm configuration of the release's namespace and the
// release's newest revision (nil when there is none).
func (b Builtin) current(env *step.Env, r *request) (*action.Configuration, *release.Release, error) {
	cfg, err := b.config(env, r.kubeconfig, r.namespace)
	if err != nil {
		return nil, nil, err
	}
	last, err := lastRelease(cfg, r.release)
	if err != nil {
		return nil, nil, fmt.Errorf("release %s in %s: %w", r.release, r.namespace, err)
	}
	return cfg, last, nil
}

// lastRelease is the newest revision of a release, nil when there is none.
func lastRelease(cfg *action.Configuration, name string) (*release.Release, error) {
	h, err := cfg.Releases.History(name)
	if errors.Is(err, driver.ErrReleaseNotFound) || err == nil && len(h) == 0 {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	slices.SortFunc(h, func(a, b *release.Release) int { return b.Version - a.Version })
	return h[0], nil
}

// mergedValues merges values_files, values and set in helm's order.
func (r *request) mergedValues() (map[string]any, error) {
	out := map[string]any{}
	for _, f := range r.valuesFiles {
		v, err := chartutil.ReadValuesFile(f)
		if err != nil {
			return nil, fmt.Errorf("values file %s: %w", f, err)
		}
		out = mergeMaps(out, v)
	}
	// A deep copy through JSON: helm keeps the values it is given in the
	// release, and the task's map belongs to the engine.
	inline, err := normalize(r.values)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	out = mergeMaps(out, inline)
	for i, s := range r.set {
		// The entry may hold a secret: the error names its position only.
		if err := strvals.ParseInto(s, out); err != nil {
			return nil, fmt.Errorf("set[%d]: not key=value in helm's --set syntax", i)
		}
	}
	return out, nil
}

// mergeMaps merges b into a, the maps recursively (helm's rule).
func mergeMaps(a, b map[string]any) map[string]any {
	out := make(map[string]any, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		if vm, ok := v.(map[string]any); ok {
			if am, ok := out[k].(map[string]any); ok {
				out[k] = mergeMaps(am, vm)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// normalize gives values the shape a release stored by helm has (JSON
// numbers, map[string]any), so that they compare with it.
func normalize(v map[string]any) (map[string]any, error) {
	if len(v) == 0 {
		return map[string]any{}, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// upgradeReason says why the release must be installed or upgraded, or ""
// when its last revision is deployed with this chart and these values.
func upgradeReason(last *release.Release, ch *chart.Chart, vals map[string]any) (string, error) {
	if last == nil {
		return "not installed", nil
	}
	if last.Info == nil || last.Info.Status != release.StatusDeployed {
		status := "unknown"
		if last.Info != nil {
			status = last.Info.Status.String()
		}
		return fmt.Sprintf("revision %d is %s", last.Version, status), nil
	}
	want, err := chartDigest(ch)
	if err != nil {
		return "", err
	}
	have, err := chartDigest(last.Chart)
	if err != nil {
		return "", err
	}
	var reasons []string
	if want != have {
		reasons = append(reasons, "the chart changed")
	}
	a, err := normalize(vals)
	if err != nil {
		return "", err
	}
	b, err := normalize(last.Config)
	if err != nil {
		return "", err
	}
	if !reflect.DeepEqual(a, b) {
		reasons = append(reasons, "the values changed")
	}
	return strings.Join(reasons, ", "), nil
}

// chartDigest hashes what a chart installs: its metadata, templates,
// default values, schema and files, as Helm stores them in a release (the
// subcharts are not stored there, so a change of a subchart alone needs a
// new chart version to be noticed).
func chartDigest(ch *chart.Chart) (string, error) {
	if ch == nil {
		return "", nil
	}
	type file struct {
		Name string `json:"name"`
		Data []byte `json:"data"`
	}
	files := func(fs []*chart.File) []file {
		out := make([]file, 0, len(fs))
		for _, f := range fs {
			out = append(out, file{f.Name, f.Data})
		}
		slices.SortFunc(out, func(a, b file) int { return strings.Compare(a.Name, b.Name) })
		return out
	}
	b, err := json.Marshal(struct {
		Metadata  *chart.Metadata `json:"metadata"`
		Templates []file          `json:"templates"`
		Values    map[string]any  `json:"values"`
		Schema    []byte          `json:"schema"`
		Files     []file          `json:"files"`
	}{ch.Metadata, files(ch.Templates), ch.Values, ch.Schema, files(ch.Files)})
	if err != nil {
		return "", fmt.Errorf("chart %s: %w", ch.Name(), err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// describeChange is the --diff text: versions and what changed, never the
// values themselves.
func describeChange(name string, last *release.Release, ch *chart.Chart, why string) string {
	to := ch.Metadata.Name + "-" + ch.Metadata.Version
	if last == nil {
		return fmt.Sprintf("release %s: install %s\n", name, to)
	}
	from := "?"
	if last.Chart != nil && last.Chart.Metadata != nil {
		from = last.Chart.Metadata.Name + "-" + last.Chart.Metadata.Version
	}
	return fmt.Sprintf("release %s: revision %d %s -> %s (%s)\n", name, last.Version, from, to, why)
}
