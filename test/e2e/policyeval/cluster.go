package policyeval

import (
	"net/netip"
	"sort"

	corev1 "k8s.io/api/core/v1"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/netclass-dev/netclass/api/contract"
)

// ClusterNetworkPolicy (policy.networking.k8s.io/v1beta1), as its API
// documents it: the policies of a tier whose subject selects the pod are
// taken by priority (lower first; equal priorities by name, which the API
// leaves to the implementation), the rules of each in order; the first
// rule whose peer and protocol match decides: Accept lets the connection
// through, Deny drops it, Pass ends the tier (an Admin Pass hands it to
// the NetworkPolicies). Only policies labelled for netclass count, on every
// netclass network of the pod.

// SelectingCluster names the ClusterNetworkPolicies whose subject selects
// the pod, Admin then Baseline, each tier in precedence order.
func (w World) SelectingCluster(pod Pod) []string {
	var out []string
	for _, tier := range []cnpv1beta1.Tier{cnpv1beta1.AdminTier, cnpv1beta1.BaselineTier} {
		for _, p := range w.selecting(tier, pod) {
			out = append(out, p.Name)
		}
	}
	return out
}

// selecting is the tier's policies whose subject selects the pod, in
// precedence order.
func (w World) selecting(tier cnpv1beta1.Tier, pod Pod) []*cnpv1beta1.ClusterNetworkPolicy {
	var pols []*cnpv1beta1.ClusterNetworkPolicy
	for _, p := range w.Cluster {
		if p.Spec.Tier == tier && p.Labels[contract.PolicyControllerLabel] == contract.PolicyController && w.subject(p, pod) {
			pols = append(pols, p)
		}
	}
	sort.Slice(pols, func(i, j int) bool {
		if pols[i].Spec.Priority != pols[j].Spec.Priority {
			return pols[i].Spec.Priority < pols[j].Spec.Priority
		}
		return pols[i].Name < pols[j].Name
	})
	return pols
}

// tier is the tier's verdict on the connection, and whether it decided.
func (w World) tier(tier cnpv1beta1.Tier, subject, peer Pod, proto corev1.Protocol, port int32, ingress bool) (verdict, decided bool) {
	pols := w.selecting(tier, subject)
	server := peer
	if ingress {
		server = subject
	}
	for _, p := range pols {
		for _, r := range clusterRules(p, ingress) {
			if !w.clusterPeer(r.peers, peer) || !clusterPorts(r.protocols, server, proto, port) {
				continue
			}
			switch r.action {
			case cnpv1beta1.ClusterNetworkPolicyRuleActionAccept:
				return true, true
			case cnpv1beta1.ClusterNetworkPolicyRuleActionDeny:
				return false, true
			default: // Pass
				return false, false
			}
		}
	}
	return false, false
}

func (w World) subject(p *cnpv1beta1.ClusterNetworkPolicy, pod Pod) bool {
	s := p.Spec.Subject
	switch {
	case s.Namespaces != nil:
		return matches(s.Namespaces, w.Namespaces[pod.Namespace])
	case s.Pods != nil:
		return matches(&s.Pods.NamespaceSelector, w.Namespaces[pod.Namespace]) && matches(&s.Pods.PodSelector, pod.Labels)
	}
	return false
}

type clusterRule struct {
	action    cnpv1beta1.ClusterNetworkPolicyRuleAction
	peers     []cnpv1beta1.ClusterNetworkPolicyEgressPeer // ingress peers too: the same fields, fewer
	protocols []cnpv1beta1.ClusterNetworkPolicyProtocol
}

func clusterRules(p *cnpv1beta1.ClusterNetworkPolicy, ingress bool) []clusterRule {
	var out []clusterRule
	if ingress {
		for _, r := range p.Spec.Ingress {
			var peers []cnpv1beta1.ClusterNetworkPolicyEgressPeer
			for _, f := range r.From {
				peers = append(peers, cnpv1beta1.ClusterNetworkPolicyEgressPeer{Namespaces: f.Namespaces, Pods: f.Pods})
			}
			out = append(out, clusterRule{r.Action, peers, r.Protocols})
		}
		return out
	}
	for _, r := range p.Spec.Egress {
		out = append(out, clusterRule{r.Action, r.To, r.Protocols})
	}
	return out
}

// clusterPeer: any peer matches (a rule has at least one).
func (w World) clusterPeer(peers []cnpv1beta1.ClusterNetworkPolicyEgressPeer, pod Pod) bool {
	for _, peer := range peers {
		switch {
		case peer.Namespaces != nil:
			if matches(peer.Namespaces, w.Namespaces[pod.Namespace]) {
				return true
			}
		case peer.Pods != nil:
			if matches(&peer.Pods.NamespaceSelector, w.Namespaces[pod.Namespace]) && matches(&peer.Pods.PodSelector, pod.Labels) {
				return true
			}
		default:
			for _, c := range peer.Networks {
				if pfx, err := netip.ParsePrefix(string(c)); err == nil && pfx.Contains(pod.Addr) {
					return true
				}
			}
		}
	}
	return false
}

// clusterPorts: no protocols match every port; a named port is the
// server's container port of that name, whatever its protocol.
func clusterPorts(protocols []cnpv1beta1.ClusterNetworkPolicyProtocol, server Pod, proto corev1.Protocol, port int32) bool {
	if len(protocols) == 0 {
		return true
	}
	for _, p := range protocols {
		var dp *cnpv1beta1.Port
		switch {
		case p.TCP != nil && proto == corev1.ProtocolTCP:
			dp = p.TCP.DestinationPort
		case p.UDP != nil && proto == corev1.ProtocolUDP:
			dp = p.UDP.DestinationPort
		case p.SCTP != nil && proto == corev1.ProtocolSCTP:
			dp = p.SCTP.DestinationPort
		case p.DestinationNamedPort != "":
			for _, cp := range server.Ports {
				cpProto := cp.Protocol
				if cpProto == "" {
					cpProto = corev1.ProtocolTCP
				}
				if cp.Name == p.DestinationNamedPort && cpProto == proto && cp.ContainerPort == port {
					return true
				}
			}
			continue
		default:
			continue
		}
		switch {
		case dp == nil:
			return true
		case dp.Range != nil && port >= dp.Range.Start && port <= dp.Range.End:
			return true
		case dp.Range == nil && dp.Number == port:
			return true
		}
	}
	return false
}
