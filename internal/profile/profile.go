// Package profile writes a CPU profile of a whole kubexm command.
package profile

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"
)

// StartCPU writes a CPU profile of the process to path (for `go tool
// pprof`) until stop is called, when path is set: how the engine's own time
// is spent is the one part of a run's wall time that does not depend on the
// hosts. A profile that cannot be written is said on stderr, and the
// command runs without one.
func StartCPU(path string, stderr io.Writer) (stop func()) {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(stderr, "KUBEXM_CPUPROFILE: %v; running without a profile\n", err)
		if f != nil {
			f.Close()
		}
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
