// Package v1 holds the multi-network API types of the proposals netclass implements:
// NetworkClass (a pointer from a class name to the Group/Version/Kind of
// implementation-defined network objects) and PodNetwork (a generic,
// vendor-neutral handle for a network pods attach to).
//
// The group is multinetwork.networking.k8s.io. Because it is a *.k8s.io
// group that has not been through API review, every CRD of it carries the
// annotation api-approved.kubernetes.io: "unapproved, experimental-only";
// the API server refuses the CRD without it.
//
// +kubebuilder:object:generate=true
// +groupName=multinetwork.networking.k8s.io
package v1
