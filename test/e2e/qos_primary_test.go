//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/nstest"
	"github.com/netclass-dev/netclass/test/testbed"
	"github.com/netclass-dev/netclass/test/testbed/bed"
	"github.com/netclass-dev/netclass/test/traffic"
)

// internet is a destination outside the seed's excepted private ranges
// (TEST-NET-2): the pods route it to their node themselves (they have
// CAP_NET_ADMIN for that), where nothing forwards it; the capture on the
// node's pod bridge sees it on its way.
const internet = "198.51.100.7"

// seedObjects reads the seed's example NetworkQoS objects from a file of
// conf/crd/testdata, their namespace set to ns: nothing else is changed.
func seedObjects(t *testing.T, file, ns string) []*ncv1.NetworkQoS {
	t.Helper()
	f, err := os.Open("../../conf/crd/testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
	var out []*ncv1.NetworkQoS
	for {
		var q ncv1.NetworkQoS
		if err := dec.Decode(&q); err != nil {
			break
		}
		q.Namespace = ns
		out = append(out, &q)
	}
	if len(out) == 0 {
		t.Fatalf("no NetworkQoS in %s", file)
	}
	return out
}

// primaryPod is a pod of the default network only (no claim) on the
// node, with the labels, that routes the internet to its node.
func primaryPod(n bed.Node, ns, name string, labels map[string]string) *corev1.Pod {
	p := testbed.OnNode(testbed.Pod(ns, name, "sh", "-c",
		fmt.Sprintf("ip route add 198.51.100.0/24 via %s && exec sleep 3600", n.PodGateway)), n.Name)
	p.Labels = labels
	p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{
		Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}}
	return p
}

// hostEnd returns the name, in the node's namespace, of the host end of
// the pod's eth0 (the primary CNI's veth).
func hostEnd(t *testing.T, e *harness.Env, n bed.Node, ns, pod string) string {
	t.Helper()
	idx, _, err := testbed.Exec(testbed.Context(t, time.Minute), e.Rest, ns, pod, "main", "cat", "/sys/class/net/eth0/iflink")
	if err != nil {
		t.Fatalf("iflink of %s's eth0: %v", pod, err)
	}
	out, err := n.Output(testbed.Context(t, time.Minute), "ip", "-o", "link", "show")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + strings.TrimSpace(idx) + `: ([^:@]+)[@:]`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no link %s on node %s for pod %s:\n%s", strings.TrimSpace(idx), n.Name, pod, out)
	}
	return m[1]
}

// cniState is what the primary CNI has on a host end: its qdiscs, its
// filters, its bridge port.
func cniState(t *testing.T, n bed.Node, hostIf string) string {
	t.Helper()
	var b strings.Builder
	for _, cmd := range [][]string{{"tc", "qdisc", "show", "dev", hostIf}, {"tc", "filter", "show", "dev", hostIf, "ingress"},
		{"tc", "filter", "show", "dev", hostIf, "root"}, {"bridge", "-d", "link", "show", "dev", hostIf}} {
		out, err := n.Output(testbed.Context(t, time.Minute), cmd[0], cmd[1:]...)
		if err != nil {
			t.Fatalf("%v on node %s: %v", cmd, n.Name, err)
		}
		b.WriteString(out)
	}
	return b.String()
}

// portRules returns the node's netclass port rules (bridge netclass_qos).
func portRules(t *testing.T, n bed.Node) string {
	t.Helper()
	out, err := n.Output(testbed.Context(t, time.Minute), "nft", "list", "table", "bridge", "netclass_qos")
	if err != nil {
		t.Fatalf("nft list table bridge netclass_qos on node %s: %v", n.Name, err)
	}
	return out
}

// primarySeen sends from the pod (send: an exec in it) until the capture
// on the node's pod bridge, started before the first send, holds three
// packets from src to dst matching with dscp, within liveTimeout (a change
// takes effect within a second: the first check after one polls, the
// others find it at once).
func primarySeen(t *testing.T, n bed.Node, src, dst string, match func(traffic.Packet) bool, dscp uint8, send func(), what string) {
	t.Helper()
	primarySeenAt(t, &nstest.NS{Name: n.Name, Path: n.NetNSPath()}, n.PodBridge, src, dst, match, dscp, send, what)
}

// primarySeenAt is primarySeen with the capture on ifname of the namespace.
func primarySeenAt(t *testing.T, at *nstest.NS, ifname, src, dst string, match func(traffic.Packet) bool, dscp uint8, send func(), what string) {
	t.Helper()
	a, d := netip.MustParseAddr(src), netip.MustParseAddr(dst)
	sn, err := traffic.Sniff(at, ifname)
	if err != nil {
		t.Fatal(err)
	}
	defer sn.Close()
	deadline := time.Now().Add(liveTimeout)
	for time.Now().Before(deadline) {
		send()
		if got := sn.WaitFor(func(p traffic.Packet) bool { return p.Src == a && p.Dst == d && p.DSCP == dscp && match(p) }, 3, 500*time.Millisecond); len(got) >= 3 {
			return
		}
	}
	t.Fatalf("%s: no three packets %s -> %s with DSCP %d on %s's %s within %v; it saw %+v", what, src, dst, dscp, at.Name, ifname, liveTimeout, sn.Packets())
}

func pingFrom(t *testing.T, e *harness.Env, ns, pod, dst string) func() {
	return func() {
		_, _, _ = testbed.Exec(testbed.Context(t, time.Minute), e.Rest, ns, pod, "main", "ping", "-c", "3", "-i", "0.2", "-W", "1", "-w", "1", dst)
	}
}

// qosPrimaryBed is the test's pods on node 2: paid and free as the seed's
// Story 1 labels them, plain unlabelled; their addresses and host ends.
type qosPrimaryBed struct {
	t    *testing.T
	e    *harness.Env
	n    bed.Node
	ns   string
	ip   map[string]string
	host map[string]string
}

func newQoSPrimaryBed(t *testing.T, e *harness.Env, n bed.Node) *qosPrimaryBed {
	b := &qosPrimaryBed{t: t, e: e, n: n, ns: testbed.Namespace(t, e.Kube), ip: map[string]string{}, host: map[string]string{}}
	pods := map[string]map[string]string{"paid": {"user-type": "paid"}, "free": {"user-type": "free"}, "plain": nil}
	var list []*corev1.Pod
	for name, labels := range pods {
		list = append(list, primaryPod(n, b.ns, name, labels))
	}
	e.RunPods(t, list...)
	for name := range pods {
		b.ip[name] = getPod(t, e, b.ns, name).Status.PodIP
		b.host[name] = hostEnd(t, e, n, b.ns, name)
	}
	return b
}

// ping checks that pings from the pod to dst reach the node's pod bridge
// with dscp.
func (b *qosPrimaryBed) ping(pod, dst string, dscp uint8, what string) {
	b.t.Helper()
	primarySeen(b.t, b.n, b.ip[pod], dst, isICMP, dscp, pingFrom(b.t, b.e, b.ns, pod, dst), what)
}

// syn checks that the pod's TCP SYNs to dst:port reach the node's pod
// bridge with dscp.
func (b *qosPrimaryBed) syn(pod, dst string, port uint16, dscp uint8, what string) {
	b.t.Helper()
	primarySeen(b.t, b.n, b.ip[pod], dst, tcpTo(port), dscp, func() { synTo(b.t, b.e, b.ns, pod, dst, port) }, what)
}

// flush has the pod (CAP_NET_ADMIN) delete every nftables table and
// qdisc of its network namespace (the bed image's netprobe); it must
// succeed.
func (b *qosPrimaryBed) flush(pod string) {
	b.t.Helper()
	out, errOut, err := testbed.Exec(testbed.Context(b.t, time.Minute), b.e.Rest, b.ns, pod, "main", "netprobe", "flush")
	if err != nil {
		b.t.Fatalf("pod %s flushing its namespace: %v\n%s%s", pod, err, out, errOut)
	}
	b.t.Logf("pod %s: %s", pod, strings.TrimSpace(out))
}

// create creates the objects.
func (b *qosPrimaryBed) create(objs ...*ncv1.NetworkQoS) {
	b.t.Helper()
	for _, q := range objs {
		if _, err := b.e.NC.NetclassV1alpha1().NetworkQoSes(b.ns).Create(testbed.Context(b.t, time.Minute), q, metav1.CreateOptions{}); err != nil {
			b.t.Fatalf("create NetworkQoS %s: %v", q.Name, err)
		}
	}
}

func (b *qosPrimaryBed) delete(name string) {
	b.t.Helper()
	if err := b.e.NC.NetclassV1alpha1().NetworkQoSes(b.ns).Delete(testbed.Context(b.t, time.Minute), name, metav1.DeleteOptions{}); err != nil {
		b.t.Fatalf("delete NetworkQoS %s: %v", name, err)
	}
}

// waitPorts waits until the node's port rules hold a chain for each host
// end of has and none for those of hasNot.
func (b *qosPrimaryBed) waitPorts(has, hasNot []string) {
	b.t.Helper()
	testbed.Poll(b.t, testbed.Context(b.t, liveTimeout), 250*time.Millisecond, fmt.Sprintf("port rules of %v and none of %v", has, hasNot),
		func(context.Context) (bool, string, error) {
			rules := portRules(b.t, b.n)
			for _, p := range has {
				if !strings.Contains(rules, "port/"+b.host[p]+" {") {
					return false, rules, nil
				}
			}
			for _, p := range hasNot {
				if strings.Contains(rules, "port/"+b.host[p]) {
					return false, rules, nil
				}
			}
			return true, rules, nil
		})
}

// The seed's NetworkQoS examples on the pods' primary network (eth0, the
// test bed's bridge CNI), on node 2, checked on the node's pod bridge (the
// host side of the pods' switch ports): Story 1's two objects, unchanged
// but for their namespace, mark the paid and the free pods' traffic to the
// internet and not to the excepted private ranges, and leave the unlabelled
// pod alone; the status counts the pods; a pod with CAP_NET_ADMIN that
// deletes every nftables table and qdisc it sees keeps its marking; a relabelled pod leaves
// and comes back; the seed's port example (its NetworkAttachmentDefinitions
// selection made DefaultNetwork) marks by port; Story 3's priorities
// decide between a catch-all and a specific object (story3); a deleted pod's rules and
// then every rule go with the objects, and the bridge CNI's state on the
// host end is what it was.
func TestSeedNetworkQoSOnThePrimaryNetwork(t *testing.T) {
	e := harness.Shared(t)
	_, n2 := twoNodes(t, e)
	b := newQoSPrimaryBed(t, e, n2)
	before := cniState(t, n2, b.host["free"])
	b.create(seedObjects(t, "seed003-networkqos-story1.yaml", b.ns)...)
	b.ping("paid", internet, 20, "Story 1: paid to the internet")
	b.ping("free", internet, 11, "Story 1: free to the internet")
	b.ping("paid", n2.PodGateway, 0, "Story 1: paid to an excepted private address")
	b.ping("plain", internet, 0, "Story 1: the unlabelled pod")
	b.waitPorts([]string{"paid", "free"}, []string{"plain"})
	waitNodes(t, e, b.ns, "qos-external-paid", map[string]int32{n2.Name: 1}, "enforced on 1 attachments on 1 nodes")
	b.flush("paid")
	b.ping("paid", internet, 20, "after the pod deleted every nftables table and qdisc it sees")
	relabel(t, e, b.ns, "paid", map[string]string{"user-type": "none"})
	b.ping("paid", internet, 0, "relabelled out")
	relabel(t, e, b.ns, "paid", map[string]string{"user-type": "paid"})
	b.ping("paid", internet, 20, "relabelled back")
	b.delete("qos-external-free")
	port := seedObjects(t, "seed003-networkqos-secondary-network.yaml", b.ns)[0]
	port.Spec.NetworkSelectors = ncv1.NetworkSelectors{{NetworkSelectionType: ncv1.DefaultNetwork}}
	b.create(port)
	b.syn("plain", internet, 443, 11, "the port example: TCP 443")
	b.syn("plain", internet, 22, 0, "the port example: TCP 22")
	b.story3()
	if err := e.Kube.CoreV1().Pods(b.ns).Delete(testbed.Context(t, time.Minute), "paid", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	b.waitPorts([]string{"free", "plain"}, []string{"paid"})
	b.delete("qos-external-paid")
	b.delete("qos-external-free")
	b.waitPorts(nil, []string{"paid", "free", "plain"})
	if after := cniState(t, n2, b.host["free"]); after != before {
		t.Errorf("the bridge CNI's state on free's host end changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}
