package kubexm_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The machine's dependencies have one list, test/deps/packages.txt, that
// make demo, make check and CI install through test/deps/install.sh, so the
// README's first commands cannot drift from what CI installs.
func TestOnePackageList(t *testing.T) {
	listed := map[string]bool{}
	data, err := os.ReadFile("test/deps/packages.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		name, _, _ := strings.Cut(line, "#")
		if name = strings.TrimSpace(name); name != "" {
			if strings.ContainsAny(name, " \t") {
				t.Errorf("packages.txt: %q: one package a line", name)
			}
			listed[name] = true
		}
	}

	ci := read(t, ".ci/run")
	if !regexp.MustCompile(`(?m)^deps\(\) \{(?:\n.*)*?\n  test/deps/install\.sh\n`).MatchString(ci) {
		t.Error(".ci/run's deps stage does not run test/deps/install.sh")
	}
	if strings.Contains(ci, "apt-get install") {
		t.Error(".ci/run installs packages of its own: add them to test/deps/packages.txt")
	}

	mk := read(t, "Makefile")
	for _, rule := range []string{`(?m)^demo: deps$`, `(?m)^deps:\n\ttest/deps/install\.sh$`, `(?m)^check:\n\t\$\(SUDO\) bash \.ci/run$`} {
		if !regexp.MustCompile(rule).MatchString(mk) {
			t.Errorf("Makefile lacks %s", rule)
		}
	}
	readme := read(t, "README.md")
	for _, cmd := range []string{"test/deps/install.sh && make demo", "test/deps/install.sh && make check"} {
		if i := strings.Index(readme, cmd); i < 0 || i > 300 {
			t.Errorf("README.md does not start with %q", cmd)
		}
	}

	// Every package a script tells the user to install is on the list.
	hint := regexp.MustCompile(`apt-get install((?: +-{1,2}[a-z-]+)*)((?: +[a-z0-9][a-z0-9.+-]+)+)`)
	scripts, _ := filepath.Glob("test/*/*.sh")
	more, _ := filepath.Glob("test/*.sh")
	for _, f := range append(append(scripts, more...), ".ci/run") {
		switch f {
		case filepath.Join("test", "hosts", "build-layer.sh"):
			continue // installs into a test machine's layer, not this machine
		case filepath.Join("test", "scale", "bench.sh"):
			continue // make bench-scale's own tools (ansible-core to compare with), neither demo nor tests
		}
		for _, m := range hint.FindAllStringSubmatch(read(t, f), -1) {
			for _, p := range strings.Fields(m[2]) {
				if !listed[p] {
					t.Errorf("%s names the package %s, which test/deps/packages.txt lacks", f, p)
				}
			}
		}
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
