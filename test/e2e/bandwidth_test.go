//go:build testbed

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/netclass-dev/netclass/api/contract"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/plugins/qosport"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/nstest"
	"github.com/netclass-dev/netclass/test/testbed"
	"github.com/netclass-dev/netclass/test/traffic"
)

// bandwidthPolicy is the network's bandwidth in the test: 100 Mbit/s per
// node, claims of 10 to 50 Mbit/s in steps of 10.
const bandwidthPolicy = `{"capacity": "100M", "default": "10M", "min": "10M", "max": "50M", "step": "10M"}`

// Bandwidth as a DRA consumable capacity, end to end on two nodes: every node
// publishes the network's device with capacity 100M and the policy; claims
// request 30M each; of four pods pinned to node 1, three run and the fourth
// stays Pending with the scheduler's reason, until one of the three goes.
// Each running pod's claim status shows 30M, and its attachment's egress is
// shaped to 30 Mbit/s in the kernel (the tbf on the IFB of its host end). A
// request above the policy's max is never allocated, and says why.
func TestBandwidthCapacity(t *testing.T) {
	e := harness.Shared(t)
	class := e.Class(t, harness.PodNetworkKind)
	bridge, pn := "e2e"+harness.Unique(6), "e2e-bw-"+harness.Unique(6)
	e.PodNetwork(t, pn, harness.BridgeParams(bridge, harness.RandomSubnet()), nil, bridge)
	annotate(t, e, pn, bandwidthPolicy)
	ns := testbed.Namespace(t, e.Kube)
	for _, node := range e.Nodes {
		waitCapacity(t, e, node.Name, class, "", pn, "100M default 10M range [10M, 50M] step 10M")
	}
	bandwidthTemplate(t, e, ns, "bw30", class, pn, "30M")
	bandwidthTemplate(t, e, ns, "bw60", class, pn, "60M")
	bandwidthTemplate(t, e, ns, "bw25", class, pn, "25M")

	var pods []*corev1.Pod
	for i := range 3 {
		pods = append(pods, harness.PodOn(e.Node, ns, fmt.Sprintf("p%d", i), "bw30"))
	}
	e.RunPodsInTurn(t, pods...)
	fourth := harness.PodOn(e.Node, ns, "p3", "bw30")
	e.CreatePod(t, fourth)
	msg := waitClaimUnallocatable(t, e, ns, "p3")
	t.Logf("the fourth pod of 30M on a node of 100M: PodScheduled=False: %s", msg)

	for _, p := range []string{"p0", "p1", "p2"} {
		checkAllocated(t, e, ns, p, 30_000_000)
	}
	if err := e.Kube.CoreV1().Pods(ns).Delete(testbed.Context(t, time.Minute), "p0", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	testbed.WaitForPodRunning(t, e.Kube, ns, "p3", harness.PodTimeout)
	checkAllocated(t, e, ns, "p3", 30_000_000)
	measureCeiling(t, e, ns, "p1", "p2", 30_000_000)

	over := harness.PodOn(e.Node, ns, "over", "bw60")
	e.CreatePod(t, over)
	t.Logf("a request of 60M, above the policy's max of 50M: PodScheduled=False: %s", waitClaimUnallocatable(t, e, ns, "over"))

	// The other node accounts its own 100M: a request of 25M, off the
	// policy's step, runs there with 30M (min + 2 steps), the scheduler's rounding.
	other := e.Nodes[1].Name
	e.RunPods(t, harness.PodOn(other, ns, "rounded", "bw25"))
	claim := e.ClaimOfPod(t, ns, "rounded", "bw25")
	if got := consumedBandwidth(claim); got.Value() != 30_000_000 {
		t.Fatalf("a request of 25M with step 10M from 10M consumed %s, want 30M", got.String())
	}
	e.WaitClaimStatus(t, ns, claim.Name, hasBandwidth("30M"))
}

// A Network inherits its ClusterNetwork's bandwidth field by field and may
// lower the capacity: its device publishes the merge, a claim without a
// request gets the default (shaped to it, shown in its status). A Network
// raising the capacity is not Ready (InvalidConfig) and not offered.
func TestBandwidthOfNetworks(t *testing.T) {
	e := harness.Shared(t)
	class := e.Class(t, harness.NetworkKind)
	vni := harness.RandomVNI()
	cluster := e.VXLANCluster(t, vni)
	patchSpec(t, e, "ClusterNetwork", "", cluster, `{"spec":{"bandwidth":{"capacity":"1G","default":"50M","step":"10M"}}}`)
	ns := testbed.Namespace(t, e.Kube)
	e.Network(t, ns, "red", cluster, vni, harness.RandomSubnet())
	patchSpec(t, e, "Network", ns, "red", `{"spec":{"bandwidth":{"capacity":"200M"}}}`)
	e.Network(t, ns, "blue", cluster, vni+1, harness.RandomSubnet())
	patchSpec(t, e, "Network", ns, "blue", `{"spec":{"bandwidth":{"capacity":"2G"}}}`)
	waitCapacity(t, e, e.Node, class, ns, "red", "200M default 50M range [0, 200M] step 10M")
	msg := waitNetworkInvalid(t, e, ns, "blue")
	t.Logf("a Network raising its ClusterNetwork's capacity: Ready=False InvalidConfig: %s", msg)
	if !strings.Contains(msg, "spec.bandwidth.capacity: 2G exceeds the capacity of ClusterNetwork") {
		t.Errorf("the reason does not name the field: %s", msg)
	}

	e.ClaimTemplate(t, ns, "red", class, ns, "red", nil)
	e.RunPods(t, harness.PodOn(e.Node, ns, "a", "red"))
	claim := e.ClaimOfPod(t, ns, "a", "red")
	if got := consumedBandwidth(claim); got.Value() != 50_000_000 {
		t.Fatalf("a claim without a request consumed %s, want the default 50M", got.String())
	}
	e.WaitClaimStatus(t, ns, claim.Name, hasBandwidth("50M"))
	rate, err := egressRate(e.Attachment(t, getPod(t, e, ns, "a").UID, "net1").NetNS)
	if err != nil || rate != 50_000_000/8 {
		t.Fatalf("egress of the pod shaped to %d bytes/s (%v), want %d", rate, err, 50_000_000/8)
	}
}

// patchSpec merge-patches a ClusterNetwork (namespace "") or a Network.
func patchSpec(t *testing.T, e *harness.Env, kind, namespace, name, patch string) {
	t.Helper()
	ctx := testbed.Context(t, time.Minute)
	var err error
	if kind == "ClusterNetwork" {
		_, err = e.NC.NetclassV1alpha1().ClusterNetworks().Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	} else {
		_, err = e.NC.NetclassV1alpha1().Networks(namespace).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	}
	if err != nil {
		t.Fatalf("patch %s %s/%s with %s: %v", kind, namespace, name, patch, err)
	}
}

// waitNetworkInvalid waits until the controller finds the Network's config
// invalid, and returns its message.
func waitNetworkInvalid(t *testing.T, e *harness.Env, ns, name string) string {
	t.Helper()
	var msg string
	testbed.Poll(t, testbed.Context(t, harness.WaitTimeout), 200*time.Millisecond, "Network "+ns+"/"+name+" InvalidConfig",
		func(ctx context.Context) (bool, string, error) {
			n, err := e.NC.NetclassV1alpha1().Networks(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			c := meta.FindStatusCondition(n.Status.Conditions, ncv1.ConditionReady)
			if c == nil {
				return false, "no Ready condition", nil
			}
			msg = c.Message
			return c.Status == metav1.ConditionFalse && c.Reason == ncv1.ReasonInvalidConfig && c.ObservedGeneration == n.Generation,
				fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message), nil
		})
	return msg
}

// annotate declares the PodNetwork's bandwidth.
func annotate(t *testing.T, e *harness.Env, pn, policy string) {
	t.Helper()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{ncv1.AnnotationBandwidth: policy}}})
	if _, err := e.NC.MultinetworkV1().PodNetworks().Patch(testbed.Context(t, time.Minute), pn, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("annotate PodNetwork %s: %v", pn, err)
	}
}

// waitCapacity waits until the node publishes the network's device with
// the capacity and request policy (capacityText).
func waitCapacity(t *testing.T, e *harness.Env, node, class, namespace, pn, want string) {
	t.Helper()
	testbed.Poll(t, testbed.Context(t, harness.WaitTimeout), 100*time.Millisecond, "bandwidth capacity of "+pn+" on "+node,
		func(ctx context.Context) (bool, string, error) {
			d, ok, err := e.FindDeviceOn(ctx, node, class, namespace, pn)
			if err != nil || !ok {
				return false, fmt.Sprintf("device found=%v (%v)", ok, err), nil
			}
			got := capacityText(d.Device.Capacity[contract.CapacityBandwidth])
			return got == want, "published " + got, nil
		})
}

func capacityText(c resourceapi.DeviceCapacity) string {
	p := c.RequestPolicy
	if p == nil || p.Default == nil || p.ValidRange == nil || p.ValidRange.Min == nil || p.ValidRange.Max == nil || p.ValidRange.Step == nil {
		return fmt.Sprintf("%s, policy %+v", c.Value.String(), p)
	}
	r := p.ValidRange
	return fmt.Sprintf("%s default %s range [%s, %s] step %s", c.Value.String(), p.Default, r.Min, r.Max, r.Step)
}

// bandwidthTemplate is a claim template on the network requesting bandwidth.
func bandwidthTemplate(t *testing.T, e *harness.Env, ns, name, class, pn, bw string) {
	t.Helper()
	req, _ := harness.Request("net", class, "", pn, nil)
	req.Exactly.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
		contract.CapacityBandwidth: resource.MustParse(bw)}}
	tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{
			Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{req}}}}}
	if _, err := e.Kube.ResourceV1().ResourceClaimTemplates(ns).Create(testbed.Context(t, time.Minute), tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ResourceClaimTemplate %s/%s: %v", ns, name, err)
	}
}

// waitClaimUnallocatable waits until the scheduler says the pod cannot be placed
// because its claim cannot be allocated, and returns what it said.
func waitClaimUnallocatable(t *testing.T, e *harness.Env, ns, pod string) string {
	t.Helper()
	var msg string
	testbed.Poll(t, testbed.Context(t, harness.WaitTimeout), 250*time.Millisecond, "pod "+ns+"/"+pod+" unschedulable for its claim",
		func(ctx context.Context) (bool, string, error) {
			p, err := e.Kube.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			if p.Spec.NodeName != "" {
				return false, "", fmt.Errorf("pod %s/%s was scheduled to %s", ns, pod, p.Spec.NodeName)
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
					msg = c.Reason + ": " + c.Message
					return c.Reason == corev1.PodReasonUnschedulable && strings.Contains(c.Message, "cannot allocate all claims"), msg, nil
				}
			}
			return false, "no PodScheduled=False yet", nil
		})
	return msg
}

// checkAllocated checks a running pod's allocation end to end: the claim's
// allocation result consumed it, the claim's status shows it, and the
// egress of the pod's attachment is shaped to it in the kernel.
func checkAllocated(t *testing.T, e *harness.Env, ns, pod string, bits int64) {
	t.Helper()
	claim := e.ClaimOfPod(t, ns, pod, "bw30")
	if consumed := consumedBandwidth(claim); consumed.Value() != bits {
		t.Fatalf("pod %s: claim %s consumed %s of bandwidth, want %d", pod, claim.Name, consumed.String(), bits)
	}
	want := bandwidthText(bits)
	_, st := e.WaitClaimStatus(t, ns, claim.Name, hasBandwidth(want))
	t.Logf("pod %s: claim %s status data %s, Ready: %s", pod, claim.Name, st.Data.Raw, st.Conditions[0].Message)
	p := getPod(t, e, ns, pod)
	rate, err := egressRate(e.Attachment(t, p.UID, "net1").NetNS)
	if err != nil {
		t.Fatalf("pod %s: %v", pod, err)
	}
	if rate != uint64(bits/8) {
		t.Fatalf("pod %s: egress shaped to %d bytes/s, want %d (its allocation of %s)", pod, rate, bits/8, want)
	}
}

// measureCeiling streams TCP from one pod to another over net1 for 3 s and
// checks what the receiver got: at most the sender's allocation + 10%, and
// at least half of it (the measurement is of the shaper, not of a broken path).
func measureCeiling(t *testing.T, e *harness.Env, ns, from, to string, bits float64) {
	t.Helper()
	src, dst := getPod(t, e, ns, from), getPod(t, e, ns, to)
	addr := netip.MustParseAddr(harness.Addr(t, e.Attached(t, ns, to, "bw30", "net1")))
	client := &nstest.NS{Name: ns + "/" + from, Path: e.Attachment(t, src.UID, "net1").NetNS}
	server := &nstest.NS{Name: ns + "/" + to, Path: e.Attachment(t, dst.UID, "net1").NetNS}
	got, err := traffic.TCPRate(client, server, addr, 5201, 3*time.Second)
	if err != nil {
		t.Fatalf("TCP from %s to %s: %v", from, to, err)
	}
	t.Logf("TCP from %s (allocated %.0f Mbit/s) to %s: %.1f Mbit/s received", from, bits/1e6, to, got/1e6)
	if got > 1.1*bits || got < 0.5*bits {
		t.Fatalf("pod %s sent %.1f Mbit/s, want at most its allocation %.0f Mbit/s + 10%% (and at least half of it)", from, got/1e6, bits/1e6)
	}
}

// consumedBandwidth is the bandwidth the claim's allocation consumed on netclass's device.
func consumedBandwidth(claim *resourceapi.ResourceClaim) resource.Quantity {
	var consumed resource.Quantity
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver == contract.DriverName {
			consumed = r.ConsumedCapacity[contract.CapacityBandwidth]
		}
	}
	return consumed
}

// hasBandwidth accepts a status entry whose data shows the allocation.
func hasBandwidth(want string) func(resourceapi.AllocatedDeviceStatus) bool {
	return func(d resourceapi.AllocatedDeviceStatus) bool {
		var data contract.ClaimStatusData
		return d.Data != nil && json.Unmarshal(d.Data.Raw, &data) == nil && data.Bandwidth == want
	}
}

func bandwidthText(bits int64) string {
	q := resource.NewQuantity(bits, resource.DecimalSI)
	return q.String()
}

// egressRate reads the rate of the tbf shaping what the pod sends on net1:
// the root qdisc of the IFB its host end's ingress is redirected to (node
// 1's, this machine's namespace).
func egressRate(podNS string) (uint64, error) {
	host, err := qosport.HostEnd(podNS, "net1")
	if err != nil {
		return 0, err
	}
	ifb, err := netlink.LinkByName(qosport.HostIFBName(host))
	if err != nil {
		return 0, fmt.Errorf("the IFB of host end %s: %w", host, err)
	}
	qdiscs, err := netlink.QdiscList(ifb)
	if err != nil {
		return 0, err
	}
	for _, q := range qdiscs {
		if tbf, ok := q.(*netlink.Tbf); ok && q.Attrs().Parent == netlink.HANDLE_ROOT {
			return tbf.Rate, nil
		}
	}
	return 0, fmt.Errorf("no root tbf on %s: %v", ifb.Attrs().Name, qdiscs)
}
