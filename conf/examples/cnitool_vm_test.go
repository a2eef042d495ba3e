//go:build vmtest

package examples

import (
	"testing"

	"github.com/netclass-dev/netclass/test/vm/guest"
)

// TestCnitoolStockKernel runs the examples that need stock-kernel features
// through cnitool, in the VM suite.
func TestCnitoolStockKernel(t *testing.T) {
	for f, feature := range stockKernel() {
		t.Run(f, func(t *testing.T) {
			guest.Require(t, feature)
			runExample(t, f)
		})
	}
}
