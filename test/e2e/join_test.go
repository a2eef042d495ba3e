//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/testbed"
	"github.com/netclass-dev/netclass/test/testbed/bed"
)

// A third node joins: pods already running on nodes 1 and 2 reach a pod on it without being
// restarted (their nodes' flood entries gain its address, in place), for a Network of a
// ClusterNetwork and for a PodNetwork alike. It leaves: nodes 1 and 2 lose its address.
// The time from the join (NodeNetwork Ready / Node created) to the flood entries on the
// other nodes is logged (the target is 2 s).
func TestVXLANFollowsNodesJoiningAndLeaving(t *testing.T) {
	e := harness.Shared(t)
	n1, n2 := twoNodes(t, e)
	nets := e.Class(t, harness.NetworkKind)
	pns := e.Class(t, harness.PodNetworkKind)
	cluster := autoVXLANCluster(t, e)
	pn := "e2e-joinvx-" + harness.Unique(6)
	pnVNI := harness.RandomVNI()
	e.PodNetwork(t, pn, map[string]any{"type": "netclass-vxlan", "vni": pnVNI,
		"ipam": map[string]any{"type": "host-local", "ranges": []any{[]any{map[string]any{"subnet": harness.RandomSubnet()}}}}}, nil)
	ns := testbed.Namespace(t, e.Kube)
	vni := harness.RandomVNI()
	e.Network(t, ns, "red", cluster, vni, harness.RandomSubnet())
	e.ClaimTemplate(t, ns, "red", nets, ns, "red", nil)
	e.ClaimTemplate(t, ns, "auto", pns, "", pn, nil)
	for _, n := range []bed.Node{n1, n2} {
		e.WaitDeviceOn(t, n.Name, nets, ns, "red", true)
		e.WaitDeviceOn(t, n.Name, pns, "", pn, true)
	}
	e.RunPods(t, harness.PodOn(n1.Name, ns, "p1", "red", "auto"), harness.PodOn(n2.Name, ns, "p2", "red", "auto"))
	before := podUIDs(t, e, ns, "p1", "p2")
	dev, pnDev := fmt.Sprintf("ncvx%d", vni), fmt.Sprintf("ncvx%d", pnVNI)

	n3 := e.AddNode(t, "")
	joined := time.Now()
	nodeNetworkOf(t, e, cluster, n3.Name)
	ready := time.Now()
	for _, n := range []bed.Node{n1, n2} {
		waitFlood(t, n, dev, n3.IP, true)
		waitFlood(t, n, pnDev, n3.IP, true)
	}
	t.Logf("node %s joined: flood entries on nodes 1-2 %v after its NodeNetwork turned Ready (%v after the Node was Ready)",
		n3.Name, time.Since(ready).Round(time.Millisecond), time.Since(joined).Round(time.Millisecond))
	e.WaitDeviceOn(t, n3.Name, nets, ns, "red", true)
	e.WaitDeviceOn(t, n3.Name, pns, "", pn, true)
	e.RunPods(t, harness.PodOn(n3.Name, ns, "p3", "red", "auto"))
	// net1 is the Network's interface, net2 the PodNetwork's (the pods' claim order)
	for _, c := range []struct{ tmpl, ifname string }{{"red", "net1"}, {"auto", "net2"}} {
		p1 := harness.Addr(t, e.Attached(t, ns, "p1", c.tmpl, c.ifname))
		p3 := harness.Addr(t, e.Attached(t, ns, "p3", c.tmpl, c.ifname))
		e.Ping(t, ns, "p1", c.ifname, p3)
		e.Ping(t, ns, "p2", c.ifname, p3)
		e.Ping(t, ns, "p3", c.ifname, p1)
	}
	if after := podUIDs(t, e, ns, "p1", "p2"); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("pods on nodes 1-2 were restarted: %v, then %v", before, after)
	}

	deletePod(t, e, ns, "p3")
	waitGone(t, e, ns, "p3")
	left := time.Now()
	e.RemoveNode(t, n3.Name)
	for _, n := range []bed.Node{n1, n2} {
		waitFlood(t, n, dev, n3.IP, false)
		waitFlood(t, n, pnDev, n3.IP, false)
	}
	t.Logf("node %s left: gone from the flood entries of nodes 1-2 %v after its removal began", n3.Name, time.Since(left).Round(time.Millisecond))
}

// podUIDs are the pods' UIDs and restart counts: unchanged means never restarted.
func podUIDs(t *testing.T, e *harness.Env, ns string, names ...string) []string {
	t.Helper()
	var out []string
	for _, name := range names {
		p, err := e.Kube.CoreV1().Pods(ns).Get(testbed.Context(t, time.Minute), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		restarts := int32(0)
		for _, c := range p.Status.ContainerStatuses {
			restarts += c.RestartCount
		}
		out = append(out, fmt.Sprintf("%s=%s/%d", name, p.UID, restarts))
	}
	return out
}

// A Network's node devices exist on every node that can carry it as soon as it is offered
// there, are listed in the NodeNetwork status, stay while a pod uses them after the
// Network is deleted, and are gone once the last pod is.
func TestNodeDevicesFollowTheNetwork(t *testing.T) {
	e := harness.Shared(t)
	n1, n2 := twoNodes(t, e)
	class := e.Class(t, harness.NetworkKind)
	cluster := autoVXLANCluster(t, e)
	ns := testbed.Namespace(t, e.Kube)
	vni := harness.RandomVNI()
	e.Network(t, ns, "red", cluster, vni, harness.RandomSubnet())
	devs := []string{fmt.Sprintf("ncbr%d", vni), fmt.Sprintf("ncvx%d", vni)}
	for _, n := range []bed.Node{n1, n2} {
		e.WaitDeviceOn(t, n.Name, class, ns, "red", true)
		waitDevices(t, n, devs, true)
		name := nodeNetworkOf(t, e, cluster, n.Name).Name
		testbed.Poll(t, testbed.Context(t, time.Minute), 100*time.Millisecond, "NodeNetwork status listing "+fmt.Sprint(devs),
			func(ctx context.Context) (bool, string, error) {
				nn, err := e.NC.NetclassV1alpha1().NodeNetworks().Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, "", err
				}
				return fmt.Sprint(nn.Status.Devices) == fmt.Sprint(devs), fmt.Sprint(nn.Status.Devices), nil
			})
	}
	e.ClaimTemplate(t, ns, "red", class, ns, "red", nil)
	e.RunPods(t, harness.PodOn(n1.Name, ns, "a", "red"))
	e.Attached(t, ns, "a", "red", "net1")
	if err := e.NC.NetclassV1alpha1().Networks(ns).Delete(testbed.Context(t, time.Minute), "red", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDevices(t, n2, devs, false) // nobody uses them there
	e.WaitDeviceOn(t, n1.Name, class, ns, "red", false)
	for _, d := range devs {
		if _, err := n1.Output(testbed.Context(t, time.Minute), "ip", "link", "show", "dev", d); err != nil {
			t.Fatalf("%s went while pod a still uses it: %v", d, err)
		}
	}
	deletePod(t, e, ns, "a")
	waitGone(t, e, ns, "a")
	waitDevices(t, n1, devs, false)
}

// waitDevices waits until the devices exist on the node, or are all gone.
func waitDevices(t *testing.T, n bed.Node, devs []string, present bool) {
	t.Helper()
	testbed.Poll(t, testbed.Context(t, time.Minute), 200*time.Millisecond, fmt.Sprintf("%v on %s present: %v", devs, n.Name, present),
		func(ctx context.Context) (bool, string, error) {
			var have []string
			for _, d := range devs {
				if _, err := n.Output(ctx, "ip", "link", "show", "dev", d); err == nil {
					have = append(have, d)
				}
			}
			return (len(have) == len(devs)) == present && (present || len(have) == 0), fmt.Sprint(have), nil
		})
}
