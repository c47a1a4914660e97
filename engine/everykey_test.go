package engine

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mensylisir/kubexm/engine/model"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestEveryKey(t *testing.T) {
	c := &calls{}
	pb, err := Load(context.Background(), "testdata/everykey", LoadOptions{Builtins: testRegistry(c), Version: "0.1.0"})
	if err != nil {
		t.Fatal(err)
	}
	var events []model.Event
	rc, err := Run(context.Background(), pb, testInventory(), RunOptions{WorkDir: t.TempDir(), Output: model.SinkFunc(func(e model.Event) { events = append(events, e) })})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	checkRecap(t, rc, map[string]model.HostStats{"localhost": {OK: 24, Changed: 2, Skipped: 1, Ignored: 1, Rescued: 1}})
	got := strings.Join(c.sorted(), "\n")
	for _, want := range []string{
		"localhost:imported", "localhost:pre=from-header vf", "localhost:common", "localhost:web=8080 d v",
		"localhost:loop=0:a", "localhost:loop=2:c", "localhost:tv=hello-task", "localhost:rescued", "localhost:always",
		"localhost:static", "localhost:dyn1", "localhost:dyn2", "localhost:web-handler", "localhost:handler",
		"localhost:post=3 linux", "localhost:setup",
		"localhost:readfile=hello", "localhost:readfile=page template",
	} {
		if !strings.Contains(got, want+"\n") && !strings.HasSuffix(got, want) {
			t.Errorf("missing call %q in\n%s", want, got)
		}
	}
	for _, never := range []string{"after-end-play", "localhost:never", "localhost:debug", "loop=1:b"} {
		if strings.Contains(got, never) {
			t.Errorf("unexpected call %q", never)
		}
	}
	if strings.Count(got, "localhost:common") != 3 {
		t.Errorf("common ran %d times, want 3 (dependency, import_role, include_role)", strings.Count(got, "localhost:common"))
	}
	for _, e := range events {
		if e.Task == "ignored failure" && e.Kind == model.EventHostResult && e.Message != "output hidden by no_log" {
			t.Errorf("no_log task message shown: %q", e.Message)
		}
	}
}

func TestListTasksGolden(t *testing.T) {
	pb, err := Load(context.Background(), "testdata/everykey", LoadOptions{Builtins: testRegistry(&calls{})})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		golden     string
		tags, skip []string
	}{
		{"list-tasks.golden", nil, nil},
		{"list-tasks-tags.golden", []string{"web", "debug"}, []string{"always"}},
	} {
		var buf bytes.Buffer
		if err := pb.ListTasks(&buf, tc.tags, tc.skip); err != nil {
			t.Fatal(err)
		}
		buf.WriteString("\n")
		if err := pb.ListTags(&buf); err != nil {
			t.Fatal(err)
		}
		buf.WriteString("\n")
		if err := pb.ListHosts(&buf, testInventory(), ""); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("testdata/everykey", tc.golden)
		if *update {
			if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -update to create it)", err)
		}
		if buf.String() != string(want) {
			t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", tc.golden, buf.String(), want)
		}
	}
}
