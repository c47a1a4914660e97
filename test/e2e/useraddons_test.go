//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// userAddonsYAML is cluster.yaml's spec.addons with, besides
// metrics-server, a manifest and a local chart of the suite's (files
// relative to the cluster file); greeting is the chart's value.
func userAddonsYAML(greeting string) string {
	return fmt.Sprintf(`  addons:
  - metrics-server
  - name: e2e-manifest
    namespace: e2e-addons
    sources:
      yaml:
        path: [addons/manifest.yaml]
  - name: e2e-chart
    namespace: e2e-addons
    sources:
      chart:
        path: addons/chart
        version: 0.1.0
        valuesFile: addons/values.yaml
        values: {greeting: %s, auth: {password: e2e-s3cr3t}}
`, greeting)
}

// writeUserAddons writes the manifest, the chart (a ConfigMap of a value and
// a Deployment of the suite's busybox image, already on every node) and the
// values file beside the cluster file.
func writeUserAddons(t *testing.T, dir, image string) {
	t.Helper()
	files := map[string]string{
		"addons/manifest.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: e2e-manifest\ndata:\n  from: manifest\n",
		"addons/chart/Chart.yaml":  "apiVersion: v2\nname: e2e-chart\nversion: 0.1.0\n",
		"addons/chart/values.yaml": "greeting: chart-default\nimage: none\nauth: {password: \"\"}\n",
		"addons/chart/templates/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n" +
			"  greeting: {{ .Values.greeting | quote }}\n",
		"addons/chart/templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  replicas: 1
  selector: {matchLabels: {app: {{ .Release.Name }}}}
  template:
    metadata:
      labels: {app: {{ .Release.Name }}}
      annotations: {greeting: {{ .Values.greeting | quote }}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: sleep
        image: {{ .Values.image }}
        imagePullPolicy: Never
        command: [/bin/busybox, sleep, "86400"]
`,
		"addons/values.yaml": "image: " + image + "\n",
	}
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// checkUserAddons proves spec.addons entries of the user's on a running
// cluster: cluster.yaml (written by write with the add-ons appended) gets a
// manifest and a local chart; create-cluster --tags user-addons applies the
// manifest from the first master and installs the chart with the Helm SDK
// from the control machine; a re-run changes nothing; a changed value is
// rolled out as revision 2 (the ConfigMap and the pods' annotation); the
// chart's password value is in no output; delete --tags user-addons removes
// the manifest's object and the release, and a re-run of it changes nothing.
func checkUserAddons(ctx context.Context, t *testing.T, kx kubexm, k kubectlRunner, write func(extra string), createPB, deletePB, bundle string) {
	t.Helper()
	writeUserAddons(t, filepath.Dir(kx.inventory), busyboxRef(t))
	write(userAddonsYAML("hello"))
	res := kx.play(ctx, createPB, "--tags", "user-addons", "--offline-bundle", bundle)
	if res.err != nil {
		t.Fatalf("create-cluster --tags user-addons failed after %s: %v%s", res.wall, res.err, res.failures())
	}
	t.Logf("PERF user add-ons installed (a manifest, a chart with a Deployment): %s (%d changed)", res.wall.Round(time.Millisecond), len(res.changed()))
	checkNoSecret(t, res, kx.workDir, "e2e-s3cr3t")
	wantAddonState(ctx, t, k, "hello", "1")
	rerun(ctx, t, kx, "create-cluster --tags user-addons", createPB, "--tags", "user-addons", "--offline-bundle", bundle)

	write(userAddonsYAML("changed"))
	res = kx.play(ctx, createPB, "--tags", "user-addons", "--offline-bundle", bundle)
	if res.err != nil {
		t.Fatalf("create-cluster --tags user-addons with a new value failed: %v%s", res.err, res.failures())
	}
	if c := res.changed(); len(c) != 1 || !strings.Contains(c[0], "Helm") {
		t.Errorf("a changed chart value changed %v, want the Helm task alone", c)
	}
	checkNoSecret(t, res, kx.workDir, "e2e-s3cr3t")
	wantAddonState(ctx, t, k, "changed", "2")
	if out, err := k.run(ctx, "", "rollout", "status", "deployment/e2e-chart", "-n", "e2e-addons", "--timeout=120s"); err != nil {
		t.Errorf("the chart's Deployment after the new value: %v\n%s", err, out)
	}
	// The rollout is complete once the old pod is told to stop; it may still
	// be terminating (its grace period) and is listed until it is gone.
	out, err := k.run(ctx, "", "get", "pods", "-n", "e2e-addons", "-l", "app=e2e-chart", "-o",
		`jsonpath={range .items[*]}{.metadata.annotations.greeting}{"|"}{.metadata.deletionTimestamp}{"\n"}{end}`)
	var greetings []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if greeting, deleted, _ := strings.Cut(line, "|"); line != "" && deleted == "" {
			greetings = append(greetings, greeting)
		}
	}
	if err != nil || !slices.Equal(greetings, []string{"changed"}) {
		t.Errorf("the chart's running pods carry greetings %q, want the new value's pod alone: %v\n%s", greetings, err, out)
	}

	res = kx.play(ctx, deletePB, "--tags", "user-addons")
	if res.err != nil {
		t.Fatalf("delete --tags user-addons failed: %v%s", res.err, res.failures())
	}
	t.Logf("PERF user add-ons removed: %s (%d changed)", res.wall.Round(time.Millisecond), len(res.changed()))
	if out, err := retry(ctx, 2*time.Minute, func() (string, error) {
		out, err := k.run(ctx, "", "get", "configmap,deployment,secret", "-n", "e2e-addons", "-o", "name")
		if err == nil && strings.Contains(out, "e2e-") {
			err = fmt.Errorf("left in e2e-addons")
		}
		return out, err
	}); err != nil {
		t.Errorf("after delete --tags user-addons: %v\n%s", err, out)
	}
	rerun(ctx, t, kx, "delete --tags user-addons", deletePB, "--tags", "user-addons")
}

// wantAddonState checks the manifest's ConfigMap, the chart's ConfigMap
// value and the release's revision (Helm's record of it, a Secret).
func wantAddonState(ctx context.Context, t *testing.T, k kubectlRunner, greeting, revision string) {
	t.Helper()
	if out, err := k.run(ctx, "", "get", "configmap", "e2e-manifest", "-n", "e2e-addons", "-o", "jsonpath={.data.from}"); err != nil || out != "manifest" {
		t.Errorf("the manifest's ConfigMap in e2e-addons: %q %v", out, err)
	}
	if out, err := k.run(ctx, "", "get", "configmap", "e2e-chart", "-n", "e2e-addons", "-o", "jsonpath={.data.greeting}"); err != nil || out != greeting {
		t.Errorf("the chart's ConfigMap: greeting %q, want %q: %v", out, greeting, err)
	}
	out, err := k.run(ctx, "", "get", "secret", "-n", "e2e-addons", "-l", "owner=helm,name=e2e-chart,status=deployed",
		"-o", `jsonpath={range .items[*]}{.metadata.labels.version}{" "}{.metadata.labels.managed-by-kubexm}{end}`)
	if err != nil || strings.TrimSpace(out) != revision+" true" {
		t.Errorf("the deployed release e2e-chart: revision and kubexm label %q, want %q: %v", out, revision+" true", err)
	}
	if out, err := k.run(ctx, "", "rollout", "status", "deployment/e2e-chart", "-n", "e2e-addons", "--timeout=120s"); err != nil {
		t.Errorf("the chart's Deployment: %v\n%s", err, out)
	}
}

// checkNoSecret wants a value of the chart's that is a secret in none of a
// run's events and in no file of the work directory (the run journals)
// other than a copy of cluster.yaml.
func checkNoSecret(t *testing.T, res runResult, workDir, secret string) {
	t.Helper()
	for _, e := range res.events {
		if strings.Contains(fmt.Sprintf("%+v", e), secret) {
			t.Errorf("the chart's password reached the output: %+v", e)
		}
	}
	err := filepath.WalkDir(workDir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".tar") || strings.HasSuffix(p, ".tar.gz") {
			return err
		}
		if st, err := d.Info(); err != nil || st.Size() > 64<<20 {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.Contains(string(data), secret) {
			t.Errorf("the chart's password is in %s", p)
		}
		return nil
	})
	if err != nil {
		t.Errorf("reading the work directory %s: %v", workDir, err)
	}
}
