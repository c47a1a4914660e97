package validate

import (
	. "github.com/mensylisir/kubexm/schema"
	"github.com/mensylisir/kubexm/schema/schemas"

	"bytes"
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	objvalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsyaml "sigs.k8s.io/yaml"
)

const crdFile = "../../roles/cluster-resource/files/crd.yaml"

// TestCRDCommitted: the committed CRD is what the types generate.
func TestCRDCommitted(t *testing.T) {
	want, err := schemas.CRD()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(crdFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from what the schema's types generate: run `go generate ./schema`", crdFile)
	}
}

// crdForTest decodes the generated CRD as the API server does and returns it
// with the version's schema.
func crdForTest(t *testing.T) (*apiextensions.CustomResourceDefinition, *apiextensions.JSONSchemaProps) {
	t.Helper()
	data, err := schemas.CRD()
	if err != nil {
		t.Fatal(err)
	}
	var v1 apiextensionsv1.CustomResourceDefinition
	if err := sigsyaml.UnmarshalStrict(data, &v1); err != nil {
		t.Fatalf("the CRD does not decode as apiextensions.k8s.io/v1: %v", err)
	}
	var crd apiextensions.CustomResourceDefinition
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(&v1, &crd, nil); err != nil {
		t.Fatal(err)
	}
	// One version: the conversion lifts its schema to the whole resource's.
	if len(crd.Spec.Versions) != 1 || crd.Spec.Validation == nil {
		t.Fatalf("want one version with a schema, got %+v", crd.Spec)
	}
	return &crd, crd.Spec.Validation.OpenAPIV3Schema
}

// TestCRDValid: the API server's own validation of a CRD at create time
// (structural schema, printer columns, names, subresources) finds nothing.
func TestCRDValid(t *testing.T) {
	crd, _ := crdForTest(t)
	// Status conditions as the API server expects: the create path fills
	// these before validating.
	crd.Status.StoredVersions = []string{APIVersion[strings.LastIndexByte(APIVersion, '/')+1:]}
	if errs := crdvalidation.ValidateCustomResourceDefinition(context.Background(), crd); len(errs) > 0 {
		t.Fatalf("the API server would refuse the CRD: %v", errs.ToAggregate())
	}
}

// TestCRDTakesClusterYAML: the full example cluster.yaml, decoded and written
// back as kubexm writes it, validates against the resource's schema, keeps
// every field through the API server's pruning but its passwords, and a
// value outside an enum is refused naming the field.
func TestCRDTakesClusterYAML(t *testing.T) {
	_, props := crdForTest(t)
	data, err := os.ReadFile("../testdata/cluster-full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := Decode("../testdata/cluster-full.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	c.Spec.Hosts[0].Password = "Pw-in-the-spec-1"
	out, err := Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := sigsyaml.Unmarshal(out, &obj); err != nil {
		t.Fatal(err)
	}
	validator, _, err := objvalidation.NewSchemaValidator(props)
	if err != nil {
		t.Fatal(err)
	}
	if errs := objvalidation.ValidateCustomResource(field.NewPath(""), obj, validator); len(errs) > 0 {
		t.Fatalf("cluster-full.yaml is refused by the resource's schema: %v", errs.ToAggregate())
	}

	structural, err := structuralschema.NewStructural(props)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := sigsyaml.Marshal(obj)
	pruning.PruneWithOptions(obj, structural, true, structuralschema.UnknownFieldPathOptions{})
	after, _ := sigsyaml.Marshal(obj)
	if strings.Contains(string(after), "Pw-in-the-spec-1") {
		t.Error("a host's password survives the API server's pruning")
	}
	lost := lines(string(before))
	for l := range lines(string(after)) {
		delete(lost, l)
	}
	secretLine := regexp.MustCompile(`^\s*(- )?(password|privateKeyPassphrase|sudoPassword): `)
	for l := range lost {
		if !secretLine.MatchString(l) {
			t.Errorf("pruning drops a field of cluster.yaml: %q", l)
		}
	}

	spec := obj["spec"].(map[string]any)
	spec["kubernetes"].(map[string]any)["type"] = "kubespray"
	errs := objvalidation.ValidateCustomResource(field.NewPath(""), obj, validator)
	if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), "spec.kubernetes.type") {
		t.Errorf("kubernetes.type kubespray: want an error naming spec.kubernetes.type, got %v", errs)
	}
}

// TestCRDTakesConfigView: what `kubexm config view --resource` prints (every
// default filled in, secrets left out) is a valid Cluster resource with no
// field outside the schema, so a server-side apply takes it; the plain
// `config view` of a cluster with passwords is not (they are masked, not
// left out).
func TestCRDTakesConfigView(t *testing.T) {
	_, props := crdForTest(t)
	structural, err := structuralschema.NewStructural(props)
	if err != nil {
		t.Fatal(err)
	}
	validator, _, err := objvalidation.NewSchemaValidator(props)
	if err != nil {
		t.Fatal(err)
	}
	withSecrets := strings.Replace(MinimalCluster, "address: 192.0.2.1}", "address: 192.0.2.1, password: Pw-1, sudoPassword: Pw-2, bastion: {address: 192.0.2.9, password: Pw-3}}", 1) +
		"  registry:\n    auths: {\"reg.local\": {username: u, password: Pw-4}}\n"
	c, _, err := Parse("cluster.yaml", []byte(withSecrets))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		c       *Cluster
		outside bool
	}{{"config view --resource", c.Resource(), false}, {"config view", c.Masked(), true}} {
		out, err := Marshal(tc.c)
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if err := sigsyaml.Unmarshal(out, &obj); err != nil {
			t.Fatal(err)
		}
		if errs := objvalidation.ValidateCustomResource(field.NewPath(""), obj, validator); len(errs) > 0 {
			t.Fatalf("%s: refused by the resource's schema: %v\n%s", tc.name, errs.ToAggregate(), out)
		}
		before, _ := sigsyaml.Marshal(obj)
		pruning.PruneWithOptions(obj, structural, true, structuralschema.UnknownFieldPathOptions{})
		after, _ := sigsyaml.Marshal(obj)
		if outside := !bytes.Equal(before, after); outside != tc.outside {
			t.Errorf("%s: fields outside the schema: %v, want %v\n%s", tc.name, outside, tc.outside, out)
		}
		if strings.Contains(string(out), "Pw-") {
			t.Errorf("%s: a secret in clear:\n%s", tc.name, out)
		}
	}
}

func lines(s string) map[string]bool {
	m := map[string]bool{}
	for _, l := range strings.Split(s, "\n") {
		m[l] = true
	}
	return m
}
