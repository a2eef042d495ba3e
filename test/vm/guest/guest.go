// Package guest helps tests that need kernel features this machine's kernel lacks (802.1Q, bridge
// VLAN filtering, tc flower/police/pedit/skbedit, dummy, ipvlan, netdevsim). Such tests call
// Require, which fails them loudly, never skips them, where the kernel lacks a feature; they
// pass inside the VM harness (make test-vm, see test/vm).
package guest

import (
	"fmt"
	"os"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
)

// InVM tells whether the test runs inside the VM harness (NETCLASS_VM=1).
func InVM() bool { return os.Getenv("NETCLASS_VM") == "1" }

// NewNetNS creates a named network namespace (visible to `ip netns`) without entering it, and
// deletes it when the test ends.
func NewNetNS(t testing.TB) ns.NetNS {
	t.Helper()
	n, err := newNetNS()
	if err != nil {
		t.Fatalf("create network namespace: %v", err)
	}
	t.Cleanup(func() {
		if err := deleteNetNS(n); err != nil {
			t.Errorf("%v", err)
		}
	})
	return n
}

func newNetNS() (ns.NetNS, error) { return testutils.NewNS() }

func deleteNetNS(n ns.NetNS) error {
	path := n.Path()
	n.Close()
	if err := testutils.UnmountNS(n); err != nil {
		return fmt.Errorf("delete network namespace %s: %w", path, err)
	}
	return nil
}
