//go:build testbed

package e2e

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/nstest"
	"github.com/netclass-dev/netclass/test/testbed"
	"github.com/netclass-dev/netclass/test/traffic"
)

// An admin's dscpPolicy on a ClusterNetwork reaches the pods of its
// Networks: a pod's own EF leaves its port re-marked, an allowed value
// passes; a Network asking for a DSCP the policy leaves out is not Ready
// (InvalidConfig, the field named); the admin removing the policy lets the
// running pod's EF through, without restarting it.
func TestDSCPPolicyOfAClusterNetwork(t *testing.T) {
	e := harness.Shared(t)
	class := e.Class(t, harness.NetworkKind)
	vni := harness.RandomVNI()
	cluster := e.VXLANCluster(t, vni)
	setDSCPPolicy(t, e, cluster, &ncv1.DSCPPolicy{Allowed: []ncv1.DSCPRange{{First: 0, Last: 40}}, Remark: ptr.To[int32](8)})
	ns := testbed.Namespace(t, e.Kube)
	e.Network(t, ns, "red", cluster, vni, harness.RandomSubnet())
	e.WaitDevice(t, class, ns, "red", true)
	e.ClaimTemplate(t, ns, "red", class, ns, "red", nil)
	e.RunPods(t, harness.PodOn(e.Node, ns, "a", "red"), harness.PodOn(e.Node, ns, "b", "red"))
	e.Attached(t, ns, "a", "red", "net1")
	bAddr := harness.Addr(t, e.Attached(t, ns, "b", "red", "net1"))
	a, b := getPod(t, e, ns, "a"), getPod(t, e, ns, "b")
	e.Ping(t, ns, "a", "net1", bAddr)

	dscpSeen(t, e, a, b, bAddr, 46, 8, "the pod's own EF under a policy of 0-40")
	dscpSeen(t, e, a, b, bAddr, 34, 34, "the pod's own AF41, allowed")

	ef := &ncv1.Network{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ef"},
		Spec: ncv1.NetworkSpec{ClusterNetworkName: cluster, VNI: ptr.To(harness.RandomVNI()), QoS: &ncv1.InterfaceQoS{DSCP: ptr.To[int32](46)},
			IPAM: &runtime.RawExtension{Raw: []byte(fmt.Sprintf(`{"type":"host-local","ranges":[[{"subnet":%q}]]}`, harness.RandomSubnet()))}}}
	if _, err := e.NC.NetclassV1alpha1().Networks(ns).Create(testbed.Context(t, time.Minute), ef, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNetworkReady(t, e, ns, "ef", metav1.ConditionFalse, ncv1.ReasonInvalidConfig, "qos.dscp: 46 is not allowed by dscpPolicy (allowed 0-40)")

	setDSCPPolicy(t, e, cluster, nil)
	dscpSeen(t, e, a, b, bAddr, 46, 46, "the policy removed")
	if got := getPod(t, e, ns, "a"); got.UID != a.UID || restarts(got) > 0 {
		t.Error("pod a was recreated or restarted")
	}
}

// setDSCPPolicy sets (nil: removes) a ClusterNetwork's dscpPolicy.
func setDSCPPolicy(t *testing.T, e *harness.Env, cluster string, p *ncv1.DSCPPolicy) {
	t.Helper()
	ctx := testbed.Context(t, time.Minute)
	cns := e.NC.NetclassV1alpha1().ClusterNetworks()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cn, err := cns.Get(ctx, cluster, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cn.Spec.DSCPPolicy = p
		_, err = cns.Update(ctx, cn, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("set the dscpPolicy of ClusterNetwork %s: %v", cluster, err)
	}
}

// dscpSeen sends UDP marked with dscp from pod src's net1 to dst (on
// dstAddr) until a capture on dst's net1, started afresh for each attempt,
// sees two of the datagrams with want; the rule agent may take until
// liveTimeout to follow an edit.
func dscpSeen(t *testing.T, e *harness.Env, src, dst *corev1.Pod, dstAddr string, dscp, want uint8, what string) {
	t.Helper()
	from := &nstest.NS{Name: src.Namespace + "/" + src.Name, Path: e.Attachment(t, src.UID, "net1").NetNS}
	at := &nstest.NS{Name: dst.Namespace + "/" + dst.Name, Path: e.Attachment(t, dst.UID, "net1").NetNS}
	addr := netip.MustParseAddr(dstAddr)
	var last []traffic.Packet
	for port := uint16(7200); port < 7200+uint16(liveTimeout/time.Second); port++ {
		s, err := traffic.Sniff(at, "net1")
		if err != nil {
			t.Fatalf("capture on net1 of pod %s: %v", dst.Name, err)
		}
		if err := traffic.SendUDP(from, addr, port, dscp<<2, 2, 10*time.Millisecond); err != nil {
			s.Close()
			t.Fatalf("%s: send from pod %s: %v", what, src.Name, err)
		}
		got := s.WaitFor(func(p traffic.Packet) bool { return p.DstPort == port && p.DSCP == want }, 2, time.Second)
		last = s.Packets()
		s.Close()
		if len(got) >= 2 {
			return
		}
	}
	t.Fatalf("%s: pod %s sent DSCP %d; %s never saw two datagrams with DSCP %d within %v; the last attempt saw %+v",
		what, src.Name, dscp, dst.Name, want, liveTimeout, last)
}
