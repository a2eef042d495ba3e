package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NetworkClass condition types and reasons. The controller that serves the
// class's Group/Version/Kind owns their life cycle.
const (
	// NetworkClassConditionAccepted says whether the class's Group/Version/Kind
	// names a resource the API server serves.
	NetworkClassConditionAccepted = "Accepted"

	// NetworkClassReasonAccepted: the Group/Version/Kind is served.
	NetworkClassReasonAccepted = "Accepted"
	// NetworkClassReasonKindNotServed: the API server serves no resource of the
	// class's Group/Version/Kind (CRD missing, or a different version).
	NetworkClassReasonKindNotServed = "KindNotServed"
	// NetworkClassReasonUnsupported: the Group/Version/Kind is served, but the
	// controller writing the condition does not implement it. Another
	// implementation may.
	NetworkClassReasonUnsupported = "Unsupported"
)

// NetworkClass describes a class of pod networks implemented by a specific
// controller and represented by implementation-defined objects. Any object of
// the Group/Version/Kind in spec is a network instance of this class; devices
// that attach pods to it carry the DRA attribute
// resource.kubernetes.io/networkClass with this object's name.
//
// The presence of at least one NetworkClass means multi-network is available
// in the cluster.
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=nc,categories=multinetwork;netclass
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=unapproved, experimental-only"
// +kubebuilder:printcolumn:name="Group",type=string,JSONPath=`.spec.group`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.version`
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.spec.kind`
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NetworkClass struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the NetworkClass.
	// +optional
	Spec NetworkClassSpec `json:"spec,omitempty"`

	// status is the observed state of the NetworkClass.
	// +optional
	Status NetworkClassStatus `json:"status,omitempty"`
}

// NetworkClassSpec describes how network objects of this class are identified.
type NetworkClassSpec struct {
	// group is the API group of the network object. The empty string is the
	// core group.
	//
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	Group string `json:"group"`

	// version is the API version of the network object.
	//
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Version string `json:"version"`

	// kind is the Kind of the network object.
	//
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$`
	// +required
	Kind string `json:"kind"`
}

// NetworkClassStatus is the observed state of a NetworkClass.
type NetworkClassStatus struct {
	// conditions describe the current conditions of the NetworkClass.
	// Known condition types: "Accepted".
	//
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// NetworkClassList is a list of NetworkClass objects.
//
// +kubebuilder:object:root=true
type NetworkClassList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []NetworkClass `json:"items"`
}
