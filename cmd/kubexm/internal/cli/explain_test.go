package cli

import (
	"strings"
	"testing"
)

// kubexm explain: kubectl explain's layout, from the schema and the
// support matrix; an unknown field is exit 1 with a did-you-mean.
func TestExplainCommand(t *testing.T) {
	out, code := runMain(t, "explain", "spec.etcd.type")
	for _, want := range []string{"FIELD:    spec.etcd.type <string>", "DESCRIPTION:", "DEFAULT:  kubexm", "ALLOWED VALUES:  kubexm, kubeadm, external", "SUPPORT (kubexm support):", "external  supported"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("explain spec.etcd.type lacks %q (exit %d):\n%s", want, code, out)
		}
	}
	out, code = runMain(t, "explain", "spec.network.plugin")
	if code != 0 || !strings.Contains(out, "cilium   not supported yet: ") {
		t.Errorf("explain spec.network.plugin (exit %d):\n%s", code, out)
	}
	out, code = runMain(t, "explain", "spec.etcd")
	if code != 0 || !strings.Contains(out, "FIELDS:\n  autoCompactionRetention\t<integer>\n") || !strings.Contains(out, "  type\t<string>\n") {
		t.Errorf("explain spec.etcd (exit %d):\n%s", code, out)
	}
	out, code = runMain(t, "explain", "spec.etcd.tpye")
	if code != 1 || !strings.Contains(out, `did you mean "type"?`) {
		t.Errorf("explain spec.etcd.tpye: exit %d:\n%s", code, out)
	}
	doc := sameShape(t, "explain", "spec.hosts.port")
	hasKeys(t, "explain -o json", doc[0], "path", "type", "description", "default")
}
