package contract

// The Multus NetworkAttachmentDefinitions netclass-controller generates for
// netclass networks (README "Multus: generated NADs"), as the controller
// writes them and netclass-dra reads them back (a NetworkQoS NAD selector
// matches a claim attachment of a network through its generated NAD).
const (
	NADGroup    = "k8s.cni.cncf.io"
	NADVersion  = "v1"
	NADResource = "network-attachment-definitions"
	NADKind     = "NetworkAttachmentDefinition"
	// NADManagedByLabel, with the value Provider, marks a generated NAD.
	NADManagedByLabel = "app.kubernetes.io/managed-by"
	// NADNetworkAnnotation names a generated NAD's network:
	// "<namespace>/<name>" for a Network, "<name>" for a PodNetwork.
	NADNetworkAnnotation = "netclass.dev/network"
)
