package validate

import (
	. "github.com/mensylisir/kubexm/schema"
	"github.com/mensylisir/kubexm/schema/matrix"
	"github.com/mensylisir/kubexm/schema/sample"

	"bytes"
	"testing"
)

// TestDecodedCheckIsParse: a file decoded first (for its hooks) and checked
// later is the cluster ParseWith makes of it, and a file whose decoding
// found problems has no cluster before Check, which reports them.
func TestDecodedCheckIsParse(t *testing.T) {
	s, err := matrix.BuiltinSupport()
	if err != nil {
		t.Fatal(err)
	}
	data := []byte(sample.Config(s, "demo", DefaultKubernetesVersion, "192.0.2.10"))
	want, _, err := ParseWith("cluster.yaml", data, s)
	if err != nil {
		t.Fatalf("the sample does not parse: %v", err)
	}
	d, err := DecodeFile("cluster.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	if c := d.Cluster(); c == nil || c.Metadata.Name != "demo" {
		t.Fatalf("decoded cluster: %+v", c)
	}
	got, _, err := d.Check(s)
	if err != nil {
		t.Fatal(err)
	}
	wy, _ := Marshal(want)
	gy, _ := Marshal(got)
	if !bytes.Equal(wy, gy) {
		t.Errorf("checked after decoding:\n%s\nparsed:\n%s", gy, wy)
	}

	bad := bytes.Replace(data, []byte("port: 6443"), []byte("port: [6443]"), 1)
	d, err = DecodeFile("cluster.yaml", bad)
	if err != nil {
		t.Fatal(err)
	}
	if d.Cluster() != nil {
		t.Error("a file with a field that does not decode has a cluster before Check")
	}
	if _, _, err := d.Check(s); err == nil {
		t.Error("Check accepted a field that does not decode")
	}
}
