package daemon

import (
	"os"
	"path/filepath"
	"syscall"
)

// injectFault returns the daemon's fault injection, for the end-to-end
// tests of what a crash at the worst moment leaves: when the file
// <state dir>/faults/<point> exists at a fault point, the daemon removes it
// and kills itself with SIGKILL, as an OOM kill or a node's power would.
// Nothing else creates that directory.
func injectFault(stateDir string) func(point string) {
	return func(point string) {
		f := filepath.Join(stateDir, "faults", point)
		if os.Remove(f) == nil {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
	}
}
