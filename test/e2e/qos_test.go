//go:build testbed

package e2e

import (
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/shim/attachment"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/nstest"
	"github.com/netclass-dev/netclass/test/testbed"
	"github.com/netclass-dev/netclass/test/traffic"
)

// sniffPod captures what a pod's interface receives, in the pod's network
// namespace (its path from netclass-dra's checkpoint).
func sniffPod(t *testing.T, e *harness.Env, p *corev1.Pod, ifname string) *traffic.Sniffer {
	t.Helper()
	att := e.Attachment(t, p.UID, ifname)
	s, err := traffic.Sniff(&nstest.NS{Name: p.Namespace + "/" + p.Name, Path: att.NetNS}, ifname)
	if err != nil {
		t.Fatalf("capture on %s of pod %s/%s: %v", ifname, p.Namespace, p.Name, err)
	}
	t.Cleanup(s.Close)
	return s
}

func icmpFrom(src string, dscp uint8) func(traffic.Packet) bool {
	a := netip.MustParseAddr(src)
	return func(p traffic.Packet) bool { return p.Src == a && p.Proto == 1 && p.DSCP == dscp }
}

func getPod(t *testing.T, e *harness.Env, ns, name string) *corev1.Pod {
	t.Helper()
	p, err := e.Kube.CoreV1().Pods(ns).Get(testbed.Context(t, time.Minute), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The qos of a claim's opaque configuration marks the pod's packets with its
// DSCP on the wire; a NetworkQoS selecting a pod marks the traffic its rule
// classifies; a pod with neither sends unmarked packets.
func TestQoSMarksDSCP(t *testing.T) {
	e := harness.Shared(t)
	class := e.Class(t, harness.PodNetworkKind)
	bridge, pn := "e2e"+harness.Unique(6), "e2e-qos-"+harness.Unique(6)
	subnet := harness.RandomSubnet()
	e.PodNetwork(t, pn, harness.BridgeParams(bridge, subnet), map[string]string{"qos": "yes"}, bridge)
	ns := testbed.Namespace(t, e.Kube)
	e.WaitDevice(t, class, "", pn, true)

	ef := 46
	e.ClaimTemplate(t, ns, "marked", class, "", pn, &attachment.Config{QoS: &qos.Spec{DSCP: &ef}})
	e.ClaimTemplate(t, ns, "plain", class, "", pn, nil)
	nqos := &ncv1.NetworkQoS{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "af21-to-subnet"},
		Spec: ncv1.NetworkQoSSpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"class": "af21"}},
			NetworkSelectors: ncv1.NetworkSelectors{{NetworkSelectionType: ncv1.PodNetworks,
				PodNetworkSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"qos": "yes"}}}},
			Priority: 10,
			Egress:   []ncv1.Rule{{DSCP: 18, Classifier: &ncv1.Classifier{To: []ncv1.Destination{{IPBlock: &ncv1.IPBlock{CIDR: ncv1.CIDR(subnet)}}}}}},
		},
	}
	if _, err := e.NC.NetclassV1alpha1().NetworkQoSes(ns).Create(testbed.Context(t, time.Minute), nqos, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create NetworkQoS: %v", err)
	}
	af21 := harness.Pod(ns, "af21", "plain")
	af21.Labels = map[string]string{"class": "af21"}
	peer := harness.Pod(ns, "peer", "plain")
	peer.Labels = map[string]string{"role": "peer"}
	e.RunPods(t, harness.Pod(ns, "ef", "marked"), peer, af21)

	efAddr := harness.Addr(t, e.Attached(t, ns, "ef", "marked", "net1"))
	peerAddr := harness.Addr(t, e.Attached(t, ns, "peer", "plain", "net1"))
	af21Addr := harness.Addr(t, e.Attached(t, ns, "af21", "plain", "net1"))
	atPeer := sniffPod(t, e, getPod(t, e, ns, "peer"), "net1")
	atEF := sniffPod(t, e, getPod(t, e, ns, "ef"), "net1")

	e.Ping(t, ns, "ef", "net1", peerAddr)
	if got := atPeer.WaitFor(icmpFrom(efAddr, 46), 3, 5*time.Second); len(got) < 3 {
		t.Fatalf("the peer saw %d ICMP packets from %s marked EF (46); all it saw: %+v", len(got), efAddr, atPeer.Packets())
	}
	e.Ping(t, ns, "af21", "net1", peerAddr)
	if got := atPeer.WaitFor(icmpFrom(af21Addr, 18), 3, 5*time.Second); len(got) < 3 {
		t.Fatalf("the peer saw %d ICMP packets from %s marked AF21 (18) by the NetworkQoS; all it saw: %+v", len(got), af21Addr, atPeer.Packets())
	}
	e.Ping(t, ns, "peer", "net1", efAddr)
	if got := atEF.WaitFor(icmpFrom(peerAddr, 0), 3, 5*time.Second); len(got) < 3 {
		t.Fatalf("the EF pod saw %d unmarked ICMP packets from the peer %s; all it saw: %+v", len(got), peerAddr, atEF.Packets())
	}

	// A destination given by pod selector: resolved, when the pod is
	// prepared, to the addresses the selected pods have on the network.
	toPeer := &ncv1.NetworkQoS{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cs5-to-peer"},
		Spec: ncv1.NetworkQoSSpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"class": "cs5"}},
			Priority:    20,
			Egress: []ncv1.Rule{{DSCP: 40, Classifier: &ncv1.Classifier{To: []ncv1.Destination{{
				PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "peer"}}}}}}},
		},
	}
	if _, err := e.NC.NetclassV1alpha1().NetworkQoSes(ns).Create(testbed.Context(t, time.Minute), toPeer, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create NetworkQoS: %v", err)
	}
	cs5 := harness.Pod(ns, "cs5", "plain")
	cs5.Labels = map[string]string{"class": "cs5"}
	e.RunPods(t, cs5)
	cs5Addr := harness.Addr(t, e.Attached(t, ns, "cs5", "plain", "net1"))
	e.Ping(t, ns, "cs5", "net1", peerAddr)
	if got := atPeer.WaitFor(icmpFrom(cs5Addr, 40), 3, 5*time.Second); len(got) < 3 {
		t.Fatalf("the peer saw %d ICMP packets from %s marked CS5 (40) by the pod-selector rule; all it saw: %+v", len(got), cs5Addr, atPeer.Packets())
	}
	e.Ping(t, ns, "cs5", "net1", efAddr)
	if got := atEF.WaitFor(icmpFrom(cs5Addr, 0), 3, 5*time.Second); len(got) < 3 {
		t.Fatalf("the EF pod, not selected by the rule, saw %d unmarked ICMP packets from %s; all it saw: %+v", len(got), cs5Addr, atEF.Packets())
	}
}
