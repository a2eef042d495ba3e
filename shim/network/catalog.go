package network

import (
	"net"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"

	"k8s.io/apimachinery/pkg/labels"

	mnlisters "github.com/netclass-dev/netclass/api/generated/listers/multinetwork/v1"
	nclisters "github.com/netclass-dev/netclass/api/generated/listers/netclass/v1alpha1"
	mnv1 "github.com/netclass-dev/netclass/api/multinetwork/v1"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/netspec"
)

// Listers reads the objects from informer caches. NodeNetworks must come
// from an informer restricted to this node (field selector spec.nodeName).
type Listers struct {
	Classes     mnlisters.NetworkClassLister
	PodNets     mnlisters.PodNetworkLister
	Nets        nclisters.NetworkLister
	ClusterNets nclisters.ClusterNetworkLister
	NodeNets    nclisters.NodeNetworkLister
	AllNodes    corelisters.NodeLister
	Namespaces  corelisters.NamespaceLister
}

// NamespaceLabels answers namespaces' labels from the cache.
func (l Listers) NamespaceLabels() netspec.NamespaceLabels { return netspec.NamespacesOf(l.Namespaces) }

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

// Nodes lists every Node.
func (l Listers) Nodes() ([]*corev1.Node, error) { return l.AllNodes.List(labels.Everything()) }

// LocalHost answers from this machine's network namespace.
type LocalHost struct{}

// HasLink reports whether a device of that name exists here.
func (LocalHost) HasLink(name string) bool {
	_, err := net.InterfaceByName(name)
	return err == nil
}

// LinkWithAddress names the device that holds the address.
func (LocalHost) LinkWithAddress(a netip.Addr) (string, bool) {
	ifs, err := net.Interfaces()
	if err != nil {
		return "", false
	}
	for i := range ifs {
		addrs, _ := ifs[i].Addrs()
		for _, have := range addrs {
			if n, ok := have.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap() == a.Unmap() {
					return ifs[i].Name, true
				}
			}
		}
	}
	return "", false
}
