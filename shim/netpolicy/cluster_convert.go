package netpolicy

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"
)

// ingressPeers is a ClusterNetworkPolicy rule's sources as NetworkPolicy
// peers: namespaces (every pod of the namespaces selected), pods (those
// selected in the namespaces selected). A peer with neither (a CRD newer
// than netclass) is in bad.
func ingressPeers(in []cnpv1beta1.ClusterNetworkPolicyIngressPeer) (out []networkingv1.NetworkPolicyPeer, bad []string) {
	for i, p := range in {
		if peer, ok := podPeer(p.Namespaces, p.Pods); ok {
			out = append(out, peer)
			continue
		}
		bad = append(bad, fmt.Sprintf("from[%d]: no field netclass knows", i))
	}
	return out, bad
}

// egressPeers is a rule's destinations as NetworkPolicy peers: namespaces
// and pods as for ingress, networks as ipBlocks. Nodes (their addresses
// are not on netclass networks) and domainNames (netclass resolves no
// names) are in bad, as a peer with no field it knows.
func egressPeers(in []cnpv1beta1.ClusterNetworkPolicyEgressPeer) (out []networkingv1.NetworkPolicyPeer, bad []string) {
	for i, p := range in {
		if peer, ok := podPeer(p.Namespaces, p.Pods); ok {
			out = append(out, peer)
			continue
		}
		switch {
		case len(p.Networks) > 0:
			for _, c := range p.Networks {
				out = append(out, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: string(c)}})
			}
		case p.Nodes != nil:
			bad = append(bad, fmt.Sprintf("to[%d].nodes", i))
		case len(p.DomainNames) > 0:
			bad = append(bad, fmt.Sprintf("to[%d].domainNames", i))
		default:
			bad = append(bad, fmt.Sprintf("to[%d]: no field netclass knows", i))
		}
	}
	return out, bad
}

func podPeer(namespaces *metav1.LabelSelector, pods *cnpv1beta1.NamespacedPod) (networkingv1.NetworkPolicyPeer, bool) {
	switch {
	case namespaces != nil:
		return networkingv1.NetworkPolicyPeer{NamespaceSelector: namespaces.DeepCopy()}, true
	case pods != nil:
		c := pods.DeepCopy()
		return networkingv1.NetworkPolicyPeer{NamespaceSelector: &c.NamespaceSelector, PodSelector: &c.PodSelector}, true
	}
	return networkingv1.NetworkPolicyPeer{}, false
}

// clusterPorts is a rule's protocols as NetworkPolicy ports: a protocol
// with no destinationPort is all its ports; a range is port and endPort;
// destinationNamedPort is the port of that name of whichever protocol
// (one named port per protocol, each resolving against the container
// ports of its protocol). No protocols: every port of every protocol.
func clusterPorts(in []cnpv1beta1.ClusterNetworkPolicyProtocol) ([]networkingv1.NetworkPolicyPort, error) {
	var out []networkingv1.NetworkPolicyPort
	var errs []error
	for i, p := range in {
		switch {
		case p.TCP != nil:
			out = append(out, clusterPort(corev1.ProtocolTCP, p.TCP.DestinationPort))
		case p.UDP != nil:
			out = append(out, clusterPort(corev1.ProtocolUDP, p.UDP.DestinationPort))
		case p.SCTP != nil:
			out = append(out, clusterPort(corev1.ProtocolSCTP, p.SCTP.DestinationPort))
		case p.DestinationNamedPort != "":
			for _, proto := range []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP} {
				name := intstr.FromString(p.DestinationNamedPort)
				out = append(out, networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &name})
			}
		default:
			errs = append(errs, fmt.Errorf("protocols[%d]: no field netclass knows", i))
		}
	}
	return out, errors.Join(errs...)
}

func clusterPort(proto corev1.Protocol, p *cnpv1beta1.Port) networkingv1.NetworkPolicyPort {
	out := networkingv1.NetworkPolicyPort{Protocol: &proto}
	switch {
	case p == nil:
	case p.Range != nil:
		start, end := intstr.FromInt32(p.Range.Start), p.Range.End
		out.Port, out.EndPort = &start, &end
	default:
		n := intstr.FromInt32(p.Number)
		out.Port = &n
	}
	return out
}
