//go:build testbed

package deploy

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	demotraffic "github.com/netclass-dev/netclass/demo/traffic"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/testbed"
	"github.com/netclass-dev/netclass/test/testbed/bed"
)

// demoTimeout bounds each wait of the demo for an effect on running pods.
const demoTimeout = 30 * time.Second

// clusterDemo is the state of TestDemoCluster: what it made and what it printed.
type clusterDemo struct {
	t      *testing.T
	e      *harness.Env
	n1, n2 bed.Node
	ns     string
	start  time.Time
	checks int
	intr   chan os.Signal
	addr   map[string]string // pod → its net1 address
	uid    map[string]types.UID
}

// TestDemoCluster is `make demo-cluster`: on the two-node test bed, netclass installed from
// its Helm chart; the NetworkClass → PodNetwork → ResourceClaim → pod flow with the claims'
// networkData; a VXLAN Network across both nodes; a NetworkQoS on running pods (the DSCP the
// fabric sees in the VXLAN outer header, a metered rate); a NetworkPolicy on net1 (verdicts
// probed). Each line it prints is a check that passed. Ctrl-C stops it after the current
// step, and everything it made is removed (make demo-cluster then takes the bed down).
func TestDemoCluster(t *testing.T) {
	e := harness.Bare(t)
	if len(e.Nodes) < 2 {
		t.Fatalf("the demo spans two nodes; the test bed has %d (TESTBED_NODES=2)", len(e.Nodes))
	}
	d := &clusterDemo{t: t, e: e, n1: e.Nodes[0], n2: e.Nodes[1], start: time.Now(),
		intr: make(chan os.Signal, 1), addr: map[string]string{}, uid: map[string]types.UID{}}
	signal.Notify(d.intr, os.Interrupt, syscall.SIGTERM)
	t.Cleanup(func() { signal.Stop(d.intr) })

	d.step("netclass from the Helm chart (conf/helm/netclass)", d.install)
	d.step("The NetworkClass flow: NetworkClass → PodNetwork → ResourceClaim → pod", d.podNetwork)
	d.step("A VXLAN Network across both nodes (ClusterNetwork → Network)", d.vxlan)
	d.step("NetworkQoS on running pods", d.networkQoS)
	d.step("NetworkPolicy on net1 (labelled networking.k8s.io/policy-controller-name: netclass.dev)", d.networkPolicy)
	fmt.Printf("\nall %d checks passed (%s)\n", d.checks, time.Since(d.start).Round(time.Second))
}

// step runs one part of the demo, unless Ctrl-C came: then the test ends, and its
// cleanups remove what it made.
func (d *clusterDemo) step(title string, fn func()) {
	select {
	case <-d.intr:
		d.t.Fatal("interrupted: removing what the demo made")
	default:
	}
	fmt.Printf("\n%s\n", title)
	fn()
}

// ok prints a check that passed.
func (d *clusterDemo) ok(format string, args ...any) {
	d.checks++
	fmt.Printf("  ok  %s\n", fmt.Sprintf(format, args...))
}

func (d *clusterDemo) install() {
	installChart(d.t, d.e)
	for _, n := range d.e.Nodes {
		d.ok("netclass-dra serves on node %s (/readyz)", n.Name)
	}
}

// podNetwork: a bridge PodNetwork of the NetworkClass of PodNetworks; three pods on node 1
// with claims from one template; their claims' status.
func (d *clusterDemo) podNetwork() {
	net := d.e.BridgeNet(d.t, "demo", "blue")
	d.ns = net.Namespace
	d.e.WaitPodNetworkCondition(d.t, net.PodNetwork, "Ready", metav1.ConditionTrue)
	d.ok("NetworkClass %s → PodNetwork %s (bridge %s): Ready, one device per node", net.Class, net.PodNetwork, net.Bridge)
	client, server, other := harness.PodOn(d.n1.Name, d.ns, "client", "blue"), harness.PodOn(d.n1.Name, d.ns, "server", "blue"), harness.PodOn(d.n1.Name, d.ns, "other", "blue")
	client.Labels, server.Labels = map[string]string{"role": "client"}, map[string]string{"role": "server"}
	d.e.RunPods(d.t, client, server, other)
	fmt.Printf("  %-8s %-8s %-9s %-18s %-18s %-19s %s\n", "POD", "NODE", "INTERFACE", "ADDRESS", "MAC", "CLAIM", "DATA (the claim's status.devices[]: networkData, data)")
	for _, p := range []string{"client", "server", "other"} {
		d.attached(p, "blue")
	}
	d.e.Ping(d.t, d.ns, "client", "net1", d.addr["server"])
	d.ok("client → server (%s) on net1: ping answered", d.addr["server"])
}

// attached records and prints a pod's net1 as its claim's status reports it.
func (d *clusterDemo) attached(pod, template string) {
	st := d.e.Attached(d.t, d.ns, pod, template, "net1")
	claim := d.e.ClaimOfPod(d.t, d.ns, pod, template)
	p, err := d.e.Kube.CoreV1().Pods(d.ns).Get(testbed.Context(d.t, time.Minute), pod, metav1.GetOptions{})
	if err != nil {
		d.t.Fatal(err)
	}
	d.addr[pod], d.uid[pod] = harness.Addr(d.t, st), p.UID
	d.checks++
	var data string
	if st.Data != nil {
		data = string(st.Data.Raw)
	}
	fmt.Printf("  %-8s %-8s %-9s %-18s %-18s %-19s %s\n", pod, p.Spec.NodeName, st.NetworkData.InterfaceName,
		strings.Join(st.NetworkData.IPs, ","), st.NetworkData.HardwareAddress, claim.Name, data)
}

// vxlan: a ClusterNetwork of type VXLAN left to the nodes (each uses its InternalIP's
// device, remotes are the other nodes), a Network under it, a pod on each node.
func (d *clusterDemo) vxlan() {
	cluster := d.vxlanCluster()
	class := d.e.Class(d.t, harness.NetworkKind)
	d.e.Network(d.t, d.ns, "green", cluster, harness.RandomVNI(), harness.RandomSubnet())
	for _, n := range []bed.Node{d.n1, d.n2} {
		d.e.WaitDeviceOn(d.t, n.Name, class, d.ns, "green", true)
	}
	d.ok("ClusterNetwork %s → Network %s/green: a device on %s and on %s", cluster, d.ns, d.n1.Name, d.n2.Name)
	d.e.ClaimTemplate(d.t, d.ns, "green", class, d.ns, "green", nil)
	sink := harness.PodOn(d.n1.Name, d.ns, "sink", "green")
	sender := harness.PodOn(d.n2.Name, d.ns, "sender", "green")
	sender.Labels = map[string]string{"app": "sender"}
	d.e.RunPods(d.t, sink, sender)
	for _, p := range []string{"sink", "sender"} {
		d.attached(p, "green")
	}
	d.e.Ping(d.t, d.ns, "sender", "net1", d.addr["sink"])
	d.ok("sender (%s) → sink (%s) across the nodes' VXLAN tunnel: ping answered", d.n2.Name, d.n1.Name)
}

func (d *clusterDemo) vxlanCluster() string {
	name := "demo-" + harness.Unique(6)
	cn := &ncv1.ClusterNetwork{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: ncv1.ClusterNetworkSpec{Type: ncv1.NetworkTypeVXLAN, IPAM: &runtime.RawExtension{Raw: []byte(`{"type":"host-local"}`)}}}
	if _, err := d.e.NC.NetclassV1alpha1().ClusterNetworks().Create(testbed.Context(d.t, time.Minute), cn, metav1.CreateOptions{}); err != nil {
		d.t.Fatalf("create ClusterNetwork %s: %v", name, err)
	}
	d.t.Cleanup(func() {
		if err := d.e.NC.NetclassV1alpha1().ClusterNetworks().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			d.t.Errorf("delete ClusterNetwork %s: %v", name, err)
		}
	})
	return name
}

// networkQoS: EF for the sender's traffic on the VXLAN Network, seen in the tunnel's outer
// header on node 1's underlay; a 4 Mbit/s meter on the client's UDP/6000, measured.
func (d *clusterDemo) networkQoS() {
	d.createQoS("ef", map[string]string{"app": "sender"}, ncv1.Networks, ncv1.Rule{DSCP: 46})
	s, err := demotraffic.Sniff(&demotraffic.NS{Name: d.n1.Name, Path: "/proc/self/ns/net"}, d.n1.UnderlayIf)
	if err != nil {
		d.t.Fatalf("capture on %s: %v", d.n1.UnderlayIf, err)
	}
	d.t.Cleanup(s.Close)
	src := netip.MustParseAddr(d.addr["sender"])
	marked := func(p demotraffic.Packet) bool {
		return p.Inner != nil && p.Inner.Src == src && p.Inner.DSCP == 46 && p.DSCP == 46
	}
	deadline := time.Now().Add(demoTimeout)
	for len(s.WaitFor(marked, 3, time.Second)) < 3 {
		if time.Now().After(deadline) {
			d.t.Fatalf("no packet of the sender with DSCP 46 inside and outside the tunnel on %s within %v", d.n1.UnderlayIf, demoTimeout)
		}
		d.e.Ping(d.t, d.ns, "sender", "net1", d.addr["sink"])
	}
	d.ok("NetworkQoS ef (DSCP 46) on the running sender: its packets cross %s with DSCP 46 inside and in the VXLAN outer header", d.n1.UnderlayIf)

	const kbps = 4000
	d.createQoS("meter", map[string]string{"role": "client"}, ncv1.PodNetworks, ncv1.Rule{DSCP: 10,
		Bandwidth:  &ncv1.Bandwidth{Rate: ptr.To(int64(kbps)), Burst: ptr.To(int64(kbps / 10))},
		Classifier: &ncv1.Classifier{Ports: []ncv1.Port{{Protocol: ncv1.ProtocolUDP, Port: ptr.To(int32(6000))}}}})
	client, server := d.podNS("client"), d.podNS("server")
	dst, want := netip.MustParseAddr(d.addr["server"]), float64(kbps)*1000
	var got float64
	testbed.Poll(d.t, testbed.Context(d.t, demoTimeout), 100*time.Millisecond, "the client's UDP/6000 metered at 4 Mbit/s",
		func(context.Context) (bool, string, error) {
			r, err := demotraffic.UDPRate(client, server, dst, 6000, 1200, 4*want, 3*time.Second, time.Second)
			got = r.SteadyBps
			return err == nil && got > 0.8*want && got < 1.2*want, fmt.Sprintf("%.2f Mbit/s", got/1e6), err
		})
	d.ok("NetworkQoS meter (UDP/6000, 4.00 Mbit/s) on the running client: the server receives %.2f Mbit/s of 16 offered", got/1e6)
}

func (d *clusterDemo) createQoS(name string, pods map[string]string, on ncv1.NetworkSelectionType, rule ncv1.Rule) {
	sel := ncv1.NetworkSelector{NetworkSelectionType: on}
	if on == ncv1.PodNetworks {
		sel.PodNetworkSelector = &metav1.LabelSelector{}
	} else {
		sel.NetworkSelector = &metav1.LabelSelector{}
	}
	obj := &ncv1.NetworkQoS{ObjectMeta: metav1.ObjectMeta{Namespace: d.ns, Name: name},
		Spec: ncv1.NetworkQoSSpec{PodSelector: metav1.LabelSelector{MatchLabels: pods},
			NetworkSelectors: ncv1.NetworkSelectors{sel}, Egress: []ncv1.Rule{rule}}}
	if _, err := d.e.NC.NetclassV1alpha1().NetworkQoSes(d.ns).Create(testbed.Context(d.t, time.Minute), obj, metav1.CreateOptions{}); err != nil {
		d.t.Fatalf("create NetworkQoS %s: %v", name, err)
	}
}

// podNS is the network namespace of a pod on node 1.
func (d *clusterDemo) podNS(pod string) *demotraffic.NS {
	return podNetNS(d.t, d.n1, pod, d.uid[pod])
}

// networkPolicy: before any policy the other pod reaches the server; a labelled policy
// lets only the client in, on TCP 80.
func (d *clusterDemo) networkPolicy() {
	server, client, other := d.podNS("server"), d.podNS("client"), d.podNS("other")
	listeners := harness.Listen(d.t, server.Path, []int{80, 81}, nil)
	to := netip.MustParseAddr(d.addr["server"])
	verdict := func(from *demotraffic.NS, port int, open bool) {
		what := map[bool]string{true: "open", false: "blocked"}[open]
		testbed.Poll(d.t, testbed.Context(d.t, demoTimeout), 50*time.Millisecond, fmt.Sprintf("%s → server TCP/%d %s", from.Name, port, what),
			func(context.Context) (bool, string, error) {
				got, err := harness.Probe(from.Path, corev1.ProtocolTCP, to, port, listeners)
				return err == nil && got == open, fmt.Sprintf("open=%v", got), err
			})
		d.ok("%-7s → server TCP/%d  %s", from.Name, port, what)
	}
	verdict(other, 80, true)
	createServerPolicy(d.t, d.e, d.ns)
	fmt.Printf("  (policy server-from-client: ingress to role=server only from role=client on TCP/80)\n")
	verdict(other, 80, false)
	verdict(client, 80, true)
	verdict(client, 81, false)
}
