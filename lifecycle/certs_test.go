package lifecycle

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/mensylisir/kubexm/builtins"
	"github.com/mensylisir/kubexm/engine/step"
)

// CertsCheck gives the playbook the warning window in days and where to
// write the report, and returns what it wrote; a run that fails shows its
// log.
func TestCertsCheck(t *testing.T) {
	reg := map[string]step.Builtin{}
	for _, b := range builtins.All() {
		reg[b.Spec().Name] = b
	}
	play := func(task string) fstest.MapFS {
		return fstest.MapFS{"playbooks/certs-check.yaml": {Data: []byte(`- name: certs
  hosts: localhost
  tasks:
` + task)}}
	}
	r := Runner{Builtins: reg, BuiltinFS: play(`    - name: write the report
      copy:
        content: '{"warn_within_days": {{ .certs_warn_days }}}'
        dest: "{{ .certs_report_path }}"
      check_mode: false
`)}
	var errw bytes.Buffer
	data, err := r.CertsCheck(context.Background(), Request{WorkDir: t.TempDir(), Forks: 1}, 30*24*time.Hour, &errw)
	if err != nil || string(data) != `{"warn_within_days": 30}` || errw.Len() != 0 {
		t.Errorf("CertsCheck: %q, %v; log %q", data, err, errw.String())
	}
	r.BuiltinFS = play(`    - name: fail
      fail:
        msg: no hosts answer
`)
	data, err = r.CertsCheck(context.Background(), Request{WorkDir: t.TempDir(), Forks: 1}, 0, &errw)
	if data != nil || err == nil || !strings.Contains(errw.String(), "no hosts answer") {
		t.Errorf("CertsCheck of a failing playbook: %q, %v; log %q", data, err, errw.String())
	}
}
