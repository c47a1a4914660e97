//go:build e2e

package e2e

// Issue 50's OS packages in the offline bundle: the os role's packages a
// machine lacks come from the bundle's set for its release (roles/artifacts
// exports it, roles/bundle-packages installs from it), and preflight
// refuses an offline run the bundle cannot serve. The HA suite proves it on
// machines (haOSPackagesVars, checkBundleOSPackages,
// checkOSPackagesFromBundle); the tests here render the defaults and the
// preflight check without machines.

import (
	"context"
	"encoding/base64"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/test/testhosts"
)

// haOSPackagesMissing are os role packages (os_packages_deb) the test
// machines' image does not have (test/hosts/prepare-rootfs.sh's INCLUDE).
var haOSPackagesMissing = []string{"socat", "conntrack", "ipset", "ebtables"}

// haOSPackagesVars: the os role's list for the HA suite, the machines'
// own packages plus haOSPackagesMissing, and the same list for the bundle
// (clusterTestVars leaves the os role's packages out of other suites'
// bundles).
func haOSPackagesVars() string {
	list := `"` + strings.Join(append([]string{"iptables", "iproute2", "kmod", "procps", "curl"}, haOSPackagesMissing...), `", "`) + `"`
	return `{"os_packages": [` + list + `], "os_bundle_packages": [` + list + `]}`
}

// checkBundleOSPackages: the bundle's package set has one index whose
// entries are unique, each naming a file the bundle has (and every .deb is
// in the index), and the index has every package of want.
func checkBundleOSPackages(ctx context.Context, t *testing.T, bundle, list string, want []string) {
	t.Helper()
	_, index := bundleEntries(t, bundle, "packages/*/amd64/Packages")
	names, files, err := packagesIndex(string(index))
	if err != nil {
		t.Fatalf("the bundle's Packages index: %v", err)
	}
	debs := regexp.MustCompile(`(?m)^(?:\./)?packages/[a-z]+[0-9.]*/amd64/([^/]+\.deb)$`).FindAllStringSubmatch(list, -1)
	var inBundle []string
	for _, m := range debs {
		inBundle = append(inBundle, m[1])
	}
	slices.Sort(inBundle)
	if d := slices.Compact(slices.Clone(inBundle)); len(d) != len(inBundle) {
		t.Errorf("the bundle has a .deb twice: %d entries, %d files", len(inBundle), len(d))
	}
	slices.Sort(files)
	if !slices.Equal(files, inBundle) {
		t.Errorf("the index names %d files, the bundle has %d .deb files:\nindex:  %v\nbundle: %v", len(files), len(inBundle), files, inBundle)
	}
	for _, p := range want {
		if !slices.Contains(names, p) {
			t.Errorf("the bundle's index has no %s (it has %v)", p, names)
		}
	}
	t.Logf("the bundle's package set: %d packages in one index (%s among them)", len(names), strings.Join(want, ", "))
}

// packagesIndex reads a flat repository's Packages index: the package names
// and the files, an error when a package or a file is there twice.
func packagesIndex(index string) (names, files []string, err error) {
	for _, l := range strings.Split(index, "\n") {
		switch {
		case strings.HasPrefix(l, "Package: "):
			n := strings.TrimPrefix(l, "Package: ")
			if slices.Contains(names, n) {
				return nil, nil, fmt.Errorf("package %s is in the index twice", n)
			}
			names = append(names, n)
		case strings.HasPrefix(l, "Filename: "):
			f := strings.TrimPrefix(strings.TrimPrefix(l, "Filename: "), "./")
			if slices.Contains(files, f) {
				return nil, nil, fmt.Errorf("file %s is in the index twice", f)
			}
			files = append(files, f)
		}
	}
	if len(names) == 0 || len(names) != len(files) {
		return nil, nil, fmt.Errorf("%d packages and %d files in the index", len(names), len(files))
	}
	return names, files, nil
}

// checkOSPackagesFromBundle: every machine, which lacked
// haOSPackagesMissing and has no network but the test bridge, has them
// installed (so from the bundle), recorded as kubexm's for the delete,
// and their commands run.
func checkOSPackagesFromBundle(ctx context.Context, t *testing.T, set *testhosts.Set) {
	t.Helper()
	for _, h := range set.Hosts {
		out, err := set.SSH(ctx, h.Name, `for p in `+strings.Join(haOSPackagesMissing, " ")+`; do
  dpkg-query -W -f='${Package} ${Status}\n' "$p" 2>&1
  grep -qx "$p" /var/lib/kubexm/os-backup/packages && echo "$p recorded"
done
socat -V >/dev/null && conntrack --version >/dev/null && ipset --version >/dev/null && ebtables --version >/dev/null && echo commands run`)
		if err != nil {
			t.Fatalf("the os role's packages on %s: %v\n%s", h.Name, err, out)
		}
		for _, p := range haOSPackagesMissing {
			if !strings.Contains(out, p+" install ok installed") || !strings.Contains(out, p+" recorded") {
				t.Errorf("%s: %s not installed from the bundle and recorded:\n%s", h.Name, p, out)
			}
		}
		if !strings.Contains(out, "commands run") {
			t.Errorf("%s: the packages' commands do not run:\n%s", h.Name, out)
		}
	}
	t.Logf("%s installed from the bundle on all %d machines", strings.Join(haOSPackagesMissing, ", "), len(set.Hosts))
}

func TestPackagesIndex(t *testing.T) {
	good := "Package: socat\nVersion: 1\nFilename: ./socat_1_amd64.deb\n\nPackage: libwrap0\nFilename: ./libwrap0_7_amd64.deb\n\n"
	names, files, err := packagesIndex(good)
	if err != nil || strings.Join(names, ",") != "socat,libwrap0" || strings.Join(files, ",") != "socat_1_amd64.deb,libwrap0_7_amd64.deb" {
		t.Errorf("got %v %v %v", names, files, err)
	}
	for _, bad := range []string{good + good, "", "Package: socat\n"} {
		if _, _, err := packagesIndex(bad); err == nil {
			t.Errorf("no error for %q", bad)
		}
	}
}

// TestOSBundlePackagesDefault: the bundle carries the os role's .deb list
// (its defaults or os_packages, with spec.system.debs) and chrony when
// ntpServers is set, each once.
func TestOSBundlePackagesDefault(t *testing.T) {
	for _, tc := range []struct {
		name   string
		adjust func(spec map[string]any)
		vars   map[string]any
		want   string
	}{
		{"defaults", nil, nil, "curl socat conntrack ebtables ipset ipvsadm nfs-common open-iscsi bash-completion"},
		{"spec debs and chrony", func(s map[string]any) {
			s["system"] = map[string]any{"debs": []any{"jq", "socat"}, "ntpServers": []any{"pool.ntp.org"}}
		}, nil, "curl socat conntrack ebtables ipset ipvsadm nfs-common open-iscsi bash-completion jq chrony"},
		{"os_packages", nil, map[string]any{"os_packages": []any{"socat", "ipset"}}, "socat ipset"},
	} {
		v := kubeVars("n1", tc.adjust)
		for k, val := range tc.vars {
			v[k] = val
		}
		v = withDefaults(t, "os", v)
		var got []string
		for _, p := range v["os_bundle_packages"].([]any) {
			got = append(got, fmt.Sprint(p))
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%s: os_bundle_packages %v, want %s", tc.name, got, tc.want)
		}
	}
}

// bundleArtifacts are a bundle's artifacts as manifest.json lists them:
// package sets by file name (conntrack's version has an epoch, as apt-get
// download writes it), their indexes, and, last, an artifact that is no
// package.
func bundleArtifacts() []string {
	var arts []string
	for _, a := range []string{"packages debian12 Packages", "packages debian12 socat_1.7.4.4-2_amd64.deb", "packages debian12 libwrap0_7.6.q-32_amd64.deb",
		"packages debian12 conntrack_1%3a1.4.7-1+b2_amd64.deb", "packages debian12 haproxy_2.6.12-1+deb12u2_amd64.deb",
		"packages ubuntu24.04 Packages", "packages ubuntu24.04 socat_1.8.0.0-4build3_amd64.deb", "etcd v3.6.16 etcd-v3.6.16-linux-amd64.tar.gz"} {
		f := strings.Fields(a)
		arts = append(arts, fmt.Sprintf(`{"component": %q, "version": %q, "arch": "amd64", "file": %q}`, f[0], f[1], f[2]))
	}
	return arts
}

// slurpedManifest is a manifest.json of artifacts as slurp registers it.
func slurpedManifest(artifacts ...string) map[string]any {
	m := `{"format": "kubexm-offline-bundle", "artifacts": [` + strings.Join(artifacts, ", ") + `]}`
	return map[string]any{"exists": true, "content": base64.StdEncoding.EncodeToString([]byte(m))}
}

// TestBundlePackagesSets renders roles/bundle-packages' reading of the
// bundle's manifest: a host's release gets its set's files, index
// included; a release without a set gets none and a message naming the
// sets there are.
func TestBundlePackagesSets(t *testing.T) {
	setsTask := roleTask(t, "bundle-packages", "main.yaml", "Bundle packages - the bundle's sets, by release and architecture")
	sets := renderTask(t, setsTask, setsTask["set_fact"].(map[string]any)["bundle_packages_sets"].(string), map[string]any{"bundle_packages_manifest": slurpedManifest(bundleArtifacts()...)})
	filesTask := roleTask(t, "bundle-packages", "main.yaml", "Bundle packages - the bundle's set for this host's release")
	failTask := roleTask(t, "bundle-packages", "main.yaml", "Bundle packages - the bundle has a set for this host's release")
	for release, want := range map[string]string{
		"debian12":    `["Packages","socat_1.7.4.4-2_amd64.deb","libwrap0_7.6.q-32_amd64.deb","conntrack_1%3a1.4.7-1+b2_amd64.deb","haproxy_2.6.12-1+deb12u2_amd64.deb"]`,
		"ubuntu24.04": `["Packages","socat_1.8.0.0-4build3_amd64.deb"]`,
		"debian11":    `[]`,
	} {
		vars := map[string]any{"bundle_packages_sets": sets, "bundle_packages_release": release, "arch": "amd64"}
		if got := renderTask(t, filesTask, filesTask["set_fact"].(map[string]any)["bundle_packages_files"].(string), vars); strings.TrimSpace(got) != want {
			t.Errorf("%s: the files %s, want %s", release, got, want)
		}
	}
	msg := renderTask(t, failTask, failTask["fail"].(map[string]any)["msg"].(string), map[string]any{"bundle_packages_sets": sets, "bundle_packages_release": "debian11", "arch": "amd64"})
	if !strings.Contains(msg, "no OS packages for debian11/amd64 (it has: debian12/amd64 ubuntu24.04/amd64)") {
		t.Errorf("the refusal: %q", msg)
	}
}

// TestPreflightOfflinePackages renders preflight's finding on the probe's
// output and the bundle's sets: a host lacking nothing, one the set serves,
// a release the bundle has no set for, a set without a package, an rpm host.
func TestPreflightOfflinePackages(t *testing.T) {
	task := roleTask(t, "preflight", "main.yaml", "Packages - what the bundle cannot give this host")
	text := task["set_fact"].(map[string]any)["preflight_pkgs_problem"].(string)
	arts := bundleArtifacts()
	for _, tc := range []struct {
		name  string
		probe []any
		want  []string
	}{
		{"served", []any{"debian12", "deb", "socat", "conntrack"}, nil},
		{"no set for the release", []any{"debian11", "deb", "socat"},
			[]string{"node n1 (10.0.0.1) lacks socat", "no OS packages for its release debian11/amd64", "it has: debian12/amd64, ubuntu24.04/amd64", "on a control machine of debian11"}},
		{"the set lacks one", []any{"ubuntu24.04", "deb", "socat", "ipset"},
			[]string{"lacks ipset, which the offline bundle's set for ubuntu24.04/amd64 does not carry", "export the bundle again"}},
		{"rpm", []any{"rocky9", "rpm", "socat"},
			[]string{"node n1 (10.0.0.1) (rocky9, rpm packages) lacks socat", ".deb sets only", "builds no rpm set"}},
	} {
		got := renderTask(t, task, text, map[string]any{
			"preflight_pkgs": map[string]any{"stdout_lines": tc.probe}, "preflight_bundle_manifest": slurpedManifest(arts...),
			"arch": "amd64", "preflight_node": "n1 (10.0.0.1)",
		})
		if tc.want == nil && strings.TrimSpace(got) != "" {
			t.Errorf("%s: a finding %q, want none", tc.name, got)
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: the finding %q does not say %q", tc.name, got, w)
			}
		}
	}
	for name, m := range map[string]map[string]any{"a bundle without sets": slurpedManifest(arts[len(arts)-1]), "a directory without a manifest": {"exists": false, "content": ""}} {
		got := renderTask(t, task, text, map[string]any{
			"preflight_pkgs": map[string]any{"stdout_lines": []any{"debian12", "deb", "socat"}}, "preflight_bundle_manifest": m,
			"arch": "amd64", "preflight_node": "n1 (10.0.0.1)",
		})
		if !strings.Contains(got, "(it has: none)") {
			t.Errorf("%s: %q", name, got)
		}
	}
}
