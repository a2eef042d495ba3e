//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/nstest"
	"github.com/netclass-dev/netclass/test/testbed"
	"github.com/netclass-dev/netclass/test/testbed/bed"
	"github.com/netclass-dev/netclass/test/traffic"
)

// The guarantee under congestion, on two nodes: a VXLAN Network of 100
// Mbit/s per node; on node 1 three pods allocated 30 Mbit/s and a
// best-effort pod (allocated 0) each stream TCP at full speed, at once,
// to a pod of their own on node 2, through the VXLAN device's shared
// scheduler. iperf3 at the receivers: each allocated pod gets 27 to 33
// Mbit/s, the best-effort pod what is left (well below 30).
func TestBandwidthGuaranteeUnderContention(t *testing.T) {
	e := harness.Shared(t)
	n1, n2 := twoNodes(t, e)
	class := e.Class(t, harness.NetworkKind)
	cluster := autoVXLANCluster(t, e)
	patchSpec(t, e, "ClusterNetwork", "", cluster, `{"spec":{"bandwidth":{"capacity":"100M","step":"10M"}}}`)
	ns := testbed.Namespace(t, e.Kube)
	vni := harness.RandomVNI()
	e.Network(t, ns, "red", cluster, vni, harness.RandomSubnet())
	for _, n := range []bed.Node{n1, n2} {
		waitCapacity(t, e, n.Name, class, ns, "red", "100M default 0 range [0, 100M] step 10M")
	}
	networkBandwidthTemplate(t, e, ns, "bw30", class, "red", "30M")
	e.ClaimTemplate(t, ns, "be", class, ns, "red", nil) // best effort: the policy's default, 0

	senders := []string{"a0", "a1", "a2", "be"}
	var allocated, others []*corev1.Pod
	for i, s := range senders {
		if s == "be" {
			others = append(others, harness.PodOn(n1.Name, ns, s, "be"))
		} else {
			allocated = append(allocated, harness.PodOn(n1.Name, ns, s, "bw30"))
		}
		others = append(others, harness.PodOn(n2.Name, ns, fmt.Sprintf("r%d", i), "be"))
	}
	e.RunPodsInTurn(t, allocated...) // 90M of the device's 100M
	e.RunPods(t, others...)
	for _, s := range senders[:3] {
		checkAllocated(t, e, ns, s, 30_000_000)
	}
	got := contend(t, e, ns, n1, n2, senders)
	dev := fmt.Sprintf("ncvx%d", vni)
	for _, l := range strings.Split(run(t, "tc", "-s", "class", "show", "dev", dev)+run(t, "nft", "list", "table", "bridge", "netclass_share_"+dev), "\n") {
		t.Logf("%s: %s", n1.Name, l)
	}
	for i, s := range senders {
		t.Logf("%s (%s) -> r%d on %s: %.1f Mbit/s received", s, map[bool]string{true: "allocated 30M", false: "best effort"}[s != "be"], i, n2.Name, got[i]/1e6)
	}
	for i := range 3 {
		if got[i] < 27e6 || got[i] > 33e6 {
			t.Errorf("%s, allocated 30 Mbit/s, received %.1f Mbit/s under contention, want 27 to 33", senders[i], got[i]/1e6)
		}
	}
	if got[3] < 1e6 || got[3] > 15e6 {
		t.Errorf("the best-effort pod received %.1f Mbit/s, want what is left of the 100 (about 10)", got[3]/1e6)
	}
	// The senders go: their DELs leave no class and no table on node 1
	// (the network, and so its VXLAN device there, stays).
	for _, s := range senders {
		if err := e.Kube.CoreV1().Pods(ns).Delete(testbed.Context(t, time.Minute), s, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
			t.Fatal(err)
		}
	}
	testbed.Poll(t, testbed.Context(t, harness.WaitTimeout), 200*time.Millisecond, "no shared scheduler left on "+n1.Name,
		func(ctx context.Context) (bool, string, error) {
			tables, _ := exec.CommandContext(ctx, "nft", "list", "tables", "bridge").CombinedOutput()
			qdiscs, _ := exec.CommandContext(ctx, "tc", "qdisc", "show", "dev", dev).CombinedOutput()
			left := strings.Contains(string(tables), "netclass_share_"+dev) || strings.Contains(string(qdiscs), "htb")
			return !left, fmt.Sprintf("tables %q, qdiscs of %s %q", tables, dev, qdiscs), nil
		})
}

// run is a command's output on node 1 (this machine's namespace).
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Errorf("%s %v: %v: %s", name, args, err, out)
	}
	return string(out)
}

// contend streams TCP from each sender on n1 to its receiver r<i> on n2,
// all at once, and returns what each receiver got.
func contend(t *testing.T, e *harness.Env, ns string, n1, n2 bed.Node, senders []string) []float64 {
	t.Helper()
	got := make([]float64, len(senders))
	runs := make([]traffic.IPerf3, len(senders))
	for i, s := range senders {
		recv := fmt.Sprintf("r%d", i)
		addr := netip.MustParseAddr(harness.Addr(t, e.Attached(t, ns, recv, "be", "net1")))
		runs[i] = traffic.IPerf3{
			Client: &nstest.NS{Name: ns + "/" + s, Path: podNSPath(t, e, n1, ns, s)},
			Server: &nstest.NS{Name: ns + "/" + recv, Path: podNSPath(t, e, n2, ns, recv)},
			Addr:   addr, Port: uint16(5201 + i), Duration: 8 * time.Second, Omit: 2 * time.Second,
		}
	}
	var wg sync.WaitGroup
	for i := range runs {
		wg.Go(func() {
			res, err := runs[i].Run()
			if err != nil || res.Error != "" {
				t.Errorf("iperf3 from %s: %v %s", senders[i], err, res.Error)
			}
			got[i] = res.ReceivedBps
		})
	}
	wg.Wait()
	return got
}

// podNSPath is a path of the network namespace of a pod's net1 that a
// process on this machine can enter (another node's through the root of
// its netclass-dra).
func podNSPath(t *testing.T, e *harness.Env, node bed.Node, ns, pod string) string {
	t.Helper()
	path := e.AttachmentOn(t, node, getPod(t, e, ns, pod).UID, "net1").NetNS
	if !node.Primary() {
		path = fmt.Sprintf("/proc/%d/root%s", e.DRAOn(node.Name).PID(), path)
	}
	return path
}

// networkBandwidthTemplate is a claim template on a Network requesting bandwidth.
func networkBandwidthTemplate(t *testing.T, e *harness.Env, ns, name, class, network, bw string) {
	t.Helper()
	req, _ := harness.Request("net", class, ns, network, nil)
	req.Exactly.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
		contract.CapacityBandwidth: resource.MustParse(bw)}}
	tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{
			Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{req}}}}}
	if _, err := e.Kube.ResourceV1().ResourceClaimTemplates(ns).Create(testbed.Context(t, time.Minute), tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ResourceClaimTemplate %s/%s: %v", ns, name, err)
	}
}
