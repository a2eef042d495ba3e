// Package segment reads, from the controllers' informer caches, every network
// object that may hold a layer-2 segment (conf/netspec decides the owner).
package segment

import (
	"fmt"

	"k8s.io/apimachinery/pkg/labels"

	mnlisters "github.com/netclass-dev/netclass/api/generated/listers/multinetwork/v1"
	nclisters "github.com/netclass-dev/netclass/api/generated/listers/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/netspec"
)

// Listers are the caches segment holders come from.
type Listers struct {
	PodNetworks     mnlisters.PodNetworkLister
	Networks        nclisters.NetworkLister
	ClusterNetworks nclisters.ClusterNetworkLister
}

// Holders lists every object that may hold a segment.
func (l Listers) Holders() ([]netspec.Holder, error) {
	pns, err := l.PodNetworks.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list podnetworks: %w", err)
	}
	nets, err := l.Networks.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list networks: %w", err)
	}
	cns, err := l.ClusterNetworks.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list clusternetworks: %w", err)
	}
	return netspec.Holders(pns, nets, cns), nil
}
