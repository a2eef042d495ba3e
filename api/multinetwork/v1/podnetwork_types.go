package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// PodNetwork condition types and reasons (the Multi-Network DRA design). The provider named in
// spec.provider owns their life cycle.
const (
	// PodNetworkConditionReady says that the PodNetwork is correct (validated)
	// and can be consumed by the DRA driver. New pods are not attached to a
	// PodNetwork that is not Ready. It says nothing about readiness on a
	// particular node.
	PodNetworkConditionReady = "Ready"
	// PodNetworkConditionInUse is True while at least one pod (through its
	// ResourceClaim) is attached to the PodNetwork.
	PodNetworkConditionInUse = "InUse"

	// PodNetworkReasonPending is the reason of the defaulted Ready=Unknown
	// condition a PodNetwork is created with, before any provider looked at it.
	PodNetworkReasonPending = "Pending"
	// PodNetworkReasonReady: Ready=True, the parameters were validated.
	PodNetworkReasonReady = "Ready"
	// PodNetworkReasonConditionsNotReady: Ready=False because another
	// condition on the object is False.
	PodNetworkReasonConditionsNotReady = "ConditionsNotReady"
	// PodNetworkReasonAdministrativelyDisabled: Ready=False because
	// spec.enabled is false.
	PodNetworkReasonAdministrativelyDisabled = "AdministrativelyDisabled"
	// PodNetworkReasonInvalidParameters: Ready=False because spec.parameters
	// is not a valid configuration for the provider.
	PodNetworkReasonInvalidParameters = "InvalidParameters"

	// PodNetworkReasonInUse: InUse=True, at least one claim uses the network.
	PodNetworkReasonInUse = "InUse"
	// PodNetworkReasonNotInUse: InUse=False, no claim uses the network.
	PodNetworkReasonNotInUse = "NotInUse"
)

// PodNetwork represents a logical network in a Kubernetes cluster: a
// vendor-neutral handle that pods attach to through DRA ResourceClaims. Its
// configuration is owned by the provider named in spec.provider.
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=pn;podnet,categories=multinetwork;netclass
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=unapproved, experimental-only"
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.spec.provider`
// +kubebuilder:printcolumn:name="Enabled",type=boolean,JSONPath=`.spec.enabled`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="InUse",type=string,JSONPath=`.status.conditions[?(@.type=="InUse")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PodNetwork struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the PodNetwork.
	// +required
	Spec PodNetworkSpec `json:"spec"`

	// status is the observed state of the PodNetwork, written by the provider.
	// +optional
	Status PodNetworkStatus `json:"status,omitempty"`
}

// PodNetworkSpec contains the specification of a PodNetwork.
type PodNetworkSpec struct {
	// enabled administratively enables or disables a PodNetwork. When false,
	// the Ready condition is False with reason AdministrativelyDisabled and no
	// new pods are attached. Defaults to true.
	//
	// +kubebuilder:default=true
	Enabled bool `json:"enabled"`

	// provider is the name of the handler of this PodNetwork, a domain
	// prefixed path such as "example.net/multi-network"; netclass handles
	// "netclass.dev". It cannot be empty and cannot be changed.
	//
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:message="Value is immutable",rule="self == oldSelf"
	// +required
	Provider string `json:"provider"`

	// parameters are the provider's implementation-specific configuration,
	// free-form and kept as written. For provider netclass.dev they are one
	// netclass plugin config object: type (netclass-bridge, netclass-vlan,
	// netclass-vxlan, netclass-sriov), that plugin's options, ipam and qos.
	//
	// +optional
	Parameters runtime.RawExtension `json:"parameters,omitempty"`
}

// PodNetworkStatus contains the status information related to the PodNetwork.
type PodNetworkStatus struct {
	// conditions describe the current conditions of the PodNetwork.
	//
	// Known condition types are "Ready" and "InUse"; providers may add their
	// own, and a False one makes Ready False with reason ConditionsNotReady.
	//
	// The seed's examples write conditions with a "lastProbeTime" field that
	// metav1.Condition does not have; the schema tolerates and keeps unknown
	// fields inside the condition entries (known fields are still validated
	// and pruned) so that those examples apply unchanged with strict field
	// validation. Clients should not write such fields.
	//
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +kubebuilder:validation:MaxItems=5
	// +kubebuilder:default={{type: "Ready", status: "Unknown", reason:"Pending", message:"Waiting for controller", lastTransitionTime: "1970-01-01T00:00:00Z"}}
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// PodNetworkList is a list of PodNetwork objects.
//
// +kubebuilder:object:root=true
type PodNetworkList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []PodNetwork `json:"items"`
}
