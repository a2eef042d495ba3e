//go:build testbed

package e2e

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/netclass-dev/netclass/api/contract"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/nstest"
	"github.com/netclass-dev/netclass/test/testbed"
	"github.com/netclass-dev/netclass/test/traffic"
)

// underlayCapture captures, on node 1's underlay interface (the bed's
// underlay bridge, in this machine's namespace), the VXLAN datagrams node
// 2's tunnel sends to node 1, and checks their outer header against the
// packet they carry.
type underlayCapture struct {
	t        *testing.T
	from, to string // the VTEPs: node 2's and node 1's underlay addresses
	s        *traffic.Sniffer
}

// seen sends with send (from the pod whose net1 address is src) until the
// capture holds three encapsulated packets from src that match, carrying
// dscp inside, within liveTimeout (a NetworkQoS reaches a running pod
// within a second); then their outer DSCP must be dscp too.
func (u underlayCapture) seen(what, src string, match func(traffic.Packet) bool, dscp uint8, send func()) {
	u.t.Helper()
	a := netip.MustParseAddr(src)
	ours := func(p traffic.Packet) bool {
		return p.Inner != nil && p.Src == netip.MustParseAddr(u.from) && p.Dst == netip.MustParseAddr(u.to) &&
			p.Inner.Src == a && p.Inner.DSCP == dscp && match(*p.Inner)
	}
	deadline := time.Now().Add(liveTimeout)
	var got []traffic.Packet
	for len(got) < 3 && time.Now().Before(deadline) {
		send()
		got = u.s.WaitFor(ours, 3, time.Second)
	}
	if len(got) < 3 {
		u.t.Fatalf("%s: no three packets from %s with DSCP %d inside, tunnelled %s -> %s, within %v", what, src, dscp, u.from, u.to, liveTimeout)
	}
	for _, p := range got {
		if p.DSCP != p.Inner.DSCP || p.ECN != p.Inner.ECN {
			u.t.Errorf("%s: outer header DSCP %d ECN %d, the packet inside DSCP %d ECN %d: the fabric must see the inner DSCP",
				what, p.DSCP, p.ECN, p.Inner.DSCP, p.Inner.ECN)
		}
	}
}

func isICMP(p traffic.Packet) bool { return p.Proto == 1 }

func tcpTo(port uint16) func(traffic.Packet) bool {
	return func(p traffic.Packet) bool { return p.Proto == 6 && p.DstPort == port }
}

// synTo opens a TCP connection from the pod to addr:port (nothing listens:
// the SYN is what is observed).
func synTo(t *testing.T, e *harness.Env, ns, pod, addr string, port uint16) {
	t.Helper()
	_, _, _ = testbed.Exec(testbed.Context(t, time.Minute), e.Rest, ns, pod, "main", "nc", "-w", "1", addr, fmt.Sprint(port))
}

// What the physical network between two nodes sees of a VXLAN Network across
// them: the outer IP header of every encapsulated packet carries the DSCP the
// packet has entering the tunnel, for (a) a claim's qos.dscp, (b) a
// NetworkQoS rule on a port, (c) that rule changed on the running pod; and 0
// where nothing marks. The senders run on node 2, the receiver on node 1,
// and the capture is on node 1's underlay interface.
func TestTheFabricSeesTheDSCP(t *testing.T) {
	e := harness.Shared(t)
	n1, n2 := twoNodes(t, e)
	class := e.Class(t, harness.NetworkKind)
	cluster := autoVXLANCluster(t, e)
	ns := testbed.Namespace(t, e.Kube)
	e.Network(t, ns, "fabric", cluster, harness.RandomVNI(), harness.RandomSubnet())
	for _, n := range []string{n1.Name, n2.Name} {
		e.WaitDeviceOn(t, n, class, ns, "fabric", true)
	}
	ef := 46
	e.ClaimTemplate(t, ns, "marked", class, ns, "fabric", &contract.AttachmentConfig{QoS: &qos.Spec{DSCP: &ef}})
	e.ClaimTemplate(t, ns, "plain", class, ns, "fabric", nil)
	const port = 7000
	rule := &ncv1.NetworkQoS{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "af21-on-7000"},
		Spec: ncv1.NetworkQoSSpec{
			PodSelector:      metav1.LabelSelector{MatchLabels: map[string]string{"class": "ruled"}},
			NetworkSelectors: ncv1.NetworkSelectors{{NetworkSelectionType: ncv1.Networks, NetworkSelector: &metav1.LabelSelector{}}},
			Priority:         10,
			Egress:           []ncv1.Rule{{DSCP: 18, Classifier: &ncv1.Classifier{Ports: []ncv1.Port{{Protocol: "TCP", Port: ptr.To(int32(port))}}}}},
		},
	}
	if _, err := e.NC.NetclassV1alpha1().NetworkQoSes(ns).Create(testbed.Context(t, time.Minute), rule, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create NetworkQoS: %v", err)
	}
	ruled := harness.PodOn(n2.Name, ns, "ruled", "plain")
	ruled.Labels = map[string]string{"class": "ruled"}
	e.RunPods(t, harness.PodOn(n1.Name, ns, "sink", "plain"), harness.PodOn(n2.Name, ns, "ef", "marked"), ruled,
		harness.PodOn(n2.Name, ns, "unmarked", "plain"))
	sink := harness.Addr(t, e.Attached(t, ns, "sink", "plain", "net1"))
	efAddr := harness.Addr(t, e.Attached(t, ns, "ef", "marked", "net1"))
	ruledAddr := harness.Addr(t, e.Attached(t, ns, "ruled", "plain", "net1"))
	plainAddr := harness.Addr(t, e.Attached(t, ns, "unmarked", "plain", "net1"))

	s, err := traffic.Sniff(&nstest.NS{Name: n1.Name, Path: "/proc/self/ns/net"}, n1.UnderlayIf)
	if err != nil {
		t.Fatalf("capture on %s: %v", n1.UnderlayIf, err)
	}
	t.Cleanup(s.Close)
	u := underlayCapture{t: t, from: n2.IP, to: n1.IP, s: s}
	ping := func(pod string) func() { return func() { e.Ping(t, ns, pod, "net1", sink) } }
	syn := func() { synTo(t, e, ns, "ruled", sink, port) }

	u.seen("(a) the claim's qos.dscp 46", efAddr, isICMP, 46, ping("ef"))
	u.seen("(b) the NetworkQoS rule on TCP/7000: AF21", ruledAddr, tcpTo(port), 18, syn)
	u.seen("(b) the same pod's traffic the rule leaves alone", ruledAddr, isICMP, 0, ping("ruled"))
	if err := updateQoS(t, e, ns, rule.Name, func(q *ncv1.NetworkQoS) { q.Spec.Egress[0].DSCP = 34 }); err != nil {
		t.Fatalf("update NetworkQoS: %v", err)
	}
	u.seen("(c) the rule changed on the running pod: AF41", ruledAddr, tcpTo(port), 34, syn)
	u.seen("(d) nothing marks", plainAddr, isICMP, 0, ping("unmarked"))
}
