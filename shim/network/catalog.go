package network

import (
	"net"

	"k8s.io/apimachinery/pkg/labels"

	mnlisters "github.com/netclass-dev/netclass/api/generated/listers/multinetwork/v1"
	nclisters "github.com/netclass-dev/netclass/api/generated/listers/netclass/v1alpha1"
	mnv1 "github.com/netclass-dev/netclass/api/multinetwork/v1"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
)

// Listers reads the objects from informer caches. NodeNetworks must come
// from an informer restricted to this node (field selector spec.nodeName).
type Listers struct {
	Classes     mnlisters.NetworkClassLister
	PodNets     mnlisters.PodNetworkLister
	Nets        nclisters.NetworkLister
	ClusterNets nclisters.ClusterNetworkLister
	NodeNets    nclisters.NodeNetworkLister
}

// NetworkClasses lists every NetworkClass.
func (l Listers) NetworkClasses() ([]*mnv1.NetworkClass, error) {
	return l.Classes.List(labels.Everything())
}

// PodNetworks lists every PodNetwork.
func (l Listers) PodNetworks() ([]*mnv1.PodNetwork, error) {
	return l.PodNets.List(labels.Everything())
}

// Networks lists every Network of every namespace.
func (l Listers) Networks() ([]*ncv1.Network, error) { return l.Nets.List(labels.Everything()) }

// ClusterNetworks lists every ClusterNetwork.
func (l Listers) ClusterNetworks() ([]*ncv1.ClusterNetwork, error) {
	return l.ClusterNets.List(labels.Everything())
}

// NodeNetworks lists this node's NodeNetworks.
func (l Listers) NodeNetworks() ([]*ncv1.NodeNetwork, error) {
	return l.NodeNets.List(labels.Everything())
}

// LocalHost answers from this machine's network namespace.
type LocalHost struct{}

// HasLink reports whether a device of that name exists here.
func (LocalHost) HasLink(name string) bool {
	_, err := net.InterfaceByName(name)
	return err == nil
}
