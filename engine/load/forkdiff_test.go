package load

import (
	"strings"
	"testing"
)

// A fork with nothing of its own is no error; one that differs says how
// much, for the exit status of kubexm playbook diff.
func TestForkDiffDiffers(t *testing.T) {
	same := &ForkDiff{Playbook: "create-cluster", Same: 12}
	if err := same.Differs("site"); err != nil {
		t.Errorf("an identical fork differs: %v", err)
	}
	var b strings.Builder
	if err := same.Write(&b); err != nil || b.String() != "0 files changed, 12 unchanged, 0 only in the fork, 0 only in the built-in (playbook create-cluster)\n" {
		t.Errorf("Write = %q, %v", b.String(), err)
	}
	for _, d := range []*ForkDiff{
		{Playbook: "create-cluster", Changed: []FileDiff{{Fork: "a", Builtin: "b"}}},
		{Playbook: "create-cluster", OnlyInFork: []string{"hooks/x.yaml"}},
		{Playbook: "create-cluster", OnlyInBuiltin: []string{"roles/etcd/files/y"}},
	} {
		err := d.Differs("site")
		want := "site differs from the built-in playbook create-cluster: " // then the counts
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Differs(%+v) = %v", d, err)
		}
	}
}
