package v1alpha1

// Condition types and reasons shared by the kinds of this group. Each kind's
// file lists the reasons specific to it.
const (
	// ConditionReady is the summary condition of every kind in this group.
	ConditionReady = "Ready"

	// ReasonReady: Ready=True.
	ReasonReady = "Ready"
	// ReasonPending: nobody has reconciled the object's current generation yet.
	ReasonPending = "Pending"
	// ReasonInvalidConfig: the object's spec cannot be rendered into a valid
	// plugin configuration; the message says why.
	ReasonInvalidConfig = "InvalidConfig"
)

// NetworkType is the netclass CNI plugin type that implements a ClusterNetwork.
//
// +kubebuilder:validation:Enum=netclass-vlan;netclass-vxlan
type NetworkType string

const (
	// NetworkTypeVLAN: 802.1Q VLAN sub-interfaces of a master device, one VLAN ID per Network.
	NetworkTypeVLAN NetworkType = "netclass-vlan"
	// NetworkTypeVXLAN: one VXLAN device and bridge per VNI on each node.
	NetworkTypeVXLAN NetworkType = "netclass-vxlan"
)

// InterfaceName is the name of a Linux network interface on the node.
//
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=15
// +kubebuilder:validation:Pattern=`^[^\s/:]+$`
// +kubebuilder:validation:XValidation:rule="self != '.' && self != '..'",message="must be a valid interface name"
type InterfaceName string

// IPAddress is an IPv4 or IPv6 address in text form (no zone, no CIDR mask).
//
// +kubebuilder:validation:MaxLength=45
// +kubebuilder:validation:XValidation:rule="isIP(self)",message="must be a valid IP address"
type IPAddress string

// CIDR is an IPv4 or IPv6 prefix, for example 10.0.0.0/8 or 2001:db8::/32.
//
// +kubebuilder:validation:MaxLength=49
// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="must be a valid CIDR"
type CIDR string

// Options are the plugin options of a VLAN or VXLAN network. At most one of
// vlan and vxlan is set, the one matching the ClusterNetwork's type.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.vlan) && has(self.vxlan))",message="at most one of vlan and vxlan may be set"
type Options struct {
	// vlan holds the netclass-vlan options.
	// +optional
	VLAN *VLANOptions `json:"vlan,omitempty"`

	// vxlan holds the netclass-vxlan options.
	// +optional
	VXLAN *VXLANOptions `json:"vxlan,omitempty"`
}

// VLANOptions are the node-side options of the netclass-vlan plugin; the VLAN
// ID comes from each Network.
type VLANOptions struct {
	// master is the node's device the VLAN sub-interfaces are created on. When
	// unset the plugin uses the device of the node's default route.
	// +optional
	Master InterfaceName `json:"master,omitempty"`

	// mtu of the VLAN interfaces; at most the master's MTU. When unset the
	// master's MTU is used.
	// +kubebuilder:validation:Minimum=68
	// +kubebuilder:validation:Maximum=65535
	// +optional
	MTU *int32 `json:"mtu,omitempty"`

	// pcpMap maps the DSCP of a pod's IP packet (keys "0" to "63") to the
	// 802.1p priority (PCP, 0 to 7) its frame carries on the trunk. It
	// replaces the default map, PCP = DSCP >> 3 (the class selector), whole:
	// a DSCP value it leaves out gets PCP 0.
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^(0|[1-9][0-9]?)$') && int(k) <= 63)",message="keys must be DSCP values, decimal numbers from 0 to 63"
	// +kubebuilder:validation:XValidation:rule="self.all(k, self[k] >= 0 && self[k] <= 7)",message="values must be PCPs, from 0 to 7"
	// +optional
	PCPMap map[string]int32 `json:"pcpMap,omitempty"`
}

// VXLANOptions are the node-side options of the netclass-vxlan plugin; the
// VNI comes from each Network.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.master) && has(self.local))",message="master and local are mutually exclusive"
// +kubebuilder:validation:XValidation:rule="!(has(self.group) && has(self.remotes))",message="group and remotes are mutually exclusive"
type VXLANOptions struct {
	// master is the underlay device the VXLAN device sends through. Mutually
	// exclusive with local.
	// +optional
	Master InterfaceName `json:"master,omitempty"`

	// local is the underlay source address of the VXLAN device. Mutually
	// exclusive with master. It differs per node, so it belongs in a
	// NodeNetwork's options rather than in a ClusterNetwork's defaults, unless
	// the ClusterNetwork selects a single node.
	// +optional
	Local IPAddress `json:"local,omitempty"`

	// group is the multicast group used for flooding (BUM traffic). Mutually
	// exclusive with remotes.
	// +kubebuilder:validation:XValidation:rule="!isIP(self) || cidr('224.0.0.0/4').containsIP(self) || cidr('ff00::/8').containsIP(self)",message="group must be a multicast address"
	// +optional
	Group IPAddress `json:"group,omitempty"`

	// remotes are the unicast VTEP addresses flooded to through static
	// forwarding entries. Mutually exclusive with group.
	// +listType=set
	// +kubebuilder:validation:MaxItems=512
	// +optional
	Remotes []IPAddress `json:"remotes,omitempty"`

	// port is the UDP destination port of the VXLAN device.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:default=4789
	// +optional
	Port *int32 `json:"port,omitempty"`

	// learning enables source-address learning on the VXLAN device. Unset
	// leaves the plugin's default.
	// +optional
	Learning *bool `json:"learning,omitempty"`

	// mtu of the pod interfaces. When unset it is the underlay MTU minus 50.
	// +kubebuilder:validation:Minimum=68
	// +kubebuilder:validation:Maximum=65535
	// +optional
	MTU *int32 `json:"mtu,omitempty"`
}

// InterfaceQoS is the interface-wide part of the plugins' qos block: shaping
// of the whole attachment and one DSCP value for all its egress packets.
// Per-flow rules come from NetworkQoS objects, not from here.
//
// +kubebuilder:validation:XValidation:rule="has(self.ingressRate) == has(self.ingressBurst)",message="ingressRate and ingressBurst must be set together"
// +kubebuilder:validation:XValidation:rule="has(self.egressRate) == has(self.egressBurst)",message="egressRate and egressBurst must be set together"
type InterfaceQoS struct {
	// ingressRate is the rate, in bits per second, of traffic towards the pod.
	// +kubebuilder:validation:Minimum=1
	// +optional
	IngressRate *int64 `json:"ingressRate,omitempty"`

	// ingressBurst is the burst, in bits, of traffic towards the pod.
	// +kubebuilder:validation:Minimum=1
	// +optional
	IngressBurst *int64 `json:"ingressBurst,omitempty"`

	// egressRate is the rate, in bits per second, of traffic from the pod.
	// +kubebuilder:validation:Minimum=1
	// +optional
	EgressRate *int64 `json:"egressRate,omitempty"`

	// egressBurst is the burst, in bits, of traffic from the pod.
	// +kubebuilder:validation:Minimum=1
	// +optional
	EgressBurst *int64 `json:"egressBurst,omitempty"`

	// dscp marks every egress IP packet of the attachment (IPv4 TOS, IPv6
	// traffic class).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=63
	// +optional
	DSCP *int32 `json:"dscp,omitempty"`

	// queue is the queue under the shapers: fq_codel (a fair, low-latency
	// queue under the token bucket; the default), cake (its own shaper,
	// fair and low-latency), or tbf (the token bucket alone). On a node
	// whose kernel lacks the named queue the attachment fails; the default
	// falls back to tbf alone with a Warning Event on the pod.
	// +optional
	Queue QoSQueue `json:"queue,omitempty"`
}

// QoSQueue is the queue under an attachment's shapers.
//
// +kubebuilder:validation:Enum=fq_codel;cake;tbf
type QoSQueue string
