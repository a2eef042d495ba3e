// Package contract is what netclass's parts agree on, defined once: the
// driver's names, the CNI version of every configuration, the device
// attributes of its ResourceSlices, the data of its ResourceClaim status
// entries and the opaque AttachmentConfig a claim or DeviceClass passes to
// the driver. netclass-controller, netclass-dra and the tests take these from
// here (README.md of this package; a test of it holds the rest of the repository to
// it). It holds constants and types only: parsing and validation belong to
// their consumers (shim/attachment is the node's parser). It imports no
// Kubernetes package, so pure packages (conf/demo) can use it: the attribute
// names are untyped constants, which become a resourceapi.QualifiedName
// wherever one is expected.
package contract

import (
	"github.com/netclass-dev/netclass/conf/qos"
)

// Fixed names.
const (
	// DriverName is the DRA driver name: the driver and pool owner of the
	// ResourceSlices, of allocation results, opaque configurations and claim
	// status entries.
	DriverName = "netclass.dev"
	// Provider is the PodNetwork spec.provider netclass handles, and the
	// source component of netclass-controller's Events: the driver's name.
	Provider = DriverName
	// FieldManager is the field manager of every write netclass-dra and
	// netclass-controller make.
	FieldManager = "netclass.dev"
	// FinalizerInUse is the finalizer netclass-controller holds on every
	// netclass.dev PodNetwork and every Network: on deletion it is removed once
	// no ResourceClaim uses the network, so the network's segment stays its own
	// while pods are attached to it.
	FinalizerInUse = "netclass.dev/in-use"
	// CNIVersion is the CNI spec version of every configuration netclass
	// renders or validates.
	CNIVersion = "1.1.0"
)

// Standard device attributes of the NetworkClass proposal. A device
// that attaches pods to a network carries them in its ResourceSlice.
const (
	// StandardAttributeDomain is the domain of the standard attributes, as a
	// CEL selector names it (device.attributes["resource.kubernetes.io"]).
	StandardAttributeDomain = "resource.kubernetes.io"
	// AttributeStdPodNetwork names the network object (of the Group/Version/Kind
	// of the class in AttributeStdNetworkClass).
	AttributeStdPodNetwork = "resource.kubernetes.io/podNetwork"
	// AttributeStdPodNetworkNamespace names the namespace of a namespaced
	// network object; it is absent for cluster-scoped ones.
	AttributeStdPodNetworkNamespace = "resource.kubernetes.io/podNetworkNamespace"
	// AttributeStdNetworkClass names an existing NetworkClass.
	AttributeStdNetworkClass = "resource.kubernetes.io/networkClass"
)

// Device attributes netclass publishes besides the standard ones.
const (
	// AttributePodNetwork is the Multi-Network DRA design's "<driver>/podNetwork" form.
	AttributePodNetwork = DriverName + "/podNetwork"
	// AttributeType is the main plugin type (netclass-bridge, netclass-vxlan, …).
	AttributeType = DriverName + "/type"
	// AttributeKind is the Kind of the network object (PodNetwork, Network).
	AttributeKind = DriverName + "/kind"
	// AttributeClusterNetwork names the ClusterNetwork of a Network.
	AttributeClusterNetwork = DriverName + "/clusterNetwork"
	// AttributeVNI is the VXLAN network identifier of a vxlan network.
	AttributeVNI = DriverName + "/vni"
	// AttributeVLANID is the 802.1Q VLAN ID of a vlan network.
	AttributeVLANID = DriverName + "/vlanId"
	// AttributeMaster is the node's underlay device the network uses.
	AttributeMaster = DriverName + "/master"
)

// CapacityBandwidth is the consumable capacity of a shared device that is
// its network's bandwidth per node, in bits per second (a claim requests it
// as capacity.requests.bandwidth; the allocation's consumedCapacity is what
// the attachment is shaped to). Unqualified, it is in the driver's domain.
const CapacityBandwidth = "bandwidth"

// ClaimStatusData is the data of every status.devices[] entry of the driver in
// a ResourceClaim (the NetworkClass proposal and the Multi-Network DRA design): the network object the device attaches
// to and its NetworkClass.
type ClaimStatusData struct {
	PodNetwork string `json:"podNetwork"`
	// PodNetworkNamespace is empty for cluster-scoped network objects.
	PodNetworkNamespace string `json:"podNetworkNamespace,omitempty"`
	NetworkClass        string `json:"networkClass"`
	// Pods lists each pod's interface when the claim is shared by several
	// pods (each has its own interface on the device, and networkData
	// shows only the latest): NetworkPolicy and NetworkQoS peers are each
	// selected pod's own addresses. Absent for a claim of one pod.
	Pods []PodInterface `json:"pods,omitempty"`
	// PodsOmitted counts the pods left out of Pods to keep the data within
	// the API's 10 KiB (those attached last): they are no peer of a
	// NetworkPolicy or NetworkQoS rule on the network until they fit.
	PodsOmitted int `json:"podsOmitted,omitempty"`
	// Bandwidth is the bandwidth the scheduler allocated to the claim on the
	// device (its consumedCapacity "bandwidth", as a quantity of bits/s such
	// as "30M"), which its attachment's egress is shaped to. Absent: none.
	Bandwidth string `json:"bandwidth,omitempty"`
}

// PodInterface is one pod's interface on a shared claim's device.
type PodInterface struct {
	UID           string   `json:"uid"`
	Name          string   `json:"name"`
	InterfaceName string   `json:"interfaceName,omitempty"`
	IPs           []string `json:"ips,omitempty"`
}

// MaxNetworkName is the longest name (and namespace) of a network object a
// node can offer: its device carries the name in attributes, whose values
// hold at most 64 characters (resource.k8s.io's DeviceAttributeMaxValueLength,
// which this package does not import).
const MaxNetworkName = 64

// NetworkPolicy on netclass attachments (KEP-5790).
const (
	// PolicyControllerLabel names the implementation a NetworkPolicy (or a
	// ClusterNetworkPolicy) is for.
	PolicyControllerLabel = "networking.k8s.io/policy-controller-name"
	// PolicyController is the label's value netclass-dra enforces; any other
	// value (none, another controller's) or no label is ignored.
	PolicyController = DriverName
	// AnnotationPolicyNetworks optionally scopes a labelled NetworkPolicy to
	// some netclass networks: a comma-separated list of PodNetwork names and
	// namespace/name of Networks. Without it the policy applies on every
	// netclass network of the pods it selects.
	AnnotationPolicyNetworks = DriverName + "/networks"
	// AnnotationPolicyFor names the networks a MultiNetworkPolicy
	// (k8s.cni.cncf.io/v1beta1) applies to: a comma-separated list, each
	// entry a PodNetwork's name, a Network's namespace/name, or a bare
	// name of a Network in the policy's own namespace. A MultiNetworkPolicy
	// naming no netclass network is not netclass's.
	AnnotationPolicyFor = "k8s.v1.cni.cncf.io/policy-for"
	// ReasonPolicyNotEnforced: a rule of a policy could not be compiled for
	// a pod it selects and is left out (what it allows stays closed);
	// ReasonPolicyEnforceFailed: the pod's table could not be written. Both
	// are Warning Events on the NetworkPolicy.
	ReasonPolicyNotEnforced   = "NotEnforced"
	ReasonPolicyEnforceFailed = "EnforceFailed"
	// ReasonNetworkQoSIgnored: rules of a NetworkQoS are left out of a
	// pod's (over a bound, or refused by the node): a Warning Event on the
	// claim when its pod starts, and on the NetworkQoS from each node
	// whose attachments it selects.
	ReasonNetworkQoSIgnored = "NetworkQoSIgnored"
	// ReasonPolicyNetworksNotFound: the scoping annotation is empty,
	// malformed or names no netclass network, so the policy applies
	// nowhere it was meant to (a Warning Event on the NetworkPolicy).
	ReasonPolicyNetworksNotFound = "NetworksNotFound"
	// ReasonNetworkStatusMissing: a netclass attachment Multus made for a
	// pod still has no network identity (the pod's network-status does not
	// name its NetworkAttachmentDefinition) a while after its ADD, so the
	// node's agent gives it no NetworkPolicy or NetworkQoS, and a port that
	// started closed passes nothing (a Warning Event on the pod).
	ReasonNetworkStatusMissing = "NetworkStatusMissing"
)

// The opaque configuration's identity.
const (
	AttachmentConfigAPIVersion = "netclass.dev/v1alpha1"
	AttachmentConfigKind       = "AttachmentConfig"
)

// AttachmentConfig is the opaque configuration of a claim request or
// DeviceClass for driver DriverName. Every field but apiVersion and kind is
// optional.
type AttachmentConfig struct {
	// APIVersion is AttachmentConfigAPIVersion.
	APIVersion string `json:"apiVersion"`
	// Kind is AttachmentConfigKind.
	Kind string `json:"kind"`
	// InterfaceName is the name of the interface in the pod (default net1, net2, …).
	InterfaceName string `json:"interfaceName,omitempty"`
	// MAC is a static hardware address for the interface.
	MAC string `json:"mac,omitempty"`
	// IPs are static addresses in CIDR form, handed to IPAM (capability "ips").
	IPs []string `json:"ips,omitempty"`
	// QoS is merged over the network's qos block.
	QoS *qos.Spec `json:"qos,omitempty"`
}

// MaxInterfacesPerPod bounds the interfaces netclass makes in one pod
// sandbox, through claims (netclass-dra) and, apart, through generated NADs
// (netclass-nad): each is a veth, addresses of the node's block, rules the
// agent keeps and checkpoint writes, and a pod's users choose how many they
// ask for (many claims of many devices; one NAD named again and again).
const MaxInterfacesPerPod = 32
