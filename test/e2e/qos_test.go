//go:build testbed

package e2e

import (
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netclass-dev/netclass/api/contract"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/qos"
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

// pingSeen pings dst from the pod over net1 and fails unless the sniffer
// at dst saw three of those pings from src carrying dscp (0: unmarked).
func pingSeen(t *testing.T, e *harness.Env, ns, pod, dst string, at *traffic.Sniffer, src string, dscp uint8, what string) {
	t.Helper()
	e.Ping(t, ns, pod, "net1", dst)
	if got := at.WaitFor(icmpFrom(src, dscp), 3, 5*time.Second); len(got) < 3 {
		t.Fatalf("%s: %d ICMP packets from %s with DSCP %d seen at %s; all it saw: %+v", what, len(got), src, dscp, dst, at.Packets())
	}
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
// classifies; a pod with neither sends unmarked packets. The pods run on node 1:
// they share a bridge (node-local), and the sniffers enter their network
// namespaces from node 1's checkpoint.
func TestQoSMarksDSCP(t *testing.T) {
	e := harness.Shared(t)
	class := e.Class(t, harness.PodNetworkKind)
	bridge, pn := "e2e"+harness.Unique(6), "e2e-qos-"+harness.Unique(6)
	subnet := harness.RandomSubnet()
	e.PodNetwork(t, pn, harness.BridgeParams(bridge, subnet), map[string]string{"qos": "yes"}, bridge)
	ns := testbed.Namespace(t, e.Kube)
	e.WaitDevice(t, class, "", pn, true)

	ef := 46
	e.ClaimTemplate(t, ns, "marked", class, "", pn, &contract.AttachmentConfig{QoS: &qos.Spec{DSCP: &ef}})
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
	af21 := harness.PodOn(e.Node, ns, "af21", "plain")
	af21.Labels = map[string]string{"class": "af21"}
	peer := harness.PodOn(e.Node, ns, "peer", "plain")
	peer.Labels = map[string]string{"role": "peer"}
	e.RunPods(t, harness.PodOn(e.Node, ns, "ef", "marked"), peer, af21)

	efAddr := harness.Addr(t, e.Attached(t, ns, "ef", "marked", "net1"))
	peerAddr := harness.Addr(t, e.Attached(t, ns, "peer", "plain", "net1"))
	af21Addr := harness.Addr(t, e.Attached(t, ns, "af21", "plain", "net1"))
	atPeer := sniffPod(t, e, getPod(t, e, ns, "peer"), "net1")
	atEF := sniffPod(t, e, getPod(t, e, ns, "ef"), "net1")

	pingSeen(t, e, ns, "ef", peerAddr, atPeer, efAddr, 46, "the claim's qos (EF) seen by the peer")
	pingSeen(t, e, ns, "af21", peerAddr, atPeer, af21Addr, 18, "the NetworkQoS ipBlock rule's AF21 seen by the peer")
	pingSeen(t, e, ns, "peer", efAddr, atEF, peerAddr, 0, "the peer's traffic stays unmarked")

	// A destination given by pod selector: resolved, when the pod is
	// prepared, to the addresses the selected pods have on the network.
	toPeer := &ncv1.NetworkQoS{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cs5-to-peer"},
		Spec: ncv1.NetworkQoSSpec{
			NetworkSelectors: netclassNetworks(),
			PodSelector:      metav1.LabelSelector{MatchLabels: map[string]string{"class": "cs5"}},
			Priority:         20,
			Egress: []ncv1.Rule{{DSCP: 40, Classifier: &ncv1.Classifier{To: []ncv1.Destination{{
				PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "peer"}}}}}}},
		},
	}
	if _, err := e.NC.NetclassV1alpha1().NetworkQoSes(ns).Create(testbed.Context(t, time.Minute), toPeer, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create NetworkQoS: %v", err)
	}
	cs5 := harness.PodOn(e.Node, ns, "cs5", "plain")
	cs5.Labels = map[string]string{"class": "cs5"}
	e.RunPods(t, cs5)
	cs5Addr := harness.Addr(t, e.Attached(t, ns, "cs5", "plain", "net1"))
	pingSeen(t, e, ns, "cs5", peerAddr, atPeer, cs5Addr, 40, "the pod-selector rule's CS5 seen by the peer")
	pingSeen(t, e, ns, "cs5", efAddr, atEF, cs5Addr, 0, "traffic to a pod the rule does not select stays unmarked")
}
