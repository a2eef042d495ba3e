//go:build testbed

package e2e

import (
	"fmt"
	"testing"

	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/testbed"
)

// On every node, two pods with a claim on a netclass-bridge PodNetwork share
// the node's device and reach each other over net1. The pods of a node are
// pinned to it: a bridge is node-local.
func TestPodNetworkBridge(t *testing.T) {
	e := harness.Shared(t)
	e.ForeignSlice(t)
	ns := e.BridgeNet(t, "e2e-blue", "blue").Namespace
	for i, node := range e.Nodes {
		t.Run(node.Name, func(t *testing.T) {
			pa, pb := fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", i)
			e.RunPods(t, harness.PodOn(node.Name, ns, pa, "blue"), harness.PodOn(node.Name, ns, pb, "blue"))
			a := e.Attached(t, ns, pa, "blue", "net1")
			b := e.Attached(t, ns, pb, "blue", "net1")
			if a.Device != b.Device || a.ShareID == nil || b.ShareID == nil || *a.ShareID == *b.ShareID {
				t.Fatalf("both pods should share one device with their own share: a %s/%v, b %s/%v", a.Device, a.ShareID, b.Device, b.ShareID)
			}
			if a.Pool != node.Name {
				t.Fatalf("pods on node %s got a device of pool %s", node.Name, a.Pool)
			}
			e.Ping(t, ns, pa, "net1", harness.Addr(t, b))
			e.Ping(t, ns, pb, "net1", harness.Addr(t, a))
		})
	}
}

// Two pods with a claim on a namespaced VXLAN Network reach each other over net1.
func TestVXLANNetwork(t *testing.T) {
	e := harness.Shared(t)
	e.ForeignSlice(t)
	class := e.Class(t, harness.NetworkKind)
	vni := harness.RandomVNI()
	cluster := e.VXLANCluster(t, vni)
	ns := testbed.Namespace(t, e.Kube)
	e.Network(t, ns, "red", cluster, vni, harness.RandomSubnet())
	e.WaitDevice(t, class, ns, "red", true)
	e.ClaimTemplate(t, ns, "red", class, ns, "red", nil)
	// On node 1: this ClusterNetwork names node 1's address as its VTEP (local), so
	// only node 1 can carry it. Networks whose underlay each node picks, across
	// nodes: TestVXLANNetworkAcrossNodes (multinode_test.go).
	e.RunPods(t, harness.PodOn(e.Node, ns, "a", "red"), harness.PodOn(e.Node, ns, "b", "red"))
	a := e.Attached(t, ns, "a", "red", "net1")
	b := e.Attached(t, ns, "b", "red", "net1")
	e.Ping(t, ns, "a", "net1", harness.Addr(t, b))
	e.Ping(t, ns, "b", "net1", harness.Addr(t, a))
}
