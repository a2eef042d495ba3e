package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Network reasons of the Ready condition, written by netclass-controller.
const (
	// ReasonClusterNetworkNotFound: Ready=False, the ClusterNetwork does not exist.
	ReasonClusterNetworkNotFound = "ClusterNetworkNotFound"
	// ReasonClusterNetworkNotReady: Ready=False, the ClusterNetwork has no
	// node that can carry it.
	ReasonClusterNetworkNotReady = "ClusterNetworkNotReady"
	// ReasonTypeMismatch: Ready=False, vlanId on a netclass-vxlan
	// ClusterNetwork or vni on a netclass-vlan one.
	ReasonTypeMismatch = "TypeMismatch"
	// ReasonSegmentConflict: Ready=False, an older network object (a Network
	// of any ClusterNetwork, or a PodNetwork) holds the same segment: the same
	// vni, the same vlanId on the same master, or the same bridge. PodNetworks
	// use this reason too.
	ReasonSegmentConflict = "SegmentConflict"
	// ReasonNameTooLong: Ready=False, the object's name or namespace is
	// longer than a device attribute holds (contract.MaxNetworkName), so no
	// node can offer it. PodNetworks use this reason too.
	ReasonNameTooLong = "NameTooLong"
	// ReasonNotAllowed: Ready=False, the ClusterNetwork does not let the
	// Network in: its spec.namespaceSelector does not select the Network's
	// namespace, or its spec.segmentIds leave out the Network's vlanId or vni.
	ReasonNotAllowed = "NotAllowed"
)

// The SegmentHeld condition of a Network or a netclass.dev PodNetwork with a
// segment, written by netclass-controller: True (reason SegmentHeld) while
// the object holds it, its message naming the segment; False (reason
// SegmentConflict) while another object does. Creation timestamps have
// one-second precision: of two objects created in the same second, the one
// whose condition says it held the segment first keeps it (conf/netspec),
// so a network in use never loses its segment to one created just after it.
const (
	ConditionSegmentHeld = "SegmentHeld"
	ReasonSegmentHeld    = "SegmentHeld"
)

// The InUse condition of a Network, written by netclass-controller: True
// (reason InUse) while a ResourceClaim of its namespace is allocated one of
// its devices, the message naming the claims; False (reason NotInUse)
// otherwise. netclass-controller holds the finalizer netclass.dev/in-use
// (contract.FinalizerInUse) on every Network and removes it on deletion only
// once InUse is False: until then the Network keeps its segment, which no
// other Network can take while pods are attached to it.
const (
	ConditionInUse = "InUse"
	ReasonInUse    = "InUse"
	ReasonNotInUse = "NotInUse"
)

// Network is a VLAN (vlanId) or VXLAN (vni) segment under a ClusterNetwork,
// usable by the pods of its namespace. netclass-controller renders it into a
// netclass-vlan or netclass-vxlan plugin config, published in its status.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=net;nets,categories=netclass
// +kubebuilder:selectablefield:JSONPath=`.spec.clusterNetworkName`
// +kubebuilder:printcolumn:name="Cluster Network",type=string,JSONPath=`.spec.clusterNetworkName`
// +kubebuilder:printcolumn:name="VLAN",type=integer,JSONPath=`.spec.vlanId`
// +kubebuilder:printcolumn:name="VNI",type=integer,JSONPath=`.spec.vni`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="InUse",type=string,JSONPath=`.status.conditions[?(@.type=="InUse")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Network struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the Network.
	// +required
	Spec NetworkSpec `json:"spec"`

	// status is the observed state, written by netclass-controller.
	// +optional
	Status NetworkStatus `json:"status,omitempty"`
}

// NetworkSpec is the desired state of a Network. Exactly one of vlanId and
// vni is set: vlanId under a netclass-vlan ClusterNetwork, vni under a
// netclass-vxlan one (the controller checks the match, Ready reason
// TypeMismatch). The ClusterNetwork and the segment cannot be changed.
//
// +kubebuilder:validation:XValidation:rule="has(self.vlanId) != has(self.vni)",message="exactly one of vlanId (netclass-vlan) and vni (netclass-vxlan) must be set"
// +kubebuilder:validation:XValidation:rule="has(self.vlanId) == has(oldSelf.vlanId) && has(self.vni) == has(oldSelf.vni)",message="vlanId and vni cannot be added or removed"
type NetworkSpec struct {
	// clusterNetworkName is the name of the ClusterNetwork this Network
	// belongs to. It cannot be changed.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="clusterNetworkName is immutable"
	// +required
	ClusterNetworkName string `json:"clusterNetworkName"`

	// vlanId is the 802.1Q VLAN ID, for a netclass-vlan ClusterNetwork. It
	// cannot be changed.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4094
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="vlanId is immutable"
	// +optional
	VLANID *int32 `json:"vlanId,omitempty"`

	// vni is the VXLAN network identifier, for a netclass-vxlan
	// ClusterNetwork. It cannot be changed.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16777215
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="vni is immutable"
	// +optional
	VNI *int32 `json:"vni,omitempty"`

	// ipam is the CNI IPAM configuration (any IPAM plugin's config object);
	// it replaces the ClusterNetwork's default ipam as a whole.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	IPAM *runtime.RawExtension `json:"ipam,omitempty"`

	// qos overrides the ClusterNetwork's default interface QoS field by field.
	// +optional
	QoS *InterfaceQoS `json:"qos,omitempty"`

	// bandwidth overrides its ClusterNetwork's bandwidth field by field; its
	// capacity must not exceed the ClusterNetwork's (the tenant shares the
	// admin's uplink, and cannot promise more of it).
	// +optional
	Bandwidth *NetworkBandwidth `json:"bandwidth,omitempty"`

	// mtu of the pod interfaces; at most the MTU the nodes report in their
	// NodeNetworks.
	// +kubebuilder:validation:Minimum=68
	// +kubebuilder:validation:Maximum=65535
	// +optional
	MTU *int32 `json:"mtu,omitempty"`
}

// NetworkStatus is the observed state of a Network.
type NetworkStatus struct {
	// observedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// type is the plugin type of the ClusterNetwork, copied when rendered.
	// +optional
	Type NetworkType `json:"type,omitempty"`

	// config is the rendered plugin config object (the form of a netclass.dev
	// PodNetwork's parameters: type, plugin options, vlanId or vni, ipam,
	// qos, mtu). Node-specific options (master, local) are taken from each
	// node's NodeNetwork when an attachment is prepared.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	Config *runtime.RawExtension `json:"config,omitempty"`

	// conditions describe the current state. Known type: "Ready".
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// NetworkList is a list of Network objects.
//
// +kubebuilder:object:root=true
type NetworkList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Network `json:"items"`
}
