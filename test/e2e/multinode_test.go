//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/testbed"
	"github.com/netclass-dev/netclass/test/testbed/bed"
)

// twoNodes fails the test unless the bed has at least two nodes.
func twoNodes(t *testing.T, e *harness.Env) (bed.Node, bed.Node) {
	t.Helper()
	if len(e.Nodes) < 2 {
		t.Fatalf("this test joins pods across nodes: the test bed has %d node(s); run it with TESTBED_NODES=2 or more", len(e.Nodes))
	}
	return e.Nodes[0], e.Nodes[1]
}

// autoVXLANCluster is harness.AutoVXLANCluster.
func autoVXLANCluster(t *testing.T, e *harness.Env) string {
	t.Helper()
	return e.AutoVXLANCluster(t)
}

// noPing fails the test when addr answers the pod over ifname.
func noPing(t *testing.T, e *harness.Env, ns, pod, ifname, addr string) {
	t.Helper()
	ctx := testbed.Context(t, time.Minute)
	out, _, err := testbed.Exec(ctx, e.Rest, ns, pod, "main", "ping", "-c", "2", "-W", "1", "-I", ifname, addr)
	if err == nil {
		t.Fatalf("%s/%s reaches %s over %s, which must be isolated from it:\n%s", ns, pod, addr, ifname, out)
	}
}

// nodeNetworkOf waits for the Ready NodeNetwork of a ClusterNetwork on a node.
func nodeNetworkOf(t *testing.T, e *harness.Env, cluster, node string) *ncv1.NodeNetwork {
	t.Helper()
	var nn *ncv1.NodeNetwork
	testbed.Poll(t, testbed.Context(t, 2*time.Minute), 100*time.Millisecond, "NodeNetwork of "+cluster+" on "+node+" Ready",
		func(ctx context.Context) (bool, string, error) {
			list, err := e.NC.NetclassV1alpha1().NodeNetworks().List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, "", err
			}
			for i := range list.Items {
				if n := &list.Items[i]; n.Spec.ClusterNetworkName == cluster && n.Spec.NodeName == node {
					nn = n
					return meta.IsStatusConditionTrue(n.Status.Conditions, ncv1.ConditionReady), fmt.Sprint(n.Status.Conditions), nil
				}
			}
			return false, "no NodeNetwork", nil
		})
	return nn
}

// waitFlood waits until a VXLAN device on a node floods to want (present) or not (absent).
func waitFlood(t *testing.T, n bed.Node, dev, addr string, present bool) {
	t.Helper()
	what := fmt.Sprintf("%s on %s flooding to %s: %v", dev, n.Name, addr, present)
	testbed.Poll(t, testbed.Context(t, time.Minute), 50*time.Millisecond, what, func(ctx context.Context) (bool, string, error) {
		remotes, err := harness.FloodEntries(ctx, n, dev)
		return slices.Contains(remotes, addr) == present, fmt.Sprint(remotes), err
	})
}

// Pods of one VXLAN Network on two nodes reach each other over net1 and get different
// addresses, with nothing configured per node by the admin (no master, and the master
// device's name differs per node; no local address; no remotes); pods of another VNI on the
// same subnet do not reach them.
func TestVXLANNetworkAcrossNodes(t *testing.T) {
	e := harness.Shared(t)
	n1, n2 := twoNodes(t, e)
	class := e.Class(t, harness.NetworkKind)
	cluster := autoVXLANCluster(t, e)
	ns := testbed.Namespace(t, e.Kube)
	subnet := harness.RandomSubnet()
	e.Network(t, ns, "red", cluster, harness.RandomVNI(), subnet)
	e.Network(t, ns, "blue", cluster, harness.RandomVNI(), subnet)
	for _, n := range []bed.Node{n1, n2} {
		e.WaitDeviceOn(t, n.Name, class, ns, "red", true)
		e.WaitDeviceOn(t, n.Name, class, ns, "blue", true)
		nn := nodeNetworkOf(t, e, cluster, n.Name)
		if string(nn.Status.Master) != n.UnderlayIf || string(nn.Status.LocalAddress) != n.IP {
			t.Errorf("NodeNetwork on %s: master %q local %q, want the device of its InternalIP %s (%s)",
				n.Name, nn.Status.Master, nn.Status.LocalAddress, n.IP, n.UnderlayIf)
		}
	}
	if n1.UnderlayIf == n2.UnderlayIf {
		t.Fatalf("both nodes' underlay devices are called %s: the test needs different names", n1.UnderlayIf)
	}
	e.ClaimTemplate(t, ns, "red", class, ns, "red", nil)
	e.ClaimTemplate(t, ns, "blue", class, ns, "blue", nil)
	// Both networks allocate from the same blocks of the same subnet: blue gets one pod more
	// on node 2 (first), so one of its addresses is not any red pod's, and pinging it from red
	// tells isolation from reaching a red pod of the same address.
	e.RunPods(t, harness.PodOn(n1.Name, ns, "b1", "blue"), harness.PodOn(n2.Name, ns, "b2", "blue"), harness.PodOn(n2.Name, ns, "b3", "blue"))
	e.RunPods(t, harness.PodOn(n1.Name, ns, "r1", "red"), harness.PodOn(n2.Name, ns, "r2", "red"))
	addrs := map[string]string{}
	for _, p := range []struct{ pod, tmpl string }{{"r1", "red"}, {"r2", "red"}, {"b1", "blue"}, {"b2", "blue"}, {"b3", "blue"}} {
		addrs[p.pod] = harness.Addr(t, e.Attached(t, ns, p.pod, p.tmpl, "net1"))
	}
	if addrs["r1"] == addrs["r2"] || addrs["b1"] == addrs["b2"] || addrs["b1"] == addrs["b3"] {
		t.Fatalf("two nodes handed out the same address: %v", addrs)
	}
	e.Ping(t, ns, "r1", "net1", addrs["r2"])
	e.Ping(t, ns, "r2", "net1", addrs["r1"])
	blueOnly := ""
	for _, b := range []string{"b2", "b3"} {
		if addrs[b] != addrs["r1"] && addrs[b] != addrs["r2"] {
			blueOnly = b
		}
	}
	if blueOnly == "" {
		t.Fatalf("no blue address on node 2 that no red pod has: %v", addrs)
	}
	e.Ping(t, ns, "b1", "net1", addrs[blueOnly]) // reachable on its own VNI: the isolation below means something
	noPing(t, e, ns, "r1", "net1", addrs[blueOnly])
	noPing(t, e, ns, "r2", "net1", addrs[blueOnly])
}

// A netclass-vxlan PodNetwork without master, local or remotes joins pods on two nodes.
func TestVXLANPodNetworkAcrossNodes(t *testing.T) {
	e := harness.Shared(t)
	n1, n2 := twoNodes(t, e)
	class := e.Class(t, harness.PodNetworkKind)
	name := "e2e-autovx-" + harness.Unique(6)
	e.PodNetwork(t, name, map[string]any{"type": "netclass-vxlan", "vni": harness.RandomVNI(),
		"ipam": map[string]any{"type": "host-local", "ranges": []any{[]any{map[string]any{"subnet": harness.RandomSubnet()}}}}}, nil)
	ns := testbed.Namespace(t, e.Kube)
	for _, n := range []bed.Node{n1, n2} {
		e.WaitDeviceOn(t, n.Name, class, "", name, true)
	}
	e.ClaimTemplate(t, ns, "auto", class, "", name, nil)
	e.RunPods(t, harness.PodOn(n1.Name, ns, "a", "auto"), harness.PodOn(n2.Name, ns, "b", "auto"))
	a := harness.Addr(t, e.Attached(t, ns, "a", "auto", "net1"))
	b := harness.Addr(t, e.Attached(t, ns, "b", "auto", "net1"))
	if a == b {
		t.Fatalf("both nodes handed out %s", a)
	}
	e.Ping(t, ns, "a", "net1", b)
	e.Ping(t, ns, "b", "net1", a)
}
