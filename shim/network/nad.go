package network

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/shim/attachment"
)

// MultusNADGVK is the kind of Multus's NetworkAttachmentDefinitions: the
// network of an attachment Multus made from one (the node agent's
// "foreign" attachments: netclass plugins run by Multus, not by
// netclass-dra) is named by it.
var MultusNADGVK = schema.GroupVersionKind{Group: contract.NADGroup, Version: contract.NADVersion, Kind: contract.NADKind}

// FromNAD is the network of an attachment made from the
// NetworkAttachmentDefinition nad: what policy-for, a NetworkPolicy's
// scoping annotation and a NetworkQoS's NAD selectors name.
func FromNAD(nad types.NamespacedName) Network {
	return Network{Ref: attachment.NetworkRef{Group: MultusNADGVK.Group, Version: MultusNADGVK.Version,
		Kind: MultusNADGVK.Kind, Namespace: nad.Namespace, Name: nad.Name}}
}

// IsNAD reports whether n is a NetworkAttachmentDefinition's.
func (n Network) IsNAD() bool {
	return n.Ref.Kind == MultusNADGVK.Kind && n.Ref.Group == MultusNADGVK.Group
}

// BackingRef names the network object of a generated NAD's
// netclass.dev/network annotation: "<namespace>/<name>" a Network, "<name>"
// a PodNetwork.
func BackingRef(namespace, name string) attachment.NetworkRef {
	if namespace == "" {
		return attachment.NetworkRef{Group: PodNetworkGVK.Group, Version: PodNetworkGVK.Version, Kind: PodNetworkGVK.Kind, Name: name}
	}
	return attachment.NetworkRef{Group: NetworkGVK.Group, Version: NetworkGVK.Version, Kind: NetworkGVK.Kind, Namespace: namespace, Name: name}
}
