//go:build testbed

package e2e

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/testbed"
)

const podTimeout = 2 * time.Minute

// attached checks one pod's claim: its netclass.dev status entry is Ready
// and its networkData is what `ip` shows inside the pod.
func attached(t *testing.T, e *harness.Env, ns, pod, podClaim, ifname string) resourceapi.AllocatedDeviceStatus {
	t.Helper()
	claim := e.ClaimOfPod(t, ns, pod, podClaim)
	_, entry := e.WaitClaimStatus(t, ns, claim.Name, func(d resourceapi.AllocatedDeviceStatus) bool {
		c := harness.ReadyCondition(d)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	nd := entry.NetworkData
	if nd == nil || nd.InterfaceName != ifname {
		e.DRA.Failf(t, "claim %s/%s: networkData %+v, want interface %s", ns, claim.Name, nd, ifname)
	}
	ifc := e.MustIface(t, ns, pod, ifname)
	if nd.HardwareAddress != ifc.MAC || !slices.Equal(nd.IPs, ifc.CIDRs) {
		t.Fatalf("claim %s/%s says %s has %s %v; inside pod %s it has %s %v",
			ns, claim.Name, ifname, nd.HardwareAddress, nd.IPs, pod, ifc.MAC, ifc.CIDRs)
	}
	return entry
}

func runPods(t *testing.T, e *harness.Env, pods ...*corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		e.CreatePod(t, p)
	}
	for _, p := range pods {
		testbed.WaitForPodRunning(t, e.Kube, p.Namespace, p.Name, podTimeout)
	}
}

func addrOf(t *testing.T, d resourceapi.AllocatedDeviceStatus) string {
	t.Helper()
	if d.NetworkData == nil || len(d.NetworkData.IPs) == 0 {
		t.Fatalf("no address in %+v", d)
	}
	ip, _, _ := cut(d.NetworkData.IPs[0], "/")
	return ip
}

// Two pods with a claim on a netclass-bridge PodNetwork reach each other over net1.
func TestPodNetworkBridge(t *testing.T) {
	e := harness.Shared(t)
	e.ForeignSlice(t)
	class := e.Class(t, harness.PodNetworkKind)
	bridge, pn := "e2e"+harness.Unique(6), "e2e-blue-"+harness.Unique(6)
	e.PodNetwork(t, pn, harness.BridgeParams(bridge, harness.RandomSubnet()), nil, bridge)
	ns := testbed.Namespace(t, e.Kube)
	e.WaitDevice(t, class, "", pn, true)
	e.ClaimTemplate(t, ns, "blue", class, "", pn, nil)
	runPods(t, e, harness.Pod(ns, "a", "blue"), harness.Pod(ns, "b", "blue"))
	a := attached(t, e, ns, "a", "blue", "net1")
	b := attached(t, e, ns, "b", "blue", "net1")
	if a.Device != b.Device || a.ShareID == nil || b.ShareID == nil || *a.ShareID == *b.ShareID {
		t.Fatalf("both pods should share one device with their own share: a %s/%v, b %s/%v", a.Device, a.ShareID, b.Device, b.ShareID)
	}
	e.Ping(t, ns, "a", "net1", addrOf(t, b))
	e.Ping(t, ns, "b", "net1", addrOf(t, a))
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
	runPods(t, e, harness.Pod(ns, "a", "red"), harness.Pod(ns, "b", "red"))
	a := attached(t, e, ns, "a", "red", "net1")
	b := attached(t, e, ns, "b", "red", "net1")
	e.Ping(t, ns, "a", "net1", addrOf(t, b))
	e.Ping(t, ns, "b", "net1", addrOf(t, a))
}
