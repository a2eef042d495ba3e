//go:build testbed

package e2e

import (
	"testing"

	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/testbed"
)

// Two pods with a claim on a netclass-bridge PodNetwork reach each other over net1.
func TestPodNetworkBridge(t *testing.T) {
	e := harness.Shared(t)
	e.ForeignSlice(t)
	ns := e.BridgeNet(t, "e2e-blue", "blue").Namespace
	e.RunPods(t, harness.Pod(ns, "a", "blue"), harness.Pod(ns, "b", "blue"))
	a := e.Attached(t, ns, "a", "blue", "net1")
	b := e.Attached(t, ns, "b", "blue", "net1")
	if a.Device != b.Device || a.ShareID == nil || b.ShareID == nil || *a.ShareID == *b.ShareID {
		t.Fatalf("both pods should share one device with their own share: a %s/%v, b %s/%v", a.Device, a.ShareID, b.Device, b.ShareID)
	}
	e.Ping(t, ns, "a", "net1", harness.Addr(t, b))
	e.Ping(t, ns, "b", "net1", harness.Addr(t, a))
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
	e.RunPods(t, harness.Pod(ns, "a", "red"), harness.Pod(ns, "b", "red"))
	a := e.Attached(t, ns, "a", "red", "net1")
	b := e.Attached(t, ns, "b", "red", "net1")
	e.Ping(t, ns, "a", "net1", harness.Addr(t, b))
	e.Ping(t, ns, "b", "net1", harness.Addr(t, a))
}
