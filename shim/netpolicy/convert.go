package netpolicy

import (
	mnpv1beta1 "github.com/k8snetworkplumbingwg/multi-networkpolicy/pkg/apis/k8s.cni.cncf.io/v1beta1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FromMulti is the MultiNetworkPolicy as the NetworkPolicy Compile reads:
// kind MultiNetworkPolicy (so that it is scoped by its policy-for, never
// by the label and annotation of a NetworkPolicy), its metadata, and its
// spec field for field (the two specs are the same fields). Nothing is
// shared with p.
func FromMulti(p *mnpv1beta1.MultiNetworkPolicy) *networkingv1.NetworkPolicy {
	out := &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{Kind: KindMultiNetworkPolicy, APIVersion: mnpv1beta1.SchemeGroupVersion.String()},
		ObjectMeta: *p.ObjectMeta.DeepCopy(),
		Spec:       networkingv1.NetworkPolicySpec{PodSelector: *p.Spec.PodSelector.DeepCopy()},
	}
	s := &p.Spec
	if s.Ingress != nil {
		out.Spec.Ingress = make([]networkingv1.NetworkPolicyIngressRule, len(s.Ingress))
		for i, r := range s.Ingress {
			out.Spec.Ingress[i] = networkingv1.NetworkPolicyIngressRule{Ports: convertPorts(r.Ports), From: convertPeers(r.From)}
		}
	}
	if s.Egress != nil {
		out.Spec.Egress = make([]networkingv1.NetworkPolicyEgressRule, len(s.Egress))
		for i, r := range s.Egress {
			out.Spec.Egress[i] = networkingv1.NetworkPolicyEgressRule{Ports: convertPorts(r.Ports), To: convertPeers(r.To)}
		}
	}
	if s.PolicyTypes != nil {
		out.Spec.PolicyTypes = make([]networkingv1.PolicyType, len(s.PolicyTypes))
		for i, t := range s.PolicyTypes {
			out.Spec.PolicyTypes[i] = networkingv1.PolicyType(t)
		}
	}
	return out
}

func convertPorts(in []mnpv1beta1.MultiNetworkPolicyPort) []networkingv1.NetworkPolicyPort {
	if in == nil {
		return nil
	}
	out := make([]networkingv1.NetworkPolicyPort, len(in))
	for i, p := range in {
		c := p.DeepCopy()
		out[i] = networkingv1.NetworkPolicyPort{Protocol: c.Protocol, Port: c.Port, EndPort: c.EndPort}
	}
	return out
}

func convertPeers(in []mnpv1beta1.MultiNetworkPolicyPeer) []networkingv1.NetworkPolicyPeer {
	if in == nil {
		return nil
	}
	out := make([]networkingv1.NetworkPolicyPeer, len(in))
	for i, p := range in {
		c := p.DeepCopy()
		out[i] = networkingv1.NetworkPolicyPeer{PodSelector: c.PodSelector, NamespaceSelector: c.NamespaceSelector}
		if c.IPBlock != nil {
			out[i].IPBlock = &networkingv1.IPBlock{CIDR: c.IPBlock.CIDR, Except: c.IPBlock.Except}
		}
	}
	return out
}
