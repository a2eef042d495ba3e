package v1

import (
	resourceapi "k8s.io/api/resource/v1"
)

// Standard DRA device attributes of the NetworkClass proposal (seed 000). A
// device that attaches pods to a network carries them in its ResourceSlice.
const (
	// StandardDeviceAttributePrefix is the prefix of the standard device attributes.
	StandardDeviceAttributePrefix = "resource.kubernetes.io/"

	// StandardDeviceAttributePodNetwork names the network object (of the
	// Group/Version/Kind of the class in StandardDeviceAttributeNetworkClass).
	StandardDeviceAttributePodNetwork resourceapi.QualifiedName = StandardDeviceAttributePrefix + "podNetwork"
	// StandardDeviceAttributePodNetworkNamespace names the namespace of a
	// namespaced network object; it is absent for cluster-scoped ones.
	StandardDeviceAttributePodNetworkNamespace resourceapi.QualifiedName = StandardDeviceAttributePrefix + "podNetworkNamespace"
	// StandardDeviceAttributeNetworkClass names an existing NetworkClass.
	StandardDeviceAttributeNetworkClass resourceapi.QualifiedName = StandardDeviceAttributePrefix + "networkClass"
)
