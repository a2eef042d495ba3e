// Package attachment holds what every part of netclass-dra shares besides
// api/contract (the driver's names, attributes and the AttachmentConfig
// type): a reference to a network object, and the node's parser of the
// opaque AttachmentConfig a claim or DeviceClass passes to the driver (strict
// decoding, validation, merge). Everything here is pure.
package attachment

import (
	"fmt"
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
// kinds, "<namespace>_<name>" for namespaced ones. "_" cannot occur
// in Kubernetes names, so the two never collide.
func (r NetworkRef) CNIName() string {
	if r.Namespace == "" {
		return r.Name
	}
	return r.Namespace + "_" + r.Name
}
