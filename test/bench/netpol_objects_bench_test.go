package bench

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/netclass-dev/netclass/api/contract"
)

// The benchmark's NetworkPolicies: 50 of them over 100 pods, each pod
// selected by 14 to 16.

// benchPolicy returns the k-th policy: its selector and rules cycle
// through the kinds at different periods, so they combine.
func benchPolicy(k int) *networkingv1.NetworkPolicy {
	p := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: polNamespace, Name: fmt.Sprintf("pol-%02d", k),
			Labels: map[string]string{contract.PolicyControllerLabel: contract.PolicyController}},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: policySelector(k)},
	}
	p.Spec.Ingress = ingressRules(k)
	if k%5 == 0 {
		p.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
		p.Spec.Egress = egressRules()
	}
	return p
}

// policySelector spreads the policies over the pods (14 to 16 select each
// pod): one app, one tier, one app in two tiers, two tiers, and every pod
// for two of them.
func policySelector(k int) metav1.LabelSelector {
	app, tier, tier2 := polApps[(k/4)%3], polTiers[k%5], polTiers[(k+2)%5]
	tiers := []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{tier, tier2}}}
	switch {
	case k%25 == 24:
		return metav1.LabelSelector{}
	case k%4 == 0:
		return metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	case k%4 == 1:
		return metav1.LabelSelector{MatchLabels: map[string]string{"tier": tier}}
	case k%4 == 2:
		return metav1.LabelSelector{MatchLabels: map[string]string{"app": app}, MatchExpressions: tiers}
	default:
		return metav1.LabelSelector{MatchExpressions: tiers}
	}
}

// ingressRules are the k-th policy's: always from another app's pods to a
// TCP port (the rule the benchmark edits), and by turns from ipBlocks to a
// UDP port, from a tier's pods and a block to a port range and VXLAN, and
// from every pod of every namespace to any port.
func ingressRules(k int) []networkingv1.NetworkPolicyIngressRule {
	rules := []networkingv1.NetworkPolicyIngressRule{{
		From:  []networkingv1.NetworkPolicyPeer{podPeer("app", polApps[(k+1)%3])},
		Ports: []networkingv1.NetworkPolicyPort{port(corev1.ProtocolTCP, 8000+k, 0)},
	}}
	switch k % 3 {
	case 1:
		rules = append(rules, networkingv1.NetworkPolicyIngressRule{
			From: []networkingv1.NetworkPolicyPeer{
				blockPeer("10.0.0.0/8", "10.77.0.0/16", "10.9.0.0/16"),
				blockPeer("fd00::/8", "fd00:77::/32"),
			},
			Ports: []networkingv1.NetworkPolicyPort{port(corev1.ProtocolUDP, 5000+k, 0)},
		})
	case 2:
		rules = append(rules, networkingv1.NetworkPolicyIngressRule{
			From:  []networkingv1.NetworkPolicyPeer{podPeer("tier", polTiers[k%5]), blockPeer("192.168.0.0/16")},
			Ports: []networkingv1.NetworkPolicyPort{port(corev1.ProtocolTCP, 30000, 30000+10*k), port(corev1.ProtocolUDP, 4789, 0)},
		})
	}
	if k%7 == 3 {
		rules = append(rules, networkingv1.NetworkPolicyIngressRule{
			From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}},
		})
	}
	return rules
}

// egressRules allow the database and DNS outside the link-local range.
func egressRules() []networkingv1.NetworkPolicyEgressRule {
	return []networkingv1.NetworkPolicyEgressRule{
		{To: []networkingv1.NetworkPolicyPeer{podPeer("app", "db")}, Ports: []networkingv1.NetworkPolicyPort{port(corev1.ProtocolTCP, 5432, 0)}},
		{To: []networkingv1.NetworkPolicyPeer{blockPeer("0.0.0.0/0", "169.254.0.0/16")},
			Ports: []networkingv1.NetworkPolicyPort{port(corev1.ProtocolUDP, 53, 0), port(corev1.ProtocolTCP, 53, 0)}},
	}
}

func podPeer(key, value string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{key: value}}}
}

func blockPeer(cidr string, except ...string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr, Except: except}}
}

// port is a numbered port, a range up to end when end is not 0.
func port(proto corev1.Protocol, num, end int) networkingv1.NetworkPolicyPort {
	p := networkingv1.NetworkPolicyPort{Protocol: &proto, Port: ptr(intstr.FromInt32(int32(num)))}
	if end != 0 {
		p.EndPort = ptr(int32(end))
	}
	return p
}

// editProtocol turns the protocol of the policy's first port from TCP to
// UDP, or back.
func editProtocol(p *networkingv1.NetworkPolicy) {
	proto := p.Spec.Ingress[0].Ports[0].Protocol
	if *proto == corev1.ProtocolTCP {
		*proto = corev1.ProtocolUDP
	} else {
		*proto = corev1.ProtocolTCP
	}
}

// editPort moves the port of the policy's first rule by 1000, or back.
func editPort(p *networkingv1.NetworkPolicy) {
	pp := p.Spec.Ingress[0].Ports[0].Port
	if pp.IntVal < 9000 {
		*pp = intstr.FromInt32(pp.IntVal + 1000)
	} else {
		*pp = intstr.FromInt32(pp.IntVal - 1000)
	}
}
