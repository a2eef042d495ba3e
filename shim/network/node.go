package network

import (
	"net/netip"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/netspec"
)

// NodeIndex reads the node index netclass-controller assigned to the node
// (ncv1.AnnotationNodeIndex); -1 while there is none.
func NodeIndex(node *corev1.Node) int {
	if node == nil {
		return -1
	}
	i, err := strconv.Atoi(node.Annotations[ncv1.AnnotationNodeIndex])
	if err != nil || i < 0 {
		return -1
	}
	return i
}

// InternalIP is the node's first InternalIP address (invalid when it has none).
func InternalIP(node *corev1.Node) netip.Addr {
	if node == nil {
		return netip.Addr{}
	}
	for _, a := range node.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		if ip, err := netip.ParseAddr(a.Address); err == nil {
			return ip.Unmap()
		}
	}
	return netip.Addr{}
}

// podNetworkNode is what this node knows for rendering PodNetworks: its
// underlay (the device that carries its InternalIP, and that address), the
// other nodes' InternalIPs (automatic VXLAN remotes) and its index.
func podNetworkNode(self string, nodes []*corev1.Node, host Host) *netspec.Node {
	n := &netspec.Node{Index: -1}
	for _, node := range nodes {
		ip := InternalIP(node)
		switch {
		case node.Name == self:
			n.Index = NodeIndex(node)
			n.Local = ip
			if ip.IsValid() {
				n.Master, _ = host.LinkWithAddress(ip)
			}
		case node.DeletionTimestamp == nil && ip.IsValid():
			n.Peers = append(n.Peers, ip)
		}
	}
	return n
}

// nodeFactsOf is what this node resolved for a ClusterNetwork, as its
// NodeNetwork's status says (netclass-dra wrote it from the same resolution).
func nodeFactsOf(nn *ncv1.NodeNetwork, index int) *netspec.Node {
	n := &netspec.Node{Master: string(nn.Status.Master), Index: index}
	if a, err := netip.ParseAddr(string(nn.Status.LocalAddress)); err == nil {
		n.Local = a
	}
	return n
}
