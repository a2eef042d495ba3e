// Package segment reads, from the controllers' informer caches, the network
// objects that may hold a layer-2 segment (conf/netspec decides the owner).
// Tenants may create Networks by the ten thousand, so the Networks of one
// segment are found through an index of the segment IDs they name, never by
// listing them all: deciding a network's owner, or which networks an edit
// concerns, costs the objects of its segment only.
package segment

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	mnlisters "github.com/netclass-dev/netclass/api/generated/listers/multinetwork/v1"
	nclisters "github.com/netclass-dev/netclass/api/generated/listers/netclass/v1alpha1"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/netspec"
)

// ByID is the Network informer's index of the segment IDs a Network names
// (its VNI, its VLAN ID), whatever its ClusterNetwork makes of them.
const ByID = "segmentID"

// AddIndex adds ByID to the Network informer, unless another controller
// sharing the informer did.
func AddIndex(inf cache.SharedIndexInformer) error {
	if _, ok := inf.GetIndexer().GetIndexers()[ByID]; ok {
		return nil
	}
	if err := inf.AddIndexers(cache.Indexers{ByID: IndexID}); err != nil {
		return fmt.Errorf("add network index %s: %w", ByID, err)
	}
	return nil
}

// IndexID is ByID's index function.
func IndexID(obj any) ([]string, error) {
	n, ok := obj.(*ncv1.Network)
	if !ok {
		return nil, nil
	}
	var keys []string
	if n.Spec.VNI != nil {
		keys = append(keys, idKey(netspec.SegmentVXLAN, int(*n.Spec.VNI)))
	}
	if n.Spec.VLANID != nil {
		keys = append(keys, idKey(netspec.SegmentVLAN, int(*n.Spec.VLANID)))
	}
	return keys, nil
}

// Named lists the segments n's spec names, whatever its ClusterNetwork
// (missing, or changed since) makes of them: its VNI, and its VLAN ID on
// any master. The objects on these are a superset of those n's segment
// overlaps, so an event of n queues them all: a Network whose
// ClusterNetwork went no longer has a segment, but the Networks it held
// one against must still learn they may have it.
func Named(n *ncv1.Network) []netspec.Segment {
	var out []netspec.Segment
	if n.Spec.VNI != nil {
		out = append(out, netspec.Segment{Kind: netspec.SegmentVXLAN, ID: int(*n.Spec.VNI)})
	}
	if n.Spec.VLANID != nil {
		out = append(out, netspec.Segment{Kind: netspec.SegmentVLAN, ID: int(*n.Spec.VLANID)})
	}
	return out
}

// NamespaceHandler maps a namespace's event (obj, a *corev1.Namespace) to
// the keys keys returns for each of its Networks in the Network informer's
// indexer: a namespace's labels decide whether ClusterNetworks let its
// Networks in, and so whether they hold their segments.
func NamespaceHandler(networks cache.Indexer, keys func(obj any) []string) func(obj any) []string {
	return func(obj any) []string {
		ns, ok := obj.(*corev1.Namespace)
		if !ok {
			return nil
		}
		nets, err := networks.ByIndex(cache.NamespaceIndex, ns.Name)
		if err != nil {
			return nil
		}
		var out []string
		for _, n := range nets {
			out = append(out, keys(n)...)
		}
		return out
	}
}

func idKey(kind string, id int) string { return kind + "/" + strconv.Itoa(id) }

// Listers are the caches segment holders come from; Networks is the Network
// informer's indexer, with ByID (AddIndex). Namespaces' labels decide whether
// a ClusterNetwork lets a Network in (netspec.NotPermitted).
type Listers struct {
	PodNetworks     mnlisters.PodNetworkLister
	Networks        cache.Indexer
	ClusterNetworks nclisters.ClusterNetworkLister
	Namespaces      netspec.NamespaceGetter
}

// NamespaceLabels answers namespaces' labels from the cache.
func (l Listers) NamespaceLabels() netspec.NamespaceLabels { return netspec.NamespacesOf(l.Namespaces) }

// Overlapping lists the objects whose segment overlaps seg: netspec.Owner
// over them answers as over every holder. PodNetworks, cluster-scoped (an
// admin's), are all read; Networks only if they name seg's ID.
func (l Listers) Overlapping(seg netspec.Segment) ([]netspec.Holder, error) {
	if seg.Kind == "" {
		return nil, nil
	}
	pns, err := l.PodNetworks.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list podnetworks: %w", err)
	}
	var nets []*ncv1.Network
	if seg.Kind == netspec.SegmentVXLAN || seg.Kind == netspec.SegmentVLAN {
		objs, err := l.Networks.ByIndex(ByID, idKey(seg.Kind, seg.ID))
		if err != nil {
			return nil, fmt.Errorf("networks of %s: %w", seg, err)
		}
		for _, o := range objs {
			if n, ok := o.(*ncv1.Network); ok {
				nets = append(nets, n)
			}
		}
	}
	cns, err := l.ClusterNetworks.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list clusternetworks: %w", err)
	}
	var out []netspec.Holder
	for _, h := range netspec.Holders(pns, nets, cns, l.NamespaceLabels()) {
		if h.Segment.Overlaps(seg) {
			out = append(out, h)
		}
	}
	return out, nil
}
