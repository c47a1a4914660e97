package bundle

import (
	"fmt"
	"strings"

	"github.com/mensylisir/kubexm/bundle/tarz"
)

// A bundle is a gzip-compressed tar unless its name ends in .tar.zst or
// .tzst (tarz): with zstd an export takes 0.4 of gzip's time, the
// unpacking half, and the bundle is 7 % smaller (docs/perf.md). gzip stays
// the default, as the offline bundle has always been a .tar.gz.

// otherArchives are the endings of names that promise an archive or a
// compression Pack does not write.
var otherArchives = []string{".tar", ".zst", ".xz", ".txz", ".bz2", ".tbz2", ".lz4", ".zip", ".7z"}

// CheckName refuses a bundle name whose ending says what the bundle would
// not be (bundle.tar.xz, bundle.tar): a file named so would hold gzip.
func CheckName(name string) error {
	lower := strings.ToLower(name)
	if tarz.IsZstdName(lower) || strings.HasSuffix(lower, ".gz") || strings.HasSuffix(lower, ".tgz") {
		return nil
	}
	for _, s := range otherArchives {
		if strings.HasSuffix(lower, s) {
			return fmt.Errorf("%s: a bundle is a gzip-compressed tar (.tar.gz, .tgz) or a zstd-compressed one (.tar.zst, .tzst), not %s; name it so", name, s)
		}
	}
	return nil
}
