package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeNetwork reasons of the Ready condition, written by the node daemon.
const (
	// ReasonMasterNotFound: Ready=False, the master (underlay) device does not
	// exist on the node.
	ReasonMasterNotFound = "MasterNotFound"
	// ReasonMasterDown: Ready=False, the master device exists but is down.
	ReasonMasterDown = "MasterDown"
	// ReasonLocalAddressNotFound: Ready=False, no device on the node has the
	// VXLAN local address.
	ReasonLocalAddressNotFound = "LocalAddressNotFound"
	// ReasonMTUTooLarge: Ready=False, the requested MTU does not fit the
	// master device's MTU (minus the VXLAN overhead).
	ReasonMTUTooLarge = "MTUTooLarge"
	// ReasonKernelUnsupported: Ready=False, the node's kernel lacks the link
	// type (802.1Q or VXLAN).
	ReasonKernelUnsupported = "KernelUnsupported"
	// ReasonNodeAgentMissing: Ready=Unknown, no node daemon reported for the
	// node (written by the controller).
	ReasonNodeAgentMissing = "NodeAgentMissing"
)

// NodeNetwork is the per-node instance of a ClusterNetwork: one exists for
// each (ClusterNetwork, node) pair the ClusterNetwork selects. netclass-controller
// creates it (owned by the ClusterNetwork) with the options in effect on the
// node; the netclass-dra daemon on that node writes its status, saying
// whether the node can carry the network.
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=nn;nnet,categories=netclass
// +kubebuilder:selectablefield:JSONPath=`.spec.nodeName`
// +kubebuilder:selectablefield:JSONPath=`.spec.clusterNetworkName`
// +kubebuilder:printcolumn:name="Cluster Network",type=string,JSONPath=`.spec.clusterNetworkName`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.nodeName`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NodeNetwork struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the NodeNetwork.
	// +required
	Spec NodeNetworkSpec `json:"spec"`

	// status is the observed state, written by the node daemon.
	// +optional
	Status NodeNetworkStatus `json:"status,omitempty"`
}

// NodeNetworkSpec names the ClusterNetwork and the node, and carries the
// options in effect on that node.
type NodeNetworkSpec struct {
	// description is free text for humans.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Description string `json:"description,omitempty"`

	// clusterNetworkName is the name of the ClusterNetwork. It cannot be changed.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="clusterNetworkName is immutable"
	// +required
	ClusterNetworkName string `json:"clusterNetworkName"`

	// nodeName is the name of the node. It cannot be changed.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="nodeName is immutable"
	// +required
	NodeName string `json:"nodeName"`

	// options are the plugin options in effect on this node: the
	// ClusterNetwork's defaultOptions unless the controller resolved
	// node-specific values (such as the VXLAN local address).
	// +optional
	Options Options `json:"options,omitempty"`
}

// NodeNetworkStatus is the node daemon's view of the network on its node.
type NodeNetworkStatus struct {
	// observedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// master is the device the node daemon resolved as master (underlay):
	// the configured one, or the default-route device when none is configured.
	// +optional
	Master InterfaceName `json:"master,omitempty"`

	// localAddress is the underlay address VXLAN packets leave from on this
	// node; the controller uses it to fill other nodes' remotes.
	// +optional
	LocalAddress IPAddress `json:"localAddress,omitempty"`

	// devices are the node devices the node daemon keeps for the Networks of
	// this ClusterNetwork on the node (a VNI's VXLAN device and bridge, a
	// VLAN's sub-interface of master and bridge),
	// created when the network can be used here and removed when it is gone
	// and no pod uses them.
	// +listType=set
	// +kubebuilder:validation:MaxItems=512
	// +kubebuilder:validation:items:MaxLength=15
	// +optional
	Devices []string `json:"devices,omitempty"`

	// nodeIndex is this node's index (the Node annotation
	// netclass.dev/node-index, assigned by netclass-controller): it picks the
	// node's block of every host-local range of a network spanning nodes, so
	// two nodes never hand out the same address.
	// +kubebuilder:validation:Minimum=0
	// +optional
	NodeIndex *int32 `json:"nodeIndex,omitempty"`

	// mtu is the MTU pod interfaces of this network get on this node.
	// +kubebuilder:validation:Minimum=68
	// +kubebuilder:validation:Maximum=65535
	// +optional
	MTU *int32 `json:"mtu,omitempty"`

	// conditions describe whether the node can carry the network. Known
	// type: "Ready".
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// NodeNetworkList is a list of NodeNetwork objects.
//
// +kubebuilder:object:root=true
type NodeNetworkList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []NodeNetwork `json:"items"`
}
