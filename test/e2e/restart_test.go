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

	"github.com/netclass-dev/netclass/shim/cni"
	"github.com/netclass-dev/netclass/shim/render"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/nstest"
	"github.com/netclass-dev/netclass/test/testbed"
	"github.com/netclass-dev/netclass/test/testbed/bed"
)

// reservations lists the addresses host-local holds for a network on a node.
func reservations(t *testing.T, node bed.Node, network string) []string {
	t.Helper()
	entries, err := os.ReadDir(node.HostPath(filepath.Join(render.IPAMStateDir, network)))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if n := e.Name(); n != "lock" && !strings.HasPrefix(n, "last_reserved_ip") {
			out = append(out, n)
		}
	}
	return out
}

func restart(t *testing.T, d *harness.DRA) {
	t.Helper()
	if err := d.Start(time.Minute); err != nil {
		t.Fatalf("restart netclass-dra on node %s: %v", d.Node, err)
	}
}

func kill(t *testing.T, d *harness.DRA) {
	t.Helper()
	pid := d.PID()
	if err := d.Kill(); err != nil {
		t.Fatalf("SIGKILL netclass-dra (pid %d) on node %s: %v", pid, d.Node, err)
	}
	t.Logf("%v netclass-dra (pid %d) on node %s killed with SIGKILL", time.Now().Format("15:04:05.0"), pid, d.Node)
}

// restartAtEnd leaves a running daemon to the next test, whatever happened.
func restartAtEnd(t *testing.T, d *harness.DRA) {
	t.Cleanup(func() {
		if t.Failed() { // what the killed and restarted daemon did, for the CI log
			t.Logf("netclass-dra on node %s, the end of its log:%s", d.Node, d.Tail(60))
		}
		if d.PID() == 0 {
			restart(t, d)
		}
	})
}

// netclass-dra is SIGKILLed with a pod running, and pods are created and
// deleted while it is down: after the restart the running pod still has its
// interface and status, the new pods get theirs, the deleted pod's address
// is freed, and later deletions still release everything. It runs on the
// last node, a node in namespaces of its own (node 1 on a one-node test bed),
// its pods pinned there: they share a bridge, and the test reads that node's
// reservations and bridge ports.
func TestRestartLosesNothing(t *testing.T) {
	e := harness.Shared(t)
	node := e.Nodes[len(e.Nodes)-1]
	d := e.DRAOn(node.Name)
	restartAtEnd(t, d)
	n := e.BridgeNet(t, "e2e-crash", "net")
	ns, pn, bridge := n.Namespace, n.PodNetwork, n.Bridge
	e.RunPods(t, harness.PodOn(node.Name, ns, "stays", "net"), harness.PodOn(node.Name, ns, "goes", "net"))
	stays := e.Attached(t, ns, "stays", "net", "net1")
	goesAddr := harness.Addr(t, e.Attached(t, ns, "goes", "net", "net1"))

	kill(t, d)
	for _, name := range []string{"new-1", "new-2"} {
		e.CreatePod(t, harness.PodOn(node.Name, ns, name, "net"))
	}
	if err := e.Kube.CoreV1().Pods(ns).Delete(testbed.Context(t, time.Minute), "goes", deleteNow()); err != nil {
		t.Fatal(err)
	}
	restart(t, d)
	t.Logf("%v netclass-dra restarted", time.Now().Format("15:04:05.0"))

	for _, name := range []string{"new-1", "new-2"} {
		testbed.WaitForPodRunning(t, e.Kube, ns, name, harness.PodTimeout)
		e.Attached(t, ns, name, "net", "net1")
		t.Logf("%v %s attached", time.Now().Format("15:04:05.0"), name)
	}
	after := e.Attached(t, ns, "stays", "net", "net1")
	if harness.Addr(t, after) != harness.Addr(t, stays) || after.NetworkData.HardwareAddress != stays.NetworkData.HardwareAddress {
		t.Fatalf("the running pod's attachment changed across the restart: %+v → %+v", stays.NetworkData, after.NetworkData)
	}
	waitGone(t, e, ns, "goes")
	t.Logf("%v deleted pod gone", time.Now().Format("15:04:05.0"))
	waitReservations(t, node, pn, bridge, 3, goesAddr)
	t.Logf("%v its address is free", time.Now().Format("15:04:05.0"))

	for _, name := range []string{"stays", "new-1", "new-2"} {
		deletePod(t, e, ns, name)
	}
	waitReservations(t, node, pn, bridge, 0, "")
}

// netclass-dra is SIGKILLed while pods are being attached, as soon as the
// first attachment is in its checkpoint: after the restart every pod runs
// with its interface, and deleting them leaves nothing behind. The pods run on
// node 1, whose daemon is killed and whose reservations are read.
func TestKilledDuringAttach(t *testing.T) {
	e := harness.Shared(t)
	restartAtEnd(t, e.DRA)
	n := e.BridgeNet(t, "e2e-kill", "net")
	ns, pn, bridge := n.Namespace, n.PodNetwork, n.Bridge
	names := []string{"p1", "p2", "p3", "p4"}
	for _, n := range names {
		e.CreatePod(t, harness.PodOn(e.Node, ns, n, "net"))
	}
	testbed.Poll(t, testbed.Context(t, harness.PodTimeout), 5*time.Millisecond, "a first attachment in the checkpoint",
		func(context.Context) (bool, string, error) {
			claims, err := e.Checkpoint()
			if err != nil {
				return false, err.Error(), nil
			}
			for _, c := range claims {
				for _, d := range c.Devices {
					if len(d.Attachments) > 0 {
						return true, "", nil
					}
				}
			}
			return false, fmt.Sprintf("%d claims prepared", len(claims)), nil
		})
	kill(t, e.DRA)
	restart(t, e.DRA)
	for _, n := range names {
		testbed.WaitForPodRunning(t, e.Kube, ns, n, harness.PodTimeout)
		e.Attached(t, ns, n, "net", "net1")
	}
	waitReservations(t, e.Nodes[0], pn, bridge, len(names), "")
	for _, n := range names {
		deletePod(t, e, ns, n)
	}
	waitReservations(t, e.Nodes[0], pn, bridge, 0, "")
	claims, err := e.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	testbed.Poll(t, testbed.Context(t, time.Minute), 200*time.Millisecond, "checkpoint emptied by Unprepare",
		func(context.Context) (bool, string, error) {
			claims, err = e.Checkpoint()
			return err == nil && len(claims) == 0, fmt.Sprintf("%d records, %v", len(claims), err), nil
		})
}

// waitReservations waits until the network holds exactly n addresses (none
// of them gone) on the node and its bridge there exactly n ports.
func waitReservations(t *testing.T, node bed.Node, network, bridge string, n int, gone string) {
	t.Helper()
	testbed.Poll(t, testbed.Context(t, time.Minute), 200*time.Millisecond,
		fmt.Sprintf("%d addresses reserved on %s and %d ports on %s of node %s", n, network, n, bridge, node.Name),
		func(context.Context) (bool, string, error) {
			res, ports := reservations(t, node, network), bridgePorts(t, node, bridge)
			ok := len(res) == n && len(ports) == n
			for _, r := range res {
				if r == gone {
					ok = false
				}
			}
			return ok, fmt.Sprintf("reserved %v, ports %v", res, ports), nil
		})
}

// An attachment the checkpoint does not know (left by a crash between a
// plugin's ADD and the record, or by anyone else on the network) is removed
// by the CNI GC netclass-dra runs when it starts; recorded ones stay. On node 1:
// the stray attachment is made from this machine's namespaces.
func TestStartupGCRemovesUnknownAttachments(t *testing.T) {
	e := harness.Shared(t)
	n := e.BridgeNet(t, "e2e-gc", "net")
	ns, pn, bridge := n.Namespace, n.PodNetwork, n.Bridge
	e.RunPods(t, harness.PodOn(e.Node, ns, "known", "net"))
	known := e.Attached(t, ns, "known", "net", "net1")

	var conf []byte
	claims, err := e.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claims {
		for _, d := range c.Devices {
			if d.Network.Name == pn {
				conf = d.ConfList
			}
		}
	}
	if conf == nil {
		t.Fatal("no record of the network in the checkpoint")
	}
	stray := nstest.New(t)
	runner := cni.New(e.DRA.CNIDirs, t.TempDir())
	res, err := runner.Add(testbed.Context(t, time.Minute), conf, cni.Attachment{ContainerID: "stray-" + harness.Unique(8), NetNS: stray.Path, IfName: "net1"})
	if err != nil {
		t.Fatalf("make a stray attachment: %v", err)
	}
	strayAddr, _, _ := strings.Cut(res.IPs[0], "/")
	waitReservations(t, e.Nodes[0], pn, bridge, 2, "")

	if err := e.DRA.Stop(); err != nil {
		t.Fatal(err)
	}
	restart(t, e.DRA)
	waitReservations(t, e.Nodes[0], pn, bridge, 1, strayAddr)
	if got := e.Attached(t, ns, "known", "net", "net1"); harness.Addr(t, got) != harness.Addr(t, known) {
		t.Fatalf("the recorded attachment changed: %v → %v", known.NetworkData, got.NetworkData)
	}
}
