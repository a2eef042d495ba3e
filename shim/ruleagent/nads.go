package ruleagent

import (
	"github.com/netclass-dev/netclass/shim/network"
	"github.com/netclass-dev/netclass/shim/render"
)

// NADs describes NetworkAttachmentDefinitions as NetworkQoS NAD selectors
// see them (their labels and their namespace's).
type NADs interface {
	// NAD returns the NAD namespace/name (nil: not known).
	NAD(namespace, name string) *render.NAD
	// Generated returns the NAD netclass-controller generated for the
	// network in the namespace (nil: none).
	Generated(namespace string, net network.Network) *render.NAD
}
