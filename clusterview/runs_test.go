package clusterview

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// kubexm logs: a run's tasks, of one host or the failed ones only, for
// people and, with the keys they always had, for programs.
func TestRunLog(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "runs", "r1")
	if err := os.MkdirAll(p, 0o700); err != nil {
		t.Fatal(err)
	}
	text := `{"type":"header","time":"2026-12-03T10:00:00Z","playbook":"create-cluster"}
{"type":"result","task":"etcd - start","host":"n1","status":"ok"}
{"type":"result","task":"etcd - start","host":"n2","status":"failed","msg":"timed out"}
{"type":"end","time":"2026-12-03T10:01:00Z","outcome":"failed"}
`
	if err := os.WriteFile(filepath.Join(p, "journal.jsonl"), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		host   string
		failed bool
		want   []string // the hosts of the tasks shown
	}{{"", false, []string{"n1", "n2"}}, {"n1", false, []string{"n1"}}, {"", true, []string{"n2"}}, {"n1", true, nil}} {
		l, err := RunLog(dir, "r1", c.host, c.failed)
		if err != nil {
			t.Fatal(err)
		}
		var hosts []string
		for _, e := range l.Tasks {
			hosts = append(hosts, e.Host)
		}
		if strings.Join(hosts, ",") != strings.Join(c.want, ",") || l.Run != "r1" || l.Playbook != "create-cluster" || l.Outcome != "failed" {
			t.Errorf("host %q failed %v: %+v, want the tasks of %v", c.host, c.failed, l, c.want)
		}
	}
	l, err := RunLog(dir, "r1", "", true)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := l.Write(&b); err != nil || !strings.Contains(b.String(), "run r1: playbook create-cluster") || !strings.Contains(b.String(), "timed out") {
		t.Errorf("Write: %v\n%s", err, b.String())
	}
	data, err := json.Marshal(l)
	if err != nil || !strings.HasPrefix(string(data), `{"outcome":"failed","playbook":"create-cluster","run":"r1","tasks":[`) {
		t.Errorf("json: %v %s", err, data)
	}
}
