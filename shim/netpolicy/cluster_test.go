package netpolicy

import (
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/netclass-dev/netclass/conf/netpol"
)

// What netclass cannot enforce of a ClusterNetworkPolicy rule fails
// closed, as the API asks: an Accept loses the peers (and matches nothing
// when none is left), a Deny or a Pass denies everything; each is a
// RuleError of kind ClusterNetworkPolicy naming the rule.
func TestClusterNotEnforced(t *testing.T) {
	w := newOracleWorld()
	nodes := cnpv1beta1.ClusterNetworkPolicyEgressPeer{Nodes: &metav1.LabelSelector{}}
	domains := cnpv1beta1.ClusterNetworkPolicyEgressPeer{DomainNames: []cnpv1beta1.DomainName{"example.com"}}
	var many []cnpv1beta1.ClusterNetworkPolicyEgressPeer
	for range 5 {
		p := netPeer()
		for j := range 25 {
			p.Networks = append(p.Networks, cnpv1beta1.CIDR("10.9."+string(rune('0'+j%10))+".0/24"))
		}
		many = append(many, p)
	}
	denyAll := []netpol.Verdict{{Action: netpol.Deny}}
	teamB := []netpol.Verdict{{Action: netpol.Accept, Match: netpol.Allow{V4: host("10.1.0.4"), V6: host("fd00::5")}}}
	for _, tc := range []struct {
		name string
		rule func(*cnpv1beta1.ClusterNetworkPolicy)
		want []netpol.Verdict
		path string
	}{
		{"accept: nodes dropped, namespaces kept", out(accept, peerList(nodes, nsPeer("team", "b"))), teamB, "egress[0]"},
		{"accept: only domain names", out(accept, peerList(domains)), nil, "egress[0]"},
		{"deny with nodes", out(deny, peerList(nsPeer("team", "b"), nodes)), denyAll, "egress[0]"},
		{"pass with domain names", out(pass, peerList(domains)), denyAll, "egress[0]"},
		{"deny with a protocol of no known field", out(deny, peerList(nsPeer()), cnpv1beta1.ClusterNetworkPolicyProtocol{}), denyAll, "egress[0]"},
		{"deny over the peers' bound", out(deny, many), denyAll, "egress[0]"},
		{"accept over the peers' bound", out(accept, many), nil, "egress[0]"},
		{"an ingress peer of no known field", in(deny, peerList(cnpv1beta1.ClusterNetworkPolicyEgressPeer{})), denyAll, "ingress[0]"},
		{"an unknown action: denies", out("Allow", peerList(nsPeer())), denyAll, "egress[0]"},
	} {
		p := cnp("c", admin, 1, nsSubject("team", "a"), tc.rule)
		plan, _, err := CompileAll(Policies{Cluster: []*cnpv1beta1.ClusterNetworkPolicy{p}}, w.target(), w)
		got := append(plan.Ingress.Admin, plan.Egress.Admin...)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: verdicts %+v, want %+v", tc.name, got, tc.want)
		}
		res := RuleErrors(err)
		if len(res) == 0 || res[0].Kind != KindClusterNetworkPolicy || res[0].Name != "c" || res[0].Path != tc.path {
			t.Errorf("%s: rule errors %v, want one of ClusterNetworkPolicy c %s", tc.name, err, tc.path)
			continue
		}
		if msg := res[0].Error(); !strings.HasPrefix(msg, "ClusterNetworkPolicy c "+tc.path+": ") {
			t.Errorf("%s: message %q", tc.name, msg)
		}
	}
}

// The tiers and their order land in the plan: Admin before Baseline in
// their own lists, by priority then name, rules in order; a subject with
// neither field selects nothing (a RuleError).
func TestClusterTiers(t *testing.T) {
	w := newOracleWorld()
	all := peerList(nsPeer())
	pols := []*cnpv1beta1.ClusterNetworkPolicy{
		cnp("b2", base, 2, nsSubject(), in(deny, all)),
		cnp("b1", base, 1, nsSubject(), in(pass, all)),
		cnp("a3", admin, 3, nsSubject(), in(accept, all, tcpPort(80)), in(deny, all)),
		cnp("a1", admin, 3, nsSubject(), out(pass, all)),
		cnp("empty", admin, 0, cnpv1beta1.ClusterNetworkPolicySubject{}, in(deny, all)),
	}
	plan, sel, err := CompileAll(Policies{Cluster: pols}, w.target(), w)
	if want := []string{"a1", "a3", "b1", "b2"}; !reflect.DeepEqual(sel.ClusterNetworkPolicies, want) {
		t.Errorf("selected %v, want %v", sel.ClusterNetworkPolicies, want)
	}
	if res := RuleErrors(err); len(res) != 1 || res[0].Name != "empty" || res[0].Path != "subject" {
		t.Errorf("rule errors %v, want one about empty's subject", err)
	}
	actions := func(vs []netpol.Verdict) []netpol.Action {
		var out []netpol.Action
		for _, v := range vs {
			out = append(out, v.Action)
		}
		return out
	}
	for _, c := range []struct {
		what      string
		got, want []netpol.Action
	}{
		{"ingress admin", actions(plan.Ingress.Admin), []netpol.Action{netpol.Accept, netpol.Deny}},
		{"ingress baseline", actions(plan.Ingress.Baseline), []netpol.Action{netpol.Pass, netpol.Deny}},
		{"egress admin", actions(plan.Egress.Admin), []netpol.Action{netpol.Pass}},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
	if plan.Ingress.Isolated || plan.Egress.Isolated {
		t.Error("a ClusterNetworkPolicy isolated the pod as a NetworkPolicy does")
	}
}
