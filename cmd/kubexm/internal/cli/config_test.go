package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/schema/validate"

	"github.com/spf13/cobra"

	"github.com/mensylisir/kubexm/schema"
)

func run(t *testing.T, cmd *cobra.Command, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err = cmd.Execute()
	return out.String(), errOut.String(), err
}

func TestCreateConfigSampleIsValid(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "cluster.yaml")
	if _, _, err := run(t, newCreateConfigCmd(), "-o", file); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "address: localhost") || !strings.Contains(string(data), "# ") {
		t.Errorf("sample is not a commented localhost all-in-one:\n%s", data)
	}
	c, warnings, err := validate.Load(file)
	if err != nil {
		t.Fatalf("sample does not validate: %v\n%s", err, data)
	}
	if len(warnings) > 0 {
		t.Errorf("sample has warnings: %v", warnings)
	}
	if c.Spec.Kubernetes.Version != schema.DefaultKubernetesVersion || c.Spec.Hosts[0].Connection != "local" {
		t.Errorf("version %s connection %s", c.Spec.Kubernetes.Version, c.Spec.Hosts[0].Connection)
	}

	// A second write must not clobber the file silently.
	if _, _, err := run(t, newCreateConfigCmd(), "-o", file); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("overwrite without --force: err = %v", err)
	}
	if _, _, err := run(t, newCreateConfigCmd(), "-o", file, "--force", "--kubernetes-version", "1.36.3"); err != nil {
		t.Fatal(err)
	}
	c, _, err = validate.Load(file)
	if err != nil || c.Spec.Kubernetes.Version != "v1.36.3" {
		t.Fatalf("--kubernetes-version 1.36.3: version %v, err %v", c, err)
	}
	// Only supported choices are written; the comments name the others.
	data, err = os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"type: kubexm ", "plugin: flannel ", "type: containerd ", "not supported yet: cilium", "or docker, custom; not supported yet: cri-o, isula"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("sample lacks %q:\n%s", want, data)
		}
	}
}

func TestCreateConfigRejectsUnsupportedVersion(t *testing.T) {
	_, _, err := run(t, newCreateConfigCmd(), "--kubernetes-version", "v1.32.4")
	if err == nil || !strings.Contains(err.Error(), "supported v1.35 to v1.37 (any patch); default "+schema.DefaultKubernetesVersion) {
		t.Fatalf("err = %v, want a list of supported versions", err)
	}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const minimal = `apiVersion: kubexm.mensylisir.io/v1alpha1
kind: Cluster
metadata: {name: demo}
spec:
  hosts:
  - {name: n1, address: 10.0.0.1, password: "${KUBEXM_TEST_PW}"}
  roleGroups: {etcd: [n1], master: [n1], worker: [n1]}
`

func TestConfigValidateAndView(t *testing.T) {
	t.Setenv("KUBEXM_TEST_PW", "s3cret-pw")
	file := writeFile(t, "cluster.yaml", minimal)
	out, _, err := run(t, newConfigValidateCmd(), "-f", file)
	if err != nil || !strings.Contains(out, "valid") {
		t.Fatalf("validate: %q %v", out, err)
	}
	out, _, err = run(t, newConfigViewCmd(), "-f", file)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "s3cret-pw") || !strings.Contains(out, schema.Mask) {
		t.Errorf("view leaks or does not mask the password:\n%s", out)
	}
	for _, want := range []string{"version: " + schema.DefaultKubernetesVersion, "port: 22", "plugin: flannel", "type: kubexm", "dataDir: /var/lib/etcd"} {
		if !strings.Contains(out, want) {
			t.Errorf("view lacks default %q:\n%s", want, out)
		}
	}
	// --resource: the Cluster resource, which has no password field at all.
	res, _, err := run(t, newConfigViewCmd(), "-f", file, "--resource")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(res, "password") || !strings.Contains(res, "port: 22") {
		t.Errorf("view --resource keeps a password field or lacks the defaults:\n%s", res)
	}
}

func TestConfigValidateReportsAllProblems(t *testing.T) {
	t.Setenv("KUBEXM_TEST_PW", "pw")
	bad := strings.Replace(minimal, "address: 10.0.0.1", "address: 10.0.0.1, prot: 22", 1)
	bad = strings.Replace(bad, "worker: [n1]", "worker: [n2]", 1)
	file := writeFile(t, "bad.yaml", bad)
	_, _, err := run(t, newConfigValidateCmd(), "-f", file)
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, want := range []string{"2 problems", "bad.yaml:6:", "prot", `did you mean "port"?`, `bad.yaml:7:`, `host "n2" is not in spec.hosts`} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
}

func TestConfigConvertKubeKey(t *testing.T) {
	kk := `apiVersion: kubekey.kubesphere.io/v1alpha2
kind: Cluster
metadata: {name: kk}
spec:
  hosts:
  - {name: node1, address: 10.0.0.1, password: "${PW}"}
  roleGroups:
    etcd: [node1]
    control-plane: [node1]
    worker: [node1]
  controlPlaneEndpoint: {domain: lb.kubesphere.local, address: "", port: 6443}
  kubernetes: {version: v1.33.2, containerManager: containerd}
  etcd: {type: kubekey}
`
	file := writeFile(t, "kk.yaml", kk)
	outFile := filepath.Join(t.TempDir(), "out.yaml")
	_, stderr, err := run(t, newConfigConvertCmd(), "-f", file, "-o", outFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, "control-plane -> spec.roleGroups.master") {
		t.Errorf("no rename warning: %s", stderr)
	}
	data, err := os.ReadFile(outFile)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	for _, want := range []string{schema.APIVersion, "master:", "type: kubeadm", "type: kubexm", `${PW}`} {
		if !strings.Contains(s, want) {
			t.Errorf("converted file lacks %q:\n%s", want, s)
		}
	}
	if !strings.Contains(stderr, "spec.kubernetes.type (KubeKey's default: kubernetes, installed with kubeadm) -> kubeadm") || strings.Contains(stderr, "only mode") {
		t.Errorf("the KubeKey cluster does not stay kubeadm: %s", stderr)
	}
	// The user's version is kept; validation says it is not supported.
	t.Setenv("PW", "x")
	_, _, err = run(t, newConfigValidateCmd(), "-f", outFile)
	if err == nil || !strings.Contains(err.Error(), "spec.kubernetes.version: Kubernetes v1.33.2 is not supported by this kubexm (hint: supported: v1.35 to v1.37") {
		t.Errorf("validate of the converted file: %v", err)
	}
	if err := os.WriteFile(outFile, []byte(strings.Replace(s, "v1.33.2", "v1.37.1", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, newConfigValidateCmd(), "-f", outFile); err != nil {
		t.Errorf("converted file with a supported version does not validate: %v", err)
	}
}

// A name validation refuses is refused before a file is written, with the
// rule, so create config never writes a file config validate rejects.
func TestCreateConfigRefusesInvalidName(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cluster.yaml")
	_, _, err := run(t, newCreateConfigCmd(), "--name", "My Cluster", "-o", file)
	if err == nil || !strings.Contains(err.Error(), `"My Cluster" is not a valid cluster name`) || !strings.Contains(err.Error(), "lowercase letters, digits") {
		t.Fatalf("err = %v, want the name refused with its rule", err)
	}
	if _, err := os.Stat(file); err == nil {
		t.Errorf("a file was written for a refused name")
	}
	if _, _, err := run(t, newCreateConfigCmd(), "--name", "prod.eu-1", "-o", file); err != nil {
		t.Fatalf("a valid name: %v", err)
	}
	if c, _, err := validate.Load(file); err != nil || c.Metadata.Name != "prod.eu-1" {
		t.Fatalf("sample with --name prod.eu-1: %v", err)
	}
}

// convert -o never replaces a file without --force, its own input least of all.
func TestConfigConvertRefusesOverwrite(t *testing.T) {
	kk := `apiVersion: kubekey.kubesphere.io/v1alpha2
kind: Cluster
metadata: {name: sample}
spec:
  hosts:
  - {name: node1, address: 10.0.0.1, password: x}
  roleGroups: {etcd: [node1], control-plane: [node1], worker: [node1]}
  kubernetes: {version: v1.37.2, containerManager: containerd}
`
	file := writeFile(t, "kk.yaml", kk)
	_, _, err := run(t, newConfigConvertCmd(), "-f", file, "-o", file)
	if err == nil || !strings.Contains(err.Error(), "is the input file") {
		t.Fatalf("convert onto its input: err = %v", err)
	}
	if data, _ := os.ReadFile(file); string(data) != kk {
		t.Fatalf("the input was changed:\n%s", data)
	}
	other := writeFile(t, "other.yaml", "keep me\n")
	if _, _, err := run(t, newConfigConvertCmd(), "-f", file, "-o", other); err == nil || !strings.Contains(err.Error(), "already exists (use --force") {
		t.Fatalf("convert onto an existing file: err = %v", err)
	}
	if data, _ := os.ReadFile(other); string(data) != "keep me\n" {
		t.Fatalf("the existing file was changed:\n%s", data)
	}
	if _, _, err := run(t, newConfigConvertCmd(), "-f", file, "-o", other, "--force"); err != nil {
		t.Fatalf("--force: %v", err)
	}
	if data, _ := os.ReadFile(other); !strings.Contains(string(data), schema.APIVersion) {
		t.Fatalf("--force did not write the converted file:\n%s", data)
	}
}
