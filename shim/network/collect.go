package network

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/netclass-dev/netclass/api/contract"
	mnv1 "github.com/netclass-dev/netclass/api/multinetwork/v1"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/netspec"
)

// Objects reads the objects netclass publishes from (informer caches in the daemon).
type Objects interface {
	NetworkClasses() ([]*mnv1.NetworkClass, error)
	PodNetworks() ([]*mnv1.PodNetwork, error)
	Networks() ([]*ncv1.Network, error)
	ClusterNetworks() ([]*ncv1.ClusterNetwork, error)
	// NodeNetworks returns the NodeNetworks of this node only.
	NodeNetworks() ([]*ncv1.NodeNetwork, error)
	// Nodes returns every Node: this one (its index and InternalIP) and the
	// others (their InternalIPs are PodNetworks' automatic VXLAN remotes).
	Nodes() ([]*corev1.Node, error)
	// NamespaceLabels answers namespaces' labels (ClusterNetworks'
	// namespaceSelectors read them).
	NamespaceLabels() netspec.NamespaceLabels
}

// Host answers what the node has.
type Host interface {
	// HasLink reports whether the node has a network device of that name.
	HasLink(name string) bool
	// LinkWithAddress names the device holding an address.
	LinkWithAddress(a netip.Addr) (string, bool)
}

// Collect returns every network offered on this node, sorted by class,
// namespace and name, and the objects that are not offered with the reason.
// A network object is described once per NetworkClass naming its kind. The
// node decides from the objects' specs alone what it offers and runs: a
// Network's config is rendered here (conf/netspec), and an object whose
// segment an older one holds is not offered, whatever any status says (but
// the SegmentHeld condition that breaks the tie of two objects created in
// the same second: netspec.Owner).
func Collect(objs Objects, host Host, self string) ([]Network, []Skip, error) {
	classes, err := objs.NetworkClasses()
	if err != nil {
		return nil, nil, fmt.Errorf("list NetworkClasses: %w", err)
	}
	in, err := read(objs, host, self)
	if err != nil {
		return nil, nil, err
	}
	var nets []Network
	var skips []Skip
	add := func(n Network, s *Skip) {
		if s != nil {
			skips = append(skips, *s)
			return
		}
		if owner := in.owners.Owner(n.holder); owner != nil {
			skips = append(skips, Skip{Ref: n.Ref, Reason: ReasonSegmentConflict, Message: netspec.ConflictMessage(n.holder, *owner)})
			return
		}
		if n.Master != "" && !host.HasLink(n.Master) {
			skips = append(skips, Skip{Ref: n.Ref, Reason: ReasonMasterNotFound,
				Message: fmt.Sprintf("the node has no device %q", n.Master)})
			return
		}
		nets = append(nets, n)
	}
	for _, c := range classes {
		gvk := c.Spec
		switch {
		case gvk.Group == PodNetworkGVK.Group && gvk.Version == PodNetworkGVK.Version && gvk.Kind == PodNetworkGVK.Kind:
			collectPodNetworks(in, c.Name, add)
		case gvk.Group == NetworkGVK.Group && gvk.Version == NetworkGVK.Version && gvk.Kind == NetworkGVK.Kind:
			collectNetworks(in, c.Name, add)
		}
	}
	slices.SortFunc(nets, func(a, b Network) int {
		return cmp.Or(cmp.Compare(a.Ref.Class, b.Ref.Class), cmp.Compare(a.Ref.Kind, b.Ref.Kind),
			cmp.Compare(a.Ref.Namespace, b.Ref.Namespace), cmp.Compare(a.Ref.Name, b.Ref.Name))
	})
	return nets, skips, nil
}

// objects is one consistent read of the caches.
type objects struct {
	podNets  []*mnv1.PodNetwork
	nets     []*ncv1.Network
	clusters map[string]*ncv1.ClusterNetwork
	nodeNets map[string]*ncv1.NodeNetwork // by ClusterNetwork
	owners   *netspec.OwnerIndex          // who holds each segment
	// namespaces answers the labels of the Networks' namespaces.
	namespaces netspec.NamespaceLabels
	node       *netspec.Node // what PodNetworks are rendered with on this node
}

func read(objs Objects, host Host, self string) (objects, error) {
	var in objects
	var err error
	if in.podNets, err = objs.PodNetworks(); err != nil {
		return in, fmt.Errorf("list PodNetworks: %w", err)
	}
	if in.nets, err = objs.Networks(); err != nil {
		return in, fmt.Errorf("list Networks: %w", err)
	}
	cns, err := objs.ClusterNetworks()
	if err != nil {
		return in, fmt.Errorf("list ClusterNetworks: %w", err)
	}
	nodeNets, err := objs.NodeNetworks()
	if err != nil {
		return in, fmt.Errorf("list NodeNetworks: %w", err)
	}
	in.clusters = make(map[string]*ncv1.ClusterNetwork, len(cns))
	for _, cn := range cns {
		in.clusters[cn.Name] = cn
	}
	in.nodeNets = make(map[string]*ncv1.NodeNetwork, len(nodeNets))
	for _, nn := range nodeNets {
		in.nodeNets[nn.Spec.ClusterNetworkName] = nn
	}
	in.namespaces = objs.NamespaceLabels()
	in.owners = netspec.NewOwnerIndex(netspec.Holders(in.podNets, in.nets, cns, in.namespaces))
	nodes, err := objs.Nodes()
	if err != nil {
		return in, fmt.Errorf("list Nodes: %w", err)
	}
	in.node = podNetworkNode(self, nodes, host)
	return in, nil
}

func collectPodNetworks(in objects, class string, add func(Network, *Skip)) {
	for _, pn := range in.podNets {
		if pn.Spec.Provider != "" && pn.Spec.Provider != contract.Provider {
			continue // another implementation's network: not ours to mention
		}
		add(FromPodNetwork(class, pn, in.node))
	}
}

func collectNetworks(in objects, class string, add func(Network, *Skip)) {
	for _, n := range in.nets {
		add(FromNetwork(class, n, in.clusters[n.Spec.ClusterNetworkName], in.nodeNets[n.Spec.ClusterNetworkName], in.node.Index, in.namespaces))
	}
}
