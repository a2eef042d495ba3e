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
)

// reservations lists the addresses host-local holds for a network.
func reservations(t *testing.T, network string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(render.IPAMStateDir, network))
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

func restart(t *testing.T, e *harness.Env) {
	t.Helper()
	if err := e.DRA.Start(time.Minute); err != nil {
		t.Fatalf("restart netclass-dra: %v", err)
	}
}

func kill(t *testing.T, e *harness.Env) {
	t.Helper()
	pid := e.DRA.PID()
	if err := e.DRA.Kill(); err != nil {
		t.Fatalf("SIGKILL netclass-dra (pid %d): %v", pid, err)
	}
	t.Logf("%v netclass-dra (pid %d) killed with SIGKILL", time.Now().Format("15:04:05.0"), pid)
}

// netclass-dra is SIGKILLed with a pod running, and pods are created and
// deleted while it is down: after the restart the running pod still has its
// interface and status, the new pods get theirs, the deleted pod's address
// is freed, and later deletions still release everything.
func TestRestartLosesNothing(t *testing.T) {
	e := harness.Shared(t)
	t.Cleanup(func() { // leave a running daemon to the next test, whatever happened
		if e.DRA.PID() == 0 {
			restart(t, e)
		}
	})
	n := e.BridgeNet(t, "e2e-crash", "net")
	ns, pn, bridge := n.Namespace, n.PodNetwork, n.Bridge
	e.RunPods(t, harness.Pod(ns, "stays", "net"), harness.Pod(ns, "goes", "net"))
	stays := e.Attached(t, ns, "stays", "net", "net1")
	goesAddr := harness.Addr(t, e.Attached(t, ns, "goes", "net", "net1"))

	kill(t, e)
	for _, name := range []string{"new-1", "new-2"} {
		e.CreatePod(t, harness.Pod(ns, name, "net"))
	}
	if err := e.Kube.CoreV1().Pods(ns).Delete(testbed.Context(t, time.Minute), "goes", deleteNow()); err != nil {
		t.Fatal(err)
	}
	restart(t, e)
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
	waitReservations(t, pn, bridge, 3, goesAddr)
	t.Logf("%v its address is free", time.Now().Format("15:04:05.0"))

	for _, name := range []string{"stays", "new-1", "new-2"} {
		deletePod(t, e, ns, name)
	}
	waitReservations(t, pn, bridge, 0, "")
}

// netclass-dra is SIGKILLed while pods are being attached, as soon as the
// first attachment is in its checkpoint: after the restart every pod runs
// with its interface, and deleting them leaves nothing behind.
func TestKilledDuringAttach(t *testing.T) {
	e := harness.Shared(t)
	t.Cleanup(func() {
		if e.DRA.PID() == 0 {
			restart(t, e)
		}
	})
	n := e.BridgeNet(t, "e2e-kill", "net")
	ns, pn, bridge := n.Namespace, n.PodNetwork, n.Bridge
	names := []string{"p1", "p2", "p3", "p4"}
	for _, n := range names {
		e.CreatePod(t, harness.Pod(ns, n, "net"))
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
	kill(t, e)
	restart(t, e)
	for _, n := range names {
		testbed.WaitForPodRunning(t, e.Kube, ns, n, harness.PodTimeout)
		e.Attached(t, ns, n, "net", "net1")
	}
	waitReservations(t, pn, bridge, len(names), "")
	for _, n := range names {
		deletePod(t, e, ns, n)
	}
	waitReservations(t, pn, bridge, 0, "")
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
// of them gone) and its bridge exactly n ports.
func waitReservations(t *testing.T, network, bridge string, n int, gone string) {
	t.Helper()
	testbed.Poll(t, testbed.Context(t, time.Minute), 200*time.Millisecond,
		fmt.Sprintf("%d addresses reserved on %s and %d ports on %s", n, network, n, bridge),
		func(context.Context) (bool, string, error) {
			res, ports := reservations(t, network), bridgePorts(t, bridge)
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
// by the CNI GC netclass-dra runs when it starts; recorded ones stay.
func TestStartupGCRemovesUnknownAttachments(t *testing.T) {
	e := harness.Shared(t)
	n := e.BridgeNet(t, "e2e-gc", "net")
	ns, pn, bridge := n.Namespace, n.PodNetwork, n.Bridge
	e.RunPods(t, harness.Pod(ns, "known", "net"))
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
	waitReservations(t, pn, bridge, 2, "")

	if err := e.DRA.Stop(); err != nil {
		t.Fatal(err)
	}
	restart(t, e)
	waitReservations(t, pn, bridge, 1, strayAddr)
	if got := e.Attached(t, ns, "known", "net", "net1"); harness.Addr(t, got) != harness.Addr(t, known) {
		t.Fatalf("the recorded attachment changed: %v → %v", known.NetworkData, got.NetworkData)
	}
}
