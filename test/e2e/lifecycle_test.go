//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/shim/render"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/testbed"
	"github.com/netclass-dev/netclass/test/testbed/bed"
)

// bridgePorts lists the devices enslaved to a bridge of a node.
func bridgePorts(t *testing.T, node bed.Node, bridge string) []string {
	t.Helper()
	out, err := node.Command("ip", "-o", "link", "show", "master", bridge).CombinedOutput()
	if err != nil {
		t.Fatalf("ip link show master %s on node %s: %v: %s", bridge, node.Name, err, out)
	}
	var ports []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(line); len(f) > 1 {
			ports = append(ports, strings.TrimSuffix(f[1], ":"))
		}
	}
	return ports
}

func deletePod(t *testing.T, e *harness.Env, ns, name string) {
	t.Helper()
	ctx := testbed.Context(t, harness.PodTimeout)
	if err := e.Kube.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete pod %s/%s: %v", ns, name, err)
	}
	testbed.Poll(t, ctx, 200*time.Millisecond, "pod "+ns+"/"+name+" gone", func(ctx context.Context) (bool, string, error) {
		_, err := e.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), "", nil
	})
}

// Deleting a pod removes its interface and frees its address: a network with
// a single address serves a second pod only after the first is gone. The pods
// run on node 1: the single address is one host-local range of one node, and
// the test reads node 1's reservations and bridge ports.
func TestDeletePodFreesAddress(t *testing.T) {
	e := harness.Shared(t)
	class := e.Class(t, harness.PodNetworkKind)
	bridge, pn := "e2e"+harness.Unique(6), "e2e-one-"+harness.Unique(6)
	subnet := harness.RandomSubnet()
	only := strings.TrimSuffix(subnet, "0/24") + "10"
	params := harness.BridgeParams(bridge, subnet)
	params["ipam"].(map[string]any)["ranges"] = []any{[]any{map[string]any{"subnet": subnet, "rangeStart": only, "rangeEnd": only}}}
	e.PodNetwork(t, pn, params, nil, bridge)
	ns := testbed.Namespace(t, e.Kube)
	e.WaitDevice(t, class, "", pn, true)
	e.ClaimTemplate(t, ns, "one", class, "", pn, nil)

	e.RunPods(t, harness.PodOn(e.Node, ns, "first", "one"))
	entry := e.Attached(t, ns, "first", "one", "net1")
	if got := harness.Addr(t, entry); got != only {
		t.Fatalf("first pod got %s, want the only address %s", got, only)
	}
	reservation := filepath.Join(render.IPAMStateDir, pn, only)
	if _, err := os.Stat(reservation); err != nil {
		t.Fatalf("no IPAM reservation for %s: %v", only, err)
	}
	if ports := bridgePorts(t, e.Nodes[0], bridge); len(ports) != 1 {
		t.Fatalf("bridge %s has ports %v, want the first pod's veth", bridge, ports)
	}

	deletePod(t, e, ns, "first")
	testbed.Poll(t, testbed.Context(t, time.Minute), 200*time.Millisecond, "address and veth released",
		func(context.Context) (bool, string, error) {
			_, err := os.Stat(reservation)
			ports := bridgePorts(t, e.Nodes[0], bridge)
			return os.IsNotExist(err) && len(ports) == 0, fmt.Sprintf("reservation: %v, ports %v", err, ports), nil
		})
	e.RunPods(t, harness.PodOn(e.Node, ns, "second", "one"))
	if got := harness.Addr(t, e.Attached(t, ns, "second", "one", "net1")); got != only {
		t.Fatalf("second pod got %s, want the freed %s", got, only)
	}
}

// A claim of another namespace cannot attach to a namespaced Network: the
// claim namespace guard (conf/deploy) keeps the scheduler from allocating it
// the network's device, so the pod is never scheduled. (netclass-dra also
// refuses such a device at Prepare: shim/prepare's tests.)
func TestNamespacedNetworkRefused(t *testing.T) {
	e := harness.Shared(t)
	class := e.Class(t, harness.NetworkKind)
	vni := harness.RandomVNI()
	cluster := e.VXLANCluster(t, vni)
	owner := testbed.Namespace(t, e.Kube)
	other := testbed.Namespace(t, e.Kube)
	e.Network(t, owner, "red", cluster, vni, harness.RandomSubnet())
	e.WaitDevice(t, class, owner, "red", true)
	e.ClaimTemplate(t, other, "red", class, owner, "red", nil)
	e.CreatePod(t, harness.Pod(other, "intruder", "red"))
	waitUnschedulable(t, e, other, "intruder")
	claim := e.ClaimOfPod(t, other, "intruder", "red")
	if claim.Status.Allocation != nil {
		t.Fatalf("the intruder's claim was allocated %+v", claim.Status.Allocation.Devices.Results)
	}
	guard := fmt.Sprintf(`.?podNetworkNamespace.orValue(%q) == %q`, other, other)
	if sels := claim.Spec.Devices.Requests[0].Exactly.Selectors; !strings.Contains(sels[len(sels)-1].CEL.Expression, guard) {
		t.Fatalf("the claim's last selector is not the namespace guard: %+v", sels)
	}
}

// A PodNetwork's device follows its state on every node: published with the
// standard attributes in the node's pool while Ready, withdrawn when
// disabled, invalid or deleted.
func TestPublishLifecycle(t *testing.T) {
	e := harness.Shared(t)
	class := e.Class(t, harness.PodNetworkKind)
	bridge, pn := "e2e"+harness.Unique(6), "e2e-life-"+harness.Unique(6)
	e.PodNetwork(t, pn, harness.BridgeParams(bridge, harness.RandomSubnet()), map[string]string{"tier": "data"}, bridge)
	e.WaitPodNetworkCondition(t, pn, "Ready", metav1.ConditionTrue)
	everywhere := func(present bool) {
		t.Helper()
		for _, node := range e.Nodes {
			e.WaitDeviceOn(t, node.Name, class, "", pn, present)
		}
	}
	for _, node := range e.Nodes {
		d := e.WaitDeviceOn(t, node.Name, class, "", pn, true)
		for attr, want := range map[resourceapi.QualifiedName]string{
			contract.AttributeStdPodNetwork: pn, contract.AttributeStdNetworkClass: class,
			contract.AttributePodNetwork: pn, contract.AttributeType: "netclass-bridge", contract.AttributeKind: "PodNetwork",
		} {
			if got := d.Attr(attr); got != want {
				t.Errorf("node %s: attribute %s = %q, want %q", node.Name, attr, got, want)
			}
		}
		if _, ok := d.Device.Attributes[contract.AttributeStdPodNetworkNamespace]; ok {
			t.Errorf("node %s: a cluster-scoped network has podNetworkNamespace", node.Name)
		}
		if !ptr.Deref(d.Device.AllowMultipleAllocations, false) {
			t.Errorf("node %s: the device does not allow multiple allocations", node.Name)
		}
		if d.Pool != node.Name {
			t.Errorf("pool %s, want the node %s", d.Pool, node.Name)
		}
	}

	patch := func(body string) {
		t.Helper()
		_, err := e.NC.MultinetworkV1().PodNetworks().Patch(testbed.Context(t, time.Minute), pn, types.MergePatchType, []byte(body), metav1.PatchOptions{})
		if err != nil {
			t.Fatalf("patch PodNetwork %s with %s: %v", pn, body, err)
		}
	}
	patch(`{"spec":{"enabled":false}}`)
	everywhere(false)
	patch(`{"spec":{"enabled":true}}`)
	everywhere(true)
	patch(`{"spec":{"parameters":{"mtu":5}}}`)
	everywhere(false)
	patch(`{"spec":{"parameters":{"mtu":1400}}}`)
	everywhere(true)
	if err := e.NC.MultinetworkV1().PodNetworks().Delete(testbed.Context(t, time.Minute), pn, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	everywhere(false)
}

// InUse follows the pods: True while a pod's claim is allocated on the
// PodNetwork, False once the pod is gone.
func TestPodNetworkInUse(t *testing.T) {
	e := harness.Shared(t)
	n := e.BridgeNet(t, "e2e-use", "net")
	ns, pn := n.Namespace, n.PodNetwork
	e.WaitPodNetworkCondition(t, pn, "InUse", metav1.ConditionFalse)
	e.RunPods(t, harness.Pod(ns, "user", "net"))
	e.Attached(t, ns, "user", "net", "net1")
	e.WaitPodNetworkCondition(t, pn, "InUse", metav1.ConditionTrue)
	deletePod(t, e, ns, "user")
	e.WaitPodNetworkCondition(t, pn, "InUse", metav1.ConditionFalse)
}

func deleteNow() metav1.DeleteOptions {
	return metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(1))}
}

func waitGone(t *testing.T, e *harness.Env, ns, name string) {
	t.Helper()
	testbed.Poll(t, testbed.Context(t, harness.PodTimeout), 200*time.Millisecond, "pod "+ns+"/"+name+" gone", func(ctx context.Context) (bool, string, error) {
		_, err := e.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), "", nil
	})
}
