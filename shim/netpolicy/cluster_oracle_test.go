package netpolicy

import (
	"cmp"
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/test/e2e/policyeval"
)

// Builders of ClusterNetworkPolicies for the tests.

func cnp(name string, tier cnpv1beta1.Tier, prio int32, subject cnpv1beta1.ClusterNetworkPolicySubject, mutate ...func(*cnpv1beta1.ClusterNetworkPolicy)) *cnpv1beta1.ClusterNetworkPolicy {
	p := &cnpv1beta1.ClusterNetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{contract.PolicyControllerLabel: contract.PolicyController}},
		Spec:       cnpv1beta1.ClusterNetworkPolicySpec{Tier: tier, Priority: prio, Subject: subject},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func labelSel(kv ...string) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

func nsSubject(kv ...string) cnpv1beta1.ClusterNetworkPolicySubject {
	return cnpv1beta1.ClusterNetworkPolicySubject{Namespaces: labelSel(kv...)}
}

func podSubject(ns, pod *metav1.LabelSelector) cnpv1beta1.ClusterNetworkPolicySubject {
	return cnpv1beta1.ClusterNetworkPolicySubject{Pods: &cnpv1beta1.NamespacedPod{NamespaceSelector: *ns, PodSelector: *pod}}
}

func nsPeer(kv ...string) cnpv1beta1.ClusterNetworkPolicyEgressPeer {
	return cnpv1beta1.ClusterNetworkPolicyEgressPeer{Namespaces: labelSel(kv...)}
}

func podPeerOf(ns, pod *metav1.LabelSelector) cnpv1beta1.ClusterNetworkPolicyEgressPeer {
	return cnpv1beta1.ClusterNetworkPolicyEgressPeer{Pods: &cnpv1beta1.NamespacedPod{NamespaceSelector: *ns, PodSelector: *pod}}
}

func netPeer(cidrs ...string) cnpv1beta1.ClusterNetworkPolicyEgressPeer {
	p := cnpv1beta1.ClusterNetworkPolicyEgressPeer{}
	for _, c := range cidrs {
		p.Networks = append(p.Networks, cnpv1beta1.CIDR(c))
	}
	return p
}

// in adds an ingress rule (its peers' egress-only fields are dropped).
func in(action cnpv1beta1.ClusterNetworkPolicyRuleAction, peers []cnpv1beta1.ClusterNetworkPolicyEgressPeer, protos ...cnpv1beta1.ClusterNetworkPolicyProtocol) func(*cnpv1beta1.ClusterNetworkPolicy) {
	return func(p *cnpv1beta1.ClusterNetworkPolicy) {
		r := cnpv1beta1.ClusterNetworkPolicyIngressRule{Action: action, Protocols: protos}
		for _, peer := range peers {
			r.From = append(r.From, cnpv1beta1.ClusterNetworkPolicyIngressPeer{Namespaces: peer.Namespaces, Pods: peer.Pods})
		}
		p.Spec.Ingress = append(p.Spec.Ingress, r)
	}
}

func out(action cnpv1beta1.ClusterNetworkPolicyRuleAction, peers []cnpv1beta1.ClusterNetworkPolicyEgressPeer, protos ...cnpv1beta1.ClusterNetworkPolicyProtocol) func(*cnpv1beta1.ClusterNetworkPolicy) {
	return func(p *cnpv1beta1.ClusterNetworkPolicy) {
		p.Spec.Egress = append(p.Spec.Egress, cnpv1beta1.ClusterNetworkPolicyEgressRule{Action: action, To: peers, Protocols: protos})
	}
}

func peerList(ps ...cnpv1beta1.ClusterNetworkPolicyEgressPeer) []cnpv1beta1.ClusterNetworkPolicyEgressPeer {
	return ps
}

func tcpPort(n int32) cnpv1beta1.ClusterNetworkPolicyProtocol {
	return cnpv1beta1.ClusterNetworkPolicyProtocol{TCP: &cnpv1beta1.ClusterNetworkPolicyProtocolTCP{DestinationPort: &cnpv1beta1.Port{Number: n}}}
}

func udpAll() cnpv1beta1.ClusterNetworkPolicyProtocol {
	return cnpv1beta1.ClusterNetworkPolicyProtocol{UDP: &cnpv1beta1.ClusterNetworkPolicyProtocolUDP{}}
}

func sctpRange(from, to int32) cnpv1beta1.ClusterNetworkPolicyProtocol {
	return cnpv1beta1.ClusterNetworkPolicyProtocol{SCTP: &cnpv1beta1.ClusterNetworkPolicyProtocolSCTP{
		DestinationPort: &cnpv1beta1.Port{Range: &cnpv1beta1.PortRange{Start: from, End: to}}}}
}

func namedPort(name string) cnpv1beta1.ClusterNetworkPolicyProtocol {
	return cnpv1beta1.ClusterNetworkPolicyProtocol{DestinationNamedPort: name}
}

const (
	accept = cnpv1beta1.ClusterNetworkPolicyRuleActionAccept
	deny   = cnpv1beta1.ClusterNetworkPolicyRuleActionDeny
	pass   = cnpv1beta1.ClusterNetworkPolicyRuleActionPass
	admin  = cnpv1beta1.AdminTier
	base   = cnpv1beta1.BaselineTier
)

type clusterScenario struct {
	name    string
	cluster []*cnpv1beta1.ClusterNetworkPolicy
	pols    []*networkingv1.NetworkPolicy
	// none: no ClusterNetworkPolicy selects the pod (otherwise all do).
	none bool
}

// clusterScenarios are ClusterNetworkPolicies (with NetworkPolicies) on
// the oracle's world, whose attachment compiled is t1/server's (team a,
// app server).
func clusterScenarios() []clusterScenario {
	allowAll, clientOnly := namespacedT1()
	teamA, teamB := nsPeer("team", "a"), nsPeer("team", "b")
	everyone := nsPeer()
	return []clusterScenario{
		{"admin deny over a namespace allow", []*cnpv1beta1.ClusterNetworkPolicy{
			cnp("deny-b", admin, 10, nsSubject("team", "a"), in(deny, peerList(teamB)))}, []*networkingv1.NetworkPolicy{allowAll}, false},
		{"admin pass to a namespace policy", []*cnpv1beta1.ClusterNetworkPolicy{
			cnp("pass-a", admin, 10, nsSubject("team", "a"), in(pass, peerList(teamA))),
			cnp("deny-all", admin, 20, nsSubject("team", "a"), in(deny, peerList(everyone)))}, []*networkingv1.NetworkPolicy{clientOnly}, false},
		{"baseline deny under no policy", []*cnpv1beta1.ClusterNetworkPolicy{
			cnp("base-deny", base, 10, nsSubject("team", "a"), in(deny, peerList(everyone), tcpPort(8080), udpAll()))}, nil, false},
		{"baseline under a namespace policy: not reached", []*cnpv1beta1.ClusterNetworkPolicy{
			cnp("base-accept", base, 10, nsSubject("team", "a"), in(accept, peerList(everyone)))}, []*networkingv1.NetworkPolicy{clientOnly}, false},
		{"two admin policies: the lower priority first", []*cnpv1beta1.ClusterNetworkPolicy{
			cnp("z-accept-client", admin, 5, nsSubject("team", "a"), in(accept, peerList(podPeerOf(labelSel("team", "b"), labelSel("app", "client"))))),
			cnp("a-deny-b", admin, 50, nsSubject("team", "a"), in(deny, peerList(teamB)))}, nil, false},
		{"two admin policies swapped", []*cnpv1beta1.ClusterNetworkPolicy{
			cnp("z-accept-client", admin, 50, nsSubject("team", "a"), in(accept, peerList(podPeerOf(labelSel("team", "b"), labelSel("app", "client"))))),
			cnp("a-deny-b", admin, 5, nsSubject("team", "a"), in(deny, peerList(teamB)))}, nil, false},
		{"pods subject and pods peers, egress", []*cnpv1beta1.ClusterNetworkPolicy{
			cnp("server-out", admin, 1, podSubject(labelSel("team", "a"), labelSel("app", "server")),
				out(deny, peerList(podPeerOf(labelSel(), labelSel("app", "client"))), udpAll(), tcpPort(8002)))}, nil, false},
		{"a subject that is not the pod", []*cnpv1beta1.ClusterNetworkPolicy{
			cnp("team-b", admin, 1, nsSubject("team", "b"), in(deny, peerList(everyone)), out(deny, peerList(everyone))),
			cnp("web", admin, 1, podSubject(labelSel(), labelSel("app", "web")), in(deny, peerList(everyone)))}, nil, true},
		{"networks (CIDR) peers", []*cnpv1beta1.ClusterNetworkPolicy{
			cnp("cidr", admin, 1, nsSubject("team", "a"), out(accept, peerList(netPeer("10.1.0.0/16")), tcpPort(9004)),
				out(deny, peerList(netPeer("10.0.0.0/8", "fd00::/64"))))}, nil, false},
		{"rules in order, ports by range and name", []*cnpv1beta1.ClusterNetworkPolicy{
			cnp("ports", admin, 1, nsSubject("team", "a"), in(accept, peerList(everyone), namedPort("http"), namedPort("dns")),
				in(deny, peerList(teamB), sctpRange(9000, 9200)), in(pass, peerList(everyone), tcpPort(80))),
			cnp("base", base, 1, nsSubject("team", "a"), in(deny, peerList(everyone)))}, nil, false},
		{"baseline pass ends the tier", []*cnpv1beta1.ClusterNetworkPolicy{
			cnp("a-pass", base, 1, nsSubject("team", "a"), in(pass, peerList(teamA))),
			cnp("b-deny", base, 2, nsSubject("team", "a"), in(deny, peerList(everyone)))}, nil, false},
		{"admin accept over an egress isolation", []*cnpv1beta1.ClusterNetworkPolicy{
			cnp("out", admin, 1, nsSubject("team", "a"), out(accept, peerList(teamB)))},
			[]*networkingv1.NetworkPolicy{policy("deny-out", func(p *networkingv1.NetworkPolicy) {
				p.Namespace = "t1"
				p.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
			})}, false},
		{"unlabelled: ignored", []*cnpv1beta1.ClusterNetworkPolicy{
			cnp("other", admin, 1, nsSubject("team", "a"), in(deny, peerList(everyone)), func(p *cnpv1beta1.ClusterNetworkPolicy) { p.Labels = nil })}, nil, true},
	}
}

// namespacedT1 are two NetworkPolicies of t1 selecting every pod: one
// allows all ingress, the other ingress from app=client.
func namespacedT1() (allowAll, clientOnly *networkingv1.NetworkPolicy) {
	allowAll = policy("allow-all", func(p *networkingv1.NetworkPolicy) {
		p.Namespace = "t1"
		p.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{}}
	})
	clientOnly = policy("client-only", func(p *networkingv1.NetworkPolicy) {
		p.Namespace = "t1"
		p.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{from("client")}}}
	})
	return allowAll, clientOnly
}

// Each scenario's plan lets through exactly what the oracle (policyeval,
// written apart) lets through, on every probe, with nothing left out, and
// names the ClusterNetworkPolicies whose subject selects the pod.
func TestClusterOracle(t *testing.T) {
	w := newOracleWorld()
	for _, sc := range clusterScenarios() {
		for _, p := range sc.pols {
			p.Labels = map[string]string{contract.PolicyControllerLabel: contract.PolicyController}
		}
		world := policyeval.World{Policies: sc.pols, Cluster: sc.cluster, Namespaces: w.namespaces, Network: blue.Ref.Name}
		plan, sel, err := CompileAll(Policies{NetworkPolicies: sc.pols, Cluster: sc.cluster}, w.target(), w)
		if err != nil {
			t.Errorf("%s: %v", sc.name, err)
		}
		var want []string // in precedence order: tier, priority, name
		for _, p := range sc.cluster {
			if !sc.none {
				want = append(want, p.Name)
			}
		}
		slices.SortFunc(want, func(a, b string) int {
			pa, pb := clusterByName(sc.cluster, a), clusterByName(sc.cluster, b)
			return cmp.Or(cmp.Compare(pa.Spec.Tier, pb.Spec.Tier), cmp.Compare(pa.Spec.Priority, pb.Spec.Priority), cmp.Compare(a, b))
		})
		if !slices.Equal(sel.ClusterNetworkPolicies, want) {
			t.Errorf("%s: selected %v, want %v", sc.name, sel.ClusterNetworkPolicies, want)
		}
		differ, denied := 0, 0
		for _, pr := range w.probes(80, 8002, 9004, 9100) {
			got, want := planAllows(plan, pr), w.oracle(world, pr)
			if !want {
				denied++
			}
			if got != want {
				differ++
				if differ <= 3 {
					t.Errorf("%s: %s: the plan allows %v, the oracle %v", sc.name, pr, got, want)
				}
			}
		}
		t.Logf("%s: the oracle denies %d probes", sc.name, denied)
	}
}

// clusterByName finds a policy of the list ("Admin" sorts before
// "Baseline", as the tiers go).
func clusterByName(ps []*cnpv1beta1.ClusterNetworkPolicy, name string) *cnpv1beta1.ClusterNetworkPolicy {
	for _, p := range ps {
		if p.Name == name {
			return p
		}
	}
	return nil
}
