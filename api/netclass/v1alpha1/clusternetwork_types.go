package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ClusterNetwork reasons of the Ready condition.
const (
	// ReasonNoReadyNodes: Ready=False, no selected node can carry the network.
	ReasonNoReadyNodes = "NoReadyNodes"
)

// NodeLabelPrefix is the prefix of the node labels the controller sets on
// nodes that can carry a ClusterNetwork: NodeLabelPrefix + the
// ClusterNetwork's name, with value "true". ClusterNetwork names are limited
// to 63 characters so they fit the name part of a label key.
const NodeLabelPrefix = "clusternetwork.netclass.dev/"

// AnnotationNodeIndex is the Node annotation holding the node's index, a
// small integer netclass-controller assigns once to every node (the lowest
// one free) and never changes while the node exists. netclass-dra carves
// the node's block of every host-local range of a network spanning nodes
// from it (conf/netspec.NodeBlock).
const AnnotationNodeIndex = "netclass.dev/node-index"

// LabelClusterNetwork is the label on NodeNetworks and Networks whose value
// is the name of their ClusterNetwork.
const LabelClusterNetwork = "netclass.dev/cluster-network"

// ClusterNetwork is an admin-defined VLAN or VXLAN network model: which
// plugin implements it, the default options of that plugin, the nodes it may
// exist on and default IPAM and QoS for its Networks. The controller creates
// one NodeNetwork per selected node; users create Networks (a VLAN ID or a
// VNI) under it.
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=cn;cnet,categories=netclass
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.nodes`
// +kubebuilder:printcolumn:name="Ready Nodes",type=integer,JSONPath=`.status.readyNodes`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="ClusterNetwork names are at most 63 characters (they name node labels)"
type ClusterNetwork struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the ClusterNetwork.
	// +required
	Spec ClusterNetworkSpec `json:"spec"`

	// status is the observed state, written by netclass-controller.
	// +optional
	Status ClusterNetworkStatus `json:"status,omitempty"`
}

// ClusterNetworkSpec is the desired state of a ClusterNetwork.
//
// +kubebuilder:validation:XValidation:rule="self.type == 'netclass-vlan' ? !has(self.defaultOptions) || !has(self.defaultOptions.vxlan) : !has(self.defaultOptions) || !has(self.defaultOptions.vlan)",message="defaultOptions must match type: vlan for netclass-vlan, vxlan for netclass-vxlan"
type ClusterNetworkSpec struct {
	// description is free text for humans.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Description string `json:"description,omitempty"`

	// type is the netclass CNI plugin that implements the network. It cannot
	// be changed.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="type is immutable"
	// +required
	Type NetworkType `json:"type"`

	// defaultOptions are the plugin options every node starts from; the
	// member matching type may be set (vlan or vxlan). Each NodeNetwork
	// carries the options in effect on its node.
	// +optional
	DefaultOptions *Options `json:"defaultOptions,omitempty"`

	// nodeSelector selects the nodes the network may exist on. Unset selects
	// every node.
	// +optional
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`

	// ipam is the default CNI IPAM configuration of the Networks under this
	// ClusterNetwork, any IPAM plugin's config object (for example
	// {type: host-local, ranges: [[{subnet: 10.10.1.0/24}]]}). A Network's own
	// ipam replaces it as a whole.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	IPAM *runtime.RawExtension `json:"ipam,omitempty"`

	// qos is the default interface QoS of the Networks under this
	// ClusterNetwork. A Network's own qos fields override it field by field.
	// +optional
	QoS *InterfaceQoS `json:"qos,omitempty"`

	// bandwidth is the bandwidth each of its Networks offers on each node,
	// published as the DRA consumable capacity "bandwidth" of the Network's
	// device (capacity, and the request policy: default, min, max, step).
	// A Network's own bandwidth overrides it field by field and may only
	// lower the capacity. Unset: the Networks publish no capacity (unless
	// they set their own), and their claims are not shaped by allocation.
	// +optional
	Bandwidth *NetworkBandwidth `json:"bandwidth,omitempty"`

	// allowStaticAddresses lets ResourceClaims on the Networks of this
	// ClusterNetwork choose a static MAC address or static IPs (the mac and
	// ips of their AttachmentConfig). Off by default: a claim could otherwise
	// take the addresses of another pod on the segment. Only the admin, who
	// owns the ClusterNetwork, can turn it on; a Network cannot.
	// +optional
	AllowStaticAddresses bool `json:"allowStaticAddresses,omitempty"`

	// namespaceSelector selects the namespaces whose Networks may use this
	// ClusterNetwork. Unset: every namespace's. A Network of a namespace it
	// does not select is not Ready (reason NotAllowed), holds no segment and
	// is offered on no node. Pods already attached keep their attachment
	// until they go.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// segmentIds lists the VLAN IDs (netclass-vlan) or VNIs (netclass-vxlan)
	// its Networks may take. Unset: any. A Network asking for another is not
	// Ready (reason NotAllowed) and holds no segment, so a tenant can neither
	// join an infrastructure VLAN trunked to the nodes nor reserve the IDs
	// an admin keeps for others.
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +optional
	SegmentIDs []IDRange `json:"segmentIds,omitempty"`

	// dscpPolicy is the DSCP values the pods of its Networks may send to
	// the fabric, as an untrusted switch port enforces them. A DSCP its
	// Networks, their claims or NetworkQoS rules ask for must be allowed
	// (a Network asking for another is not Ready, reason InvalidConfig; a
	// claim is refused at Prepare; a NetworkQoS rule is left out and
	// named), and a packet a pod marked itself with a value not allowed
	// leaves its port re-marked with remark. Unset: every value, and a
	// pod's own marking passes.
	// +optional
	DSCPPolicy *DSCPPolicy `json:"dscpPolicy,omitempty"`
}

// DSCPPolicy is the DSCP values an attachment's packets may leave with.
//
// +kubebuilder:validation:XValidation:rule="has(self.remark) ? self.allowed.exists(r, r.first <= self.remark && self.remark <= r.last) : self.allowed.exists(r, r.first == 0)",message="remark must be an allowed value (and is required when allowed leaves out 0)"
type DSCPPolicy struct {
	// allowed lists the ranges of DSCP values allowed.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +required
	Allowed []DSCPRange `json:"allowed"`

	// remark is the DSCP a packet whose own DSCP is not allowed leaves
	// with. Default 0.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=63
	// +optional
	Remark *int32 `json:"remark,omitempty"`
}

// DSCPRange is the DSCP values from first to last, both included.
//
// +kubebuilder:validation:XValidation:rule="self.last >= self.first",message="last must not be below first"
type DSCPRange struct {
	// first is the range's lowest value.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=63
	// +required
	First int32 `json:"first"`

	// last is the range's highest value.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=63
	// +required
	Last int32 `json:"last"`
}

// IDRange is the VLAN IDs or VNIs from first to last, both included.
//
// +kubebuilder:validation:XValidation:rule="self.last >= self.first",message="last must not be below first"
type IDRange struct {
	// first is the range's lowest ID.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16777215
	// +required
	First int32 `json:"first"`

	// last is the range's highest ID.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16777215
	// +required
	Last int32 `json:"last"`
}

// Contains reports whether id is in the range.
func (r IDRange) Contains(id int32) bool { return r.First <= id && id <= r.Last }

// AnnotationAllowStaticAddresses, set to "true" on a netclass.dev PodNetwork
// (a cluster-scoped, admin-owned object whose spec has the proposal's fixed
// shape), lets ResourceClaims on it choose a static MAC address or static IPs.
// Without it a claim's AttachmentConfig mac and ips are refused at Prepare.
const AnnotationAllowStaticAddresses = "netclass.dev/allow-static-addresses"

// ClusterNetworkStatus is the observed state of a ClusterNetwork.
type ClusterNetworkStatus struct {
	// observedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// nodes is the number of nodes selected by nodeSelector (the number of
	// NodeNetworks).
	// +optional
	Nodes int32 `json:"nodes"`

	// readyNodes is the number of selected nodes whose NodeNetwork is Ready.
	// +optional
	ReadyNodes int32 `json:"readyNodes"`

	// conditions describe the current state. Known type: "Ready" (at least
	// one node can carry the network).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// ClusterNetworkList is a list of ClusterNetwork objects.
//
// +kubebuilder:object:root=true
type ClusterNetworkList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []ClusterNetwork `json:"items"`
}
