package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NetworkQoS reasons of the nodes' reports (status.nodes) and of the
// Ready condition the controller sums them up in.
const (
	// ReasonApplied: every selected attachment holds the rules.
	ReasonApplied = "Applied"
	// ReasonApplyFailed: the rules could not be brought current on some
	// attachments; the message names them.
	ReasonApplyFailed = "ApplyFailed"
)

// Limits of a NetworkQoS object (OKEP-4380). The rule limit is part of the
// priority arithmetic: a rule's effective precedence is
// priority*MaxNetworkQoSRules + its index, so objects of different priority
// never collide.
const (
	MinNetworkQoSPriority = 0
	MaxNetworkQoSPriority = 100
	MaxNetworkQoSRules    = 20
)

// NetworkQoS defines DSCP marking and metering (rate/burst, excess dropped)
// of the egress traffic of the selected pods of its namespace, on the
// selected netclass networks (OKEP-4380). Traffic of these pods is checked
// against each rule; when a rule matches, the packet is marked with its dscp
// and metered by its bandwidth. netclass compiles the rules into the qos
// block of the netclass plugins on the matching attachments and keeps them up
// to date on running pods.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=networkqoses,singular=networkqos,scope=Namespaced,shortName=nqos,categories=netclass
// +kubebuilder:printcolumn:name="Priority",type=integer,JSONPath=`.spec.priority`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.status`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NetworkQoS struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the NetworkQoS.
	// +required
	Spec NetworkQoSSpec `json:"spec"`

	// status is the observed state, written by netclass.
	// +optional
	Status NetworkQoSStatus `json:"status,omitempty"`
}

// NetworkQoSSpec defines the desired state of a NetworkQoS.
type NetworkQoSSpec struct {
	// networkSelectors select the networks whose interfaces the rules apply
	// to: DefaultNetwork the pod's primary interface (eth0, set up by the
	// cluster's primary CNI), PodNetworks and Networks the netclass
	// attachments on the networks they select. Unset selects the default
	// network only, as OKEP-4380 says (earlier releases of netclass
	// read it as every netclass network). It cannot be changed.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="networkSelectors is immutable"
	// +optional
	NetworkSelectors NetworkSelectors `json:"networkSelectors,omitempty"`

	// podSelector applies the NetworkQoS only to the pods of the namespace
	// whose labels match. Unset or empty selects all pods of the namespace.
	// +optional
	PodSelector metav1.LabelSelector `json:"podSelector,omitempty"`

	// priority is a value from 0 to 100. Rules of a NetworkQoS with a
	// numerically higher priority take precedence over those of one with a
	// lower priority.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +required
	Priority int32 `json:"priority"`

	// egress is the list of egress rules, at most 20. All rules of one object
	// share its priority; among them the order decides: a rule that appears
	// first takes the lowest precedence (the later rule wins).
	// +kubebuilder:validation:MaxItems=20
	// +required
	Egress []Rule `json:"egress"`
}

// NetworkSelectors is a list of network selections, at most one per
// selection type.
//
// +listType=map
// +listMapKey=networkSelectionType
// +kubebuilder:validation:MinItems=1
// +kubebuilder:validation:MaxItems=4
type NetworkSelectors []NetworkSelector

// NetworkSelectionType names the kind of network a NetworkSelector selects.
//
// +kubebuilder:validation:Enum=DefaultNetwork;PodNetworks;Networks;NetworkAttachmentDefinitions
type NetworkSelectionType string

const (
	// DefaultNetwork selects the cluster's default network: the primary
	// interface (eth0) of the selected pods, whatever primary CNI set it up.
	// It takes no selector.
	DefaultNetwork NetworkSelectionType = "DefaultNetwork"
	// PodNetworks selects cluster-scoped PodNetworks of provider netclass.dev.
	PodNetworks NetworkSelectionType = "PodNetworks"
	// Networks selects netclass Networks in the NetworkQoS's own namespace
	// (a Network is only usable by pods of its namespace).
	Networks NetworkSelectionType = "Networks"
	// NetworkAttachmentDefinitions selects the netclass attachments made
	// through a Multus NetworkAttachmentDefinition (k8s.cni.cncf.io/v1) the
	// networkAttachmentDefinitionSelector selects, as OKEP-4380 and
	// OVN-Kubernetes do. A NAD netclass-controller generates for a Network or
	// PodNetwork also selects that network's claim attachments.
	NetworkAttachmentDefinitions NetworkSelectionType = "NetworkAttachmentDefinitions"
)

// NetworkSelector selects networks of one type by label. The selector of
// the matching type must be set and no other; DefaultNetwork takes none.
//
// +kubebuilder:validation:XValidation:rule="self.networkSelectionType == 'DefaultNetwork' ? !has(self.podNetworkSelector) && !has(self.networkSelector) && !has(self.networkAttachmentDefinitionSelector) : self.networkSelectionType == 'PodNetworks' ? has(self.podNetworkSelector) && !has(self.networkSelector) && !has(self.networkAttachmentDefinitionSelector) : self.networkSelectionType == 'Networks' ? has(self.networkSelector) && !has(self.podNetworkSelector) && !has(self.networkAttachmentDefinitionSelector) : has(self.networkAttachmentDefinitionSelector) && !has(self.podNetworkSelector) && !has(self.networkSelector)",message="podNetworkSelector is required for PodNetworks, networkSelector for Networks and networkAttachmentDefinitionSelector for NetworkAttachmentDefinitions, and only that one; DefaultNetwork takes none"
type NetworkSelector struct {
	// networkSelectionType is the type of network selected.
	// +required
	NetworkSelectionType NetworkSelectionType `json:"networkSelectionType"`

	// podNetworkSelector selects PodNetworks by label; an empty selector
	// selects all of provider netclass.dev. For networkSelectionType PodNetworks.
	// +optional
	PodNetworkSelector *metav1.LabelSelector `json:"podNetworkSelector,omitempty"`

	// networkSelector selects Networks of the NetworkQoS's namespace by
	// label; an empty selector selects all of them. For networkSelectionType
	// Networks.
	// +optional
	NetworkSelector *metav1.LabelSelector `json:"networkSelector,omitempty"`

	// networkAttachmentDefinitionSelector selects NetworkAttachmentDefinitions
	// by their namespace's labels and their own. For networkSelectionType
	// NetworkAttachmentDefinitions (OKEP-4380's field, OVN-Kubernetes' shape).
	// +optional
	NetworkAttachmentDefinitionSelector *NetworkAttachmentDefinitionSelector `json:"networkAttachmentDefinitionSelector,omitempty"`
}

// NetworkAttachmentDefinitionSelector selects the NetworkAttachmentDefinitions
// whose labels match networkSelector in the namespaces whose labels match
// namespaceSelector (OVN-Kubernetes' type of the same name).
type NetworkAttachmentDefinitionSelector struct {
	// namespaceSelector selects namespaces by label; an empty selector
	// selects all namespaces.
	// +required
	NamespaceSelector metav1.LabelSelector `json:"namespaceSelector"`

	// networkSelector selects NetworkAttachmentDefinitions of the selected
	// namespaces by label; an empty selector selects all of them.
	// +required
	NetworkSelector metav1.LabelSelector `json:"networkSelector"`
}

// Rule is one egress NetworkQoS rule.
type Rule struct {
	// dscp is the DSCP value matching packets are marked with.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=63
	// +required
	DSCP int32 `json:"dscp"`

	// classifier selects the packets the rule applies to. Unset applies the
	// rule to all egress traffic regardless of destination.
	// +optional
	Classifier *Classifier `json:"classifier,omitempty"`

	// bandwidth meters matching packets; excess traffic is dropped. Unset
	// only marks.
	// +optional
	Bandwidth *Bandwidth `json:"bandwidth,omitempty"`
}

// Classifier matches packets by destination and destination port. Both
// lists are optional; a packet matches when it matches one of the
// destinations (or there are none) and one of the ports (or there are none).
type Classifier struct {
	// to lists the destinations.
	// +kubebuilder:validation:MaxItems=32
	// +optional
	To []Destination `json:"to,omitempty"`

	// ports lists destination protocol/port pairs.
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Ports []Port `json:"ports,omitempty"`
}

// Bandwidth controls the maximum rate of matching traffic; traffic over the
// limit is dropped.
//
// +kubebuilder:validation:XValidation:rule="!has(self.burst) || has(self.rate)",message="burst needs rate to be specified"
type Bandwidth struct {
	// rate is the rate limit in kbps.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4294967295
	// +optional
	Rate *int64 `json:"rate,omitempty"`

	// burst is the burst size in kilobits. It needs rate. At most 34359738:
	// the kernel meter holds a burst of at most 2^32-1 bytes.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=34359738
	// +optional
	Burst *int64 `json:"burst,omitempty"`
}

// Protocol is a transport protocol a rule's port applies to.
//
// +kubebuilder:validation:Enum=TCP;UDP;SCTP
type Protocol string

const (
	ProtocolTCP  Protocol = "TCP"
	ProtocolUDP  Protocol = "UDP"
	ProtocolSCTP Protocol = "SCTP"
)

// Port specifies a destination protocol and port.
//
// +kubebuilder:validation:XValidation:rule="!has(self.port) || has(self.protocol)",message="port needs protocol to be specified"
// +kubebuilder:validation:XValidation:rule="has(self.port) || has(self.protocol)",message="a port entry needs protocol (an empty one matches nothing)"
type Port struct {
	// protocol (TCP, UDP, SCTP) the traffic must match.
	// +optional
	Protocol Protocol `json:"protocol,omitempty"`

	// port is the destination port the traffic must match. Unset matches
	// every port of the protocol.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port *int32 `json:"port,omitempty"`
}

// Destination describes a peer the outgoing traffic goes to: either an
// ipBlock, or pods selected by podSelector and/or namespaceSelector.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.ipBlock) && (has(self.podSelector) || has(self.namespaceSelector)))",message="Can't specify both podSelector/namespaceSelector and ipBlock"
// +kubebuilder:validation:XValidation:rule="has(self.ipBlock) || has(self.podSelector) || has(self.namespaceSelector)",message="one of ipBlock, podSelector or namespaceSelector must be specified"
type Destination struct {
	// podSelector selects pods by label; present but empty selects all pods.
	// With namespaceSelector it selects the matching pods of the selected
	// namespaces, otherwise the matching pods of the NetworkQoS's namespace.
	// +optional
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`

	// namespaceSelector selects namespaces by label; present but empty
	// selects all namespaces. Without podSelector it selects all pods of the
	// selected namespaces.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// ipBlock selects a range of addresses. If it is set, neither of the
	// other fields can be.
	// +optional
	IPBlock *IPBlock `json:"ipBlock,omitempty"`
}

// IPBlock is a CIDR with optional exceptions, the shape of
// networking.k8s.io/v1 IPBlock with its rules checked by the schema.
//
// +kubebuilder:validation:XValidation:rule="!has(self.except) || !isCIDR(self.cidr) || self.except.all(e, !isCIDR(e) || (cidr(self.cidr).containsCIDR(e) && cidr(e).prefixLength() > cidr(self.cidr).prefixLength()))",message="every except must be a strict subnet of cidr"
type IPBlock struct {
	// cidr is the range, such as "192.168.1.0/24" or "2001:db8::/64".
	// +required
	CIDR CIDR `json:"cidr"`

	// except are ranges inside cidr that are not matched.
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Except []CIDR `json:"except,omitempty"`
}

// NetworkQoSStatus is the observed state of a NetworkQoS.
type NetworkQoSStatus struct {
	// status is a concise indication of whether the NetworkQoS is applied.
	// +optional
	Status string `json:"status,omitempty"`

	// conditions describe the current state. Known type: "Ready".
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// nodes are the reports of the nodes' netclass-dra: one entry per node
	// running attachments the NetworkQoS selects. Each node writes its own
	// entry, with a field manager of its own (netclass-dra/<node>), so no
	// node overwrites another's.
	// +optional
	// +listType=map
	// +listMapKey=node
	// +kubebuilder:validation:MaxItems=5000
	Nodes []NetworkQoSNodeStatus `json:"nodes,omitempty"`
}

// NetworkQoSNodeStatus is one node's report on a NetworkQoS.
type NetworkQoSNodeStatus struct {
	// node is the node's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Node string `json:"node"`

	// attachments is the number of attachments on the node whose rules
	// include this NetworkQoS's.
	// +kubebuilder:validation:Minimum=0
	Attachments int32 `json:"attachments"`

	// reason is Applied (every attachment holds the rules) or ApplyFailed
	// (some could not be brought current: message names the pod).
	// +kubebuilder:validation:Enum=Applied;ApplyFailed
	Reason string `json:"reason"`

	// message says, for ApplyFailed, which pod failed and why; for Applied,
	// which rules the node left out of its attachments' (over a bound, or
	// refused by the node), if any: the other rules apply.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// lastTransitionTime is when the reason last changed.
	LastTransitionTime metav1.Time `json:"lastTransitionTime"`
}

// NetworkQoSList is a list of NetworkQoS objects.
//
// +kubebuilder:object:root=true
type NetworkQoSList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []NetworkQoS `json:"items"`
}
