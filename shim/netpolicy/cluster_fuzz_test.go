package netpolicy

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/test/e2e/policyeval"
)

// Bits of one fuzzed ClusterNetworkPolicy's shape (clusterShapeBits of
// them; FuzzCompileCluster's shape holds two, then its namespaced
// policies' bits).
const (
	cnpBaseline  = 1 << 0 // the tier: Admin, or Baseline
	cnpSubject   = 3 << 1 // namespaces team=a, team=b, pods app=server of any namespace, app=web
	cnpEgress    = 1 << 3 // the rule's direction
	cnpAction    = 3 << 4 // Accept, Deny, Pass (3: Accept)
	cnpPeer      = 3 << 6 // namespaces of everyone, team=b, pods app=client, the fuzzed CIDR (egress)
	cnpProto     = 3 << 8 // every port, TCP port, UDP port..end, the named port http
	clusterShape = 10
)

// FuzzCompileCluster: whatever two ClusterNetworkPolicies of any tier,
// priority, subject, action, peers (the CIDR fuzzed) and ports, over none
// or one of t1's NetworkPolicies, CompileAll never panics, the plan never
// lets through a connection the oracle (policyeval, written apart) denies
// — what it cannot enforce fails closed — and, when nothing was left
// out, the plan allows exactly what the oracle allows.
func FuzzCompileCluster(f *testing.F) {
	f.Add(uint32(0), int32(10), int32(10), "10.1.0.0/16", int32(80), int32(90))
	f.Add(uint32(1|1<<1|2<<4|1<<clusterShape|2<<(clusterShape+4)|1<<(2*clusterShape)), int32(5), int32(50), "", int32(8080), int32(8080))
	f.Add(uint32(3<<6|cnpEgress|1<<8|2<<(clusterShape+4)|2<<(2*clusterShape)), int32(1), int32(1), "10.0.0.0/8", int32(9004), int32(0))
	f.Add(uint32(2<<1|2<<8|1<<4|cnpBaseline<<clusterShape|3<<(clusterShape+8)), int32(0), int32(0), "fd00::/64", int32(53), int32(9100))
	f.Add(uint32(3<<6|cnpEgress|1<<4), int32(1), int32(2), "10.0.0.0/33", int32(70000), int32(-1))
	f.Fuzz(func(t *testing.T, shape uint32, prioA, prioB int32, cidr string, port, end int32) {
		w := newOracleWorld()
		cluster := []*cnpv1beta1.ClusterNetworkPolicy{
			fuzzCluster("a", shape, prioA, cidr, port, end),
			fuzzCluster("b", shape>>clusterShape, prioB, cidr, port, end),
		}
		allowAll, clientOnly := namespacedT1()
		pols := [][]*networkingv1.NetworkPolicy{nil, {allowAll}, {clientOnly}, nil}[shape>>(2*clusterShape)&3]
		world := policyeval.World{Policies: pols, Cluster: cluster, Namespaces: w.namespaces, Network: blue.Ref.Name}
		plan, _, err := CompileAll(Policies{NetworkPolicies: pols, Cluster: cluster}, w.target(), w)
		for _, pr := range w.probes(port, end) {
			got, want := planAllows(plan, pr), w.oracle(world, pr)
			if got && !want {
				t.Fatalf("%s: the plan allows it, the oracle denies it\nplan %+v\nleft out: %v", pr, plan, err)
			}
			if err == nil && got != want {
				t.Fatalf("%s: the plan denies it, the oracle allows it, and nothing was left out\nplan %+v", pr, plan)
			}
		}
	})
}

// fuzzCluster is one of FuzzCompileCluster's policies, labelled for
// netclass, with one rule, its shape given by the low bits of shape.
func fuzzCluster(name string, shape uint32, prio int32, cidr string, port, end int32) *cnpv1beta1.ClusterNetworkPolicy {
	tier := admin
	if shape&cnpBaseline != 0 {
		tier = base
	}
	subject := []cnpv1beta1.ClusterNetworkPolicySubject{nsSubject("team", "a"), nsSubject("team", "b"),
		podSubject(labelSel(), labelSel("app", "server")), podSubject(labelSel(), labelSel("app", "web"))}[shape&cnpSubject>>1]
	action := []cnpv1beta1.ClusterNetworkPolicyRuleAction{accept, deny, pass, accept}[shape&cnpAction>>4]
	peer := []cnpv1beta1.ClusterNetworkPolicyEgressPeer{nsPeer(), nsPeer("team", "b"),
		podPeerOf(labelSel(), labelSel("app", "client")), netPeer(cidr)}[shape&cnpPeer>>6]
	var protos []cnpv1beta1.ClusterNetworkPolicyProtocol
	switch shape & cnpProto >> 8 {
	case 1:
		protos = append(protos, tcpPort(port))
	case 2:
		protos = append(protos, cnpv1beta1.ClusterNetworkPolicyProtocol{UDP: &cnpv1beta1.ClusterNetworkPolicyProtocolUDP{
			DestinationPort: &cnpv1beta1.Port{Range: &cnpv1beta1.PortRange{Start: port, End: end}}}})
	case 3:
		protos = append(protos, namedPort("http"))
	}
	rule := in(action, peerList(peer), protos...)
	if shape&cnpEgress != 0 {
		rule = out(action, peerList(peer), protos...)
	}
	p := cnp(name, tier, prio, subject, rule)
	p.ObjectMeta = metav1.ObjectMeta{Name: name, Labels: map[string]string{contract.PolicyControllerLabel: contract.PolicyController}}
	return p
}
