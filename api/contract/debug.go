package contract

// DebugAttachmentsVersion versions the document netclass-dra serves at
// /debug/attachments on its health address.
const DebugAttachmentsVersion = "netclass.dev/debug-attachments/v1"

// DebugAttachments is /debug/attachments: what applies to each running
// attachment of the node as of the node agent's last completed sync (the
// kernel held that sync's rules before the document showed them).
type DebugAttachments struct {
	Version     string            `json:"version"`
	Attachments []DebugAttachment `json:"attachments"`
}

// DebugAttachment is one running attachment of DebugAttachments.
type DebugAttachment struct {
	Pod             string   `json:"pod"` // namespace/name
	Interface       string   `json:"interface"`
	Network         string   `json:"network"`
	NetworkQoS      []string `json:"networkQoS,omitempty"`
	NetworkPolicies []string `json:"networkPolicies,omitempty"`
	// MultiNetworkPolicies names the MultiNetworkPolicies whose policy-for
	// names the attachment's network and that select its pod.
	MultiNetworkPolicies []string `json:"multiNetworkPolicies,omitempty"`
	// ClusterNetworkPolicies names the ClusterNetworkPolicies labelled for
	// netclass whose subject selects the attachment's pod, in precedence
	// order.
	ClusterNetworkPolicies []string `json:"clusterNetworkPolicies,omitempty"`
	// NotEnforced lists the policy rules left out, QoSIgnored the QoS
	// rules; Error says why the attachment does not hold its rules.
	NotEnforced string `json:"notEnforced,omitempty"`
	QoSIgnored  string `json:"qosIgnored,omitempty"`
	Error       string `json:"error,omitempty"`
	// NetworkStatusMissing: an interface Multus made whose pod's
	// network-status does not name its NetworkAttachmentDefinition (the
	// pod gets a NetworkStatusMissing Event). Its network unknown, it keeps
	// the rules it held, which the rest of the entry names (Network empty
	// if it never held any). Not set for an interface of a netclass plugin
	// that another caller ran (the pod asks Multus for no network on it):
	// listed with no network, and nothing waits for a network-status.
	NetworkStatusMissing bool `json:"networkStatusMissing,omitempty"`
}
