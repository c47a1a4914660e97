package lifecycle

import (
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/schema"
)

// The sample names its cluster and the version asked for (a minor alone
// is its newest checked patch); a name or version kubexm would refuse in
// the file is refused before it is written.
func TestSampleConfig(t *testing.T) {
	minor := schema.DefaultKubernetesVersion[:strings.LastIndex(schema.DefaultKubernetesVersion, ".")]
	text, err := SampleConfig("demo", minor)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "name: demo") || !strings.Contains(text, schema.DefaultKubernetesVersion) {
		t.Errorf("sample for demo at %s:\n%s", minor, text)
	}
	if _, err := SampleConfig("Not_A_Name", schema.DefaultKubernetesVersion); err == nil || !strings.HasPrefix(err.Error(), "--name: ") {
		t.Errorf("bad name: %v", err)
	}
	if _, err := SampleConfig("demo", "v1.2.3"); err == nil {
		t.Error("a version kubexm does not install was taken")
	}
}
