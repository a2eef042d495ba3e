package network

import (
	"cmp"
	"fmt"
	"slices"

	mnv1 "github.com/netclass-dev/netclass/api/multinetwork/v1"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
)

// Objects reads the objects netclass publishes from (informer caches in the daemon).
type Objects interface {
	NetworkClasses() ([]*mnv1.NetworkClass, error)
	PodNetworks() ([]*mnv1.PodNetwork, error)
	Networks() ([]*ncv1.Network, error)
	// NodeNetworks returns the NodeNetworks of this node only.
	NodeNetworks() ([]*ncv1.NodeNetwork, error)
}

// Host answers what the node has.
type Host interface {
	// HasLink reports whether the node has a network device of that name.
	HasLink(name string) bool
}

// Collect returns every network offered on this node, sorted by class,
// namespace and name, and the objects that are not offered with the reason.
// A network object is described once per NetworkClass naming its kind.
func Collect(objs Objects, host Host) ([]Network, []Skip, error) {
	classes, err := objs.NetworkClasses()
	if err != nil {
		return nil, nil, fmt.Errorf("list NetworkClasses: %w", err)
	}
	var nets []Network
	var skips []Skip
	add := func(n Network, s *Skip) {
		if s != nil {
			skips = append(skips, *s)
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
			if err := collectPodNetworks(objs, c.Name, add); err != nil {
				return nil, nil, err
			}
		case gvk.Group == NetworkGVK.Group && gvk.Version == NetworkGVK.Version && gvk.Kind == NetworkGVK.Kind:
			if err := collectNetworks(objs, c.Name, add); err != nil {
				return nil, nil, err
			}
		}
	}
	slices.SortFunc(nets, func(a, b Network) int {
		return cmp.Or(cmp.Compare(a.Ref.Class, b.Ref.Class), cmp.Compare(a.Ref.Kind, b.Ref.Kind),
			cmp.Compare(a.Ref.Namespace, b.Ref.Namespace), cmp.Compare(a.Ref.Name, b.Ref.Name))
	})
	return nets, skips, nil
}

func collectPodNetworks(objs Objects, class string, add func(Network, *Skip)) error {
	pns, err := objs.PodNetworks()
	if err != nil {
		return fmt.Errorf("list PodNetworks: %w", err)
	}
	for _, pn := range pns {
		if pn.Spec.Provider != "" && pn.Spec.Provider != ncv1.Provider {
			continue // another implementation's network: not ours to mention
		}
		add(FromPodNetwork(class, pn))
	}
	return nil
}

func collectNetworks(objs Objects, class string, add func(Network, *Skip)) error {
	ns, err := objs.Networks()
	if err != nil {
		return fmt.Errorf("list Networks: %w", err)
	}
	nodeNets, err := objs.NodeNetworks()
	if err != nil {
		return fmt.Errorf("list NodeNetworks: %w", err)
	}
	byCluster := make(map[string]*ncv1.NodeNetwork, len(nodeNets))
	for _, nn := range nodeNets {
		byCluster[nn.Spec.ClusterNetworkName] = nn
	}
	for _, n := range ns {
		add(FromNetwork(class, n, byCluster[n.Spec.ClusterNetworkName]))
	}
	return nil
}
