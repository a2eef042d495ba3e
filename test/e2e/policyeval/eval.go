// Package policyeval is the NetworkPolicy truth table's oracle: whether
// networking.k8s.io/v1 lets one connection between two pods through on a
// netclass network, computed from the API objects alone. It is written
// apart from shim/netpolicy (and shares none of its code) so that the two
// can disagree: the e2e test probes the kernel and compares with it.
//
// It follows the APIs' documentation: a policy labelled for netclass
// selects pods of its namespace (and, with the scoping annotation, only on
// the networks it names); a pod selected in a direction allows only what
// one of those policies' rules allows in it; a connection passes when the
// client's egress and the server's ingress both allow it. The
// ClusterNetworkPolicies labelled for netclass come around them
// (cluster.go).
package policyeval

import (
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/netclass-dev/netclass/api/contract"
)

// Pod is a pod with its address on the network.
type Pod struct {
	Namespace, Name string
	Labels          map[string]string
	Ports           []corev1.ContainerPort
	Addr            netip.Addr
}

// World is what the verdicts depend on.
type World struct {
	Policies []*networkingv1.NetworkPolicy
	// Cluster are the ClusterNetworkPolicies (cluster.go).
	Cluster []*cnpv1beta1.ClusterNetworkPolicy
	// Namespaces are the namespaces' labels.
	Namespaces map[string]map[string]string
	// Network is how the scoping annotation names the network: "name" for
	// a PodNetwork, "namespace/name" for a Network.
	Network string
}

// Allowed reports whether a connection from src to dst's port passes.
func (w World) Allowed(src, dst Pod, proto corev1.Protocol, port int32) bool {
	return w.direction(src, dst, proto, port, false) && w.direction(dst, src, proto, port, true)
}

// Ingress reports whether dst's own policies let a connection from src
// to its port in (src's egress aside).
func (w World) Ingress(dst, src Pod, proto corev1.Protocol, port int32) bool {
	return w.direction(dst, src, proto, port, true)
}

// Egress reports whether src's own policies let a connection to dst's
// port out (dst's ingress aside).
func (w World) Egress(src, dst Pod, proto corev1.Protocol, port int32) bool {
	return w.direction(src, dst, proto, port, false)
}

// Selecting names, in order, the policies that isolate the pod in a
// direction: what applies to its attachment on the network.
func (w World) Selecting(pod Pod) []string {
	var out []string
	for _, p := range w.Policies {
		if w.applies(p, pod, true) || w.applies(p, pod, false) {
			out = append(out, p.Name)
		}
	}
	slices.Sort(out)
	return out
}

// direction decides for the subject pod: its ingress from peer, or its
// egress to peer. For ingress the subject is the server, for egress the
// peer is. The Admin tier decides first, unless it passes; then the
// namespaced policies, when one isolates the subject; then the Baseline
// tier; what nothing decided passes.
func (w World) direction(subject, peer Pod, proto corev1.Protocol, port int32, ingress bool) bool {
	if verdict, decided := w.tier(cnpv1beta1.AdminTier, subject, peer, proto, port, ingress); decided {
		return verdict
	}
	if isolated, allowed := w.namespaced(subject, peer, proto, port, ingress); isolated {
		return allowed
	}
	if verdict, decided := w.tier(cnpv1beta1.BaselineTier, subject, peer, proto, port, ingress); decided {
		return verdict
	}
	return true
}

// namespaced is the NetworkPolicies' say: whether one isolates the
// subject in the direction, and whether one of those allows the peer.
func (w World) namespaced(subject, peer Pod, proto corev1.Protocol, port int32, ingress bool) (isolated, allowed bool) {
	for _, p := range w.Policies {
		if !w.applies(p, subject, ingress) {
			continue
		}
		isolated = true
		server := peer
		if ingress {
			server = subject
		}
		for _, r := range rules(p, ingress) {
			if w.peerMatches(p, r.peers, peer) && portMatches(r.ports, server, proto, port) {
				return true, true
			}
		}
	}
	return isolated, false
}

// applies reports whether the policy isolates the pod in the direction.
func (w World) applies(p *networkingv1.NetworkPolicy, pod Pod, ingress bool) bool {
	if p.Labels[contract.PolicyControllerLabel] != contract.PolicyController || p.Namespace != pod.Namespace {
		return false
	}
	if list, ok := p.Annotations[contract.AnnotationPolicyNetworks]; ok {
		names := strings.Split(list, ",")
		for i := range names {
			names[i] = strings.TrimSpace(names[i])
		}
		if !slices.Contains(names, w.Network) {
			return false
		}
	}
	if !matches(&p.Spec.PodSelector, pod.Labels) {
		return false
	}
	types := p.Spec.PolicyTypes
	if len(types) == 0 { // the API's default
		types = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		if len(p.Spec.Egress) > 0 {
			types = append(types, networkingv1.PolicyTypeEgress)
		}
	}
	want := networkingv1.PolicyTypeEgress
	if ingress {
		want = networkingv1.PolicyTypeIngress
	}
	return slices.Contains(types, want)
}

type rule struct {
	peers []networkingv1.NetworkPolicyPeer
	ports []networkingv1.NetworkPolicyPort
}

func rules(p *networkingv1.NetworkPolicy, ingress bool) []rule {
	var out []rule
	if ingress {
		for _, r := range p.Spec.Ingress {
			out = append(out, rule{r.From, r.Ports})
		}
		return out
	}
	for _, r := range p.Spec.Egress {
		out = append(out, rule{r.To, r.Ports})
	}
	return out
}

// peerMatches: no peers match everyone; otherwise any peer does.
func (w World) peerMatches(p *networkingv1.NetworkPolicy, peers []networkingv1.NetworkPolicyPeer, pod Pod) bool {
	if len(peers) == 0 {
		return true
	}
	for _, peer := range peers {
		switch {
		case peer.IPBlock != nil:
			if inBlock(peer.IPBlock, pod.Addr) {
				return true
			}
		case peer.NamespaceSelector == nil: // pods of the policy's namespace
			if pod.Namespace == p.Namespace && matches(peer.PodSelector, pod.Labels) {
				return true
			}
		default:
			if matches(peer.NamespaceSelector, w.Namespaces[pod.Namespace]) &&
				(peer.PodSelector == nil || matches(peer.PodSelector, pod.Labels)) {
				return true
			}
		}
	}
	return false
}

func inBlock(b *networkingv1.IPBlock, a netip.Addr) bool {
	cidr, err := netip.ParsePrefix(b.CIDR)
	if err != nil || !cidr.Contains(a) {
		return false
	}
	for _, e := range b.Except {
		if ex, err := netip.ParsePrefix(e); err == nil && ex.Contains(a) {
			return false
		}
	}
	return true
}

// portMatches: no ports match every port; a named port is the server's
// container port of that name and protocol.
func portMatches(ports []networkingv1.NetworkPolicyPort, server Pod, proto corev1.Protocol, port int32) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		want := corev1.ProtocolTCP
		if p.Protocol != nil {
			want = *p.Protocol
		}
		if want != proto {
			continue
		}
		if p.Port == nil {
			return true
		}
		if p.Port.StrVal != "" {
			for _, cp := range server.Ports {
				cpProto := cp.Protocol
				if cpProto == "" {
					cpProto = corev1.ProtocolTCP
				}
				if cp.Name == p.Port.StrVal && cpProto == proto && cp.ContainerPort == port {
					return true
				}
			}
			continue
		}
		end := p.Port.IntVal
		if p.EndPort != nil {
			end = *p.EndPort
		}
		if port >= p.Port.IntVal && port <= end {
			return true
		}
	}
	return false
}

func matches(sel *metav1.LabelSelector, set map[string]string) bool {
	if sel == nil {
		return false
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && s.Matches(labels.Set(set))
}
