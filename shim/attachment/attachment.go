// Package attachment holds the vocabulary every part of netclass-dra shares:
// the driver's fixed names (DESIGN.md), a reference to a network object, and
// the opaque AttachmentConfig a claim or DeviceClass passes to the driver.
// Everything here is pure.
package attachment

import (
	"fmt"

	resourceapi "k8s.io/api/resource/v1"

	mnv1 "github.com/netclass-dev/netclass/api/multinetwork/v1"
)

// Fixed names of DESIGN.md.
const (
	// DriverName is the DRA driver name, the ResourceSlice driver and pool owner.
	DriverName = "netclass.dev"
	// FieldManager is the server-side apply field manager of every write.
	FieldManager = "netclass.dev"
	// CNIVersion is the CNI spec version of every rendered configuration.
	CNIVersion = "1.1.0"
)

// Device attributes netclass publishes besides the standard ones of
// api/multinetwork/v1 (resource.kubernetes.io/{podNetwork,podNetworkNamespace,networkClass}).
const (
	// AttributePodNetwork is seed 004's "<driver>/podNetwork" form.
	AttributePodNetwork resourceapi.QualifiedName = DriverName + "/podNetwork"
	// AttributeType is the main plugin type (netclass-bridge, netclass-vxlan, …).
	AttributeType resourceapi.QualifiedName = DriverName + "/type"
	// AttributeKind is the Kind of the network object (PodNetwork, Network).
	AttributeKind resourceapi.QualifiedName = DriverName + "/kind"
	// AttributeClusterNetwork names the ClusterNetwork of a Network.
	AttributeClusterNetwork resourceapi.QualifiedName = DriverName + "/clusterNetwork"
	// AttributeVNI is the VXLAN network identifier of a vxlan network.
	AttributeVNI resourceapi.QualifiedName = DriverName + "/vni"
	// AttributeVLANID is the 802.1Q VLAN ID of a vlan network.
	AttributeVLANID resourceapi.QualifiedName = DriverName + "/vlanId"
	// AttributeMaster is the node's underlay device the network uses.
	AttributeMaster resourceapi.QualifiedName = DriverName + "/master"

	// Standard attributes, re-exported so consumers need one import.
	AttributeStdPodNetwork          = mnv1.StandardDeviceAttributePodNetwork
	AttributeStdPodNetworkNamespace = mnv1.StandardDeviceAttributePodNetworkNamespace
	AttributeStdNetworkClass        = mnv1.StandardDeviceAttributeNetworkClass
)

// NetworkRef names one network object of one NetworkClass.
type NetworkRef struct {
	// Class is the NetworkClass the object belongs to.
	Class   string `json:"class"`
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
	// Namespace is empty for cluster-scoped kinds.
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// String names the object for messages: "PodNetwork blue", "Network tenant-a/red".
func (r NetworkRef) String() string {
	if r.Namespace == "" {
		return r.Kind + " " + r.Name
	}
	return fmt.Sprintf("%s %s/%s", r.Kind, r.Namespace, r.Name)
}

// CNIName is the CNI network name of the object: its name for cluster-scoped
// kinds (DESIGN.md), "<namespace>_<name>" for namespaced ones. "_" cannot occur
// in Kubernetes names, so the two never collide.
func (r NetworkRef) CNIName() string {
	if r.Namespace == "" {
		return r.Name
	}
	return r.Namespace + "_" + r.Name
}
