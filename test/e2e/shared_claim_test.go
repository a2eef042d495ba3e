//go:build testbed

package e2e

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/testbed"
)

// TestSharedClaimStatusFollowsItsPods: a ResourceClaim two pods of one node
// share gives each its own interface; the claim's status lists both
// (data.pods), and once one pod is deleted only the other's: written again
// when the deleted pod's sandbox stops, not left naming an interface and
// an address that are gone (the policies' peers read it). A third pod that
// joins the prepared claim later gets its interface too.
func TestSharedClaimStatusFollowsItsPods(t *testing.T) {
	e := harness.Shared(t)
	n := e.Nodes[0]
	bn := e.BridgeNet(t, "e2e-shared", "net")
	ns := bn.Namespace
	req, _ := harness.Request("net", bn.Class, "", bn.PodNetwork, nil)
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{req}}}}
	if _, err := e.Kube.ResourceV1().ResourceClaims(ns).Create(testbed.Context(t, time.Minute), claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pods []*corev1.Pod
	for _, name := range []string{"a", "b"} {
		p := testbed.OnNode(testbed.Pod(ns, name, "sleep", "3600"), n.Name)
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "net", ResourceClaimName: ptr.To("shared")}}
		pods = append(pods, p)
	}
	e.RunPods(t, pods...)
	a, b := e.MustIface(t, ns, "a", "net1"), e.MustIface(t, ns, "b", "net1")
	podIPs := func(d resourceapi.AllocatedDeviceStatus) [][]string {
		var data contract.ClaimStatusData
		if d.Data == nil || json.Unmarshal(d.Data.Raw, &data) != nil {
			return nil
		}
		var out [][]string
		for _, p := range data.Pods {
			out = append(out, p.IPs)
		}
		return out
	}
	e.WaitClaimStatus(t, ns, "shared", func(d resourceapi.AllocatedDeviceStatus) bool {
		got := podIPs(d)
		return len(got) == 2 && slices.ContainsFunc(got, func(ips []string) bool { return slices.Equal(ips, a.CIDRs) }) &&
			slices.ContainsFunc(got, func(ips []string) bool { return slices.Equal(ips, b.CIDRs) })
	})
	deletePodAndWait(t, e, ns, "a")
	_, st := e.WaitClaimStatus(t, ns, "shared", func(d resourceapi.AllocatedDeviceStatus) bool {
		return len(podIPs(d)) == 0 && d.NetworkData != nil && slices.Equal(d.NetworkData.IPs, b.CIDRs)
	})
	if c := harness.ReadyCondition(st); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("Ready of the claim b still uses: %+v", c)
	}
	// Pod c joins the claim the node has prepared already: the kubelet does
	// not prepare it again, and c still gets its interface.
	c := testbed.OnNode(testbed.Pod(ns, "c", "sleep", "3600"), n.Name)
	c.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "net", ResourceClaimName: ptr.To("shared")}}
	e.RunPods(t, c)
	late := e.MustIface(t, ns, "c", "net1")
	e.WaitClaimStatus(t, ns, "shared", func(d resourceapi.AllocatedDeviceStatus) bool {
		got := podIPs(d)
		return len(got) == 2 && slices.ContainsFunc(got, func(ips []string) bool { return slices.Equal(ips, late.CIDRs) })
	})
}
