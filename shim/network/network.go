// Package network turns netclass's network objects (PodNetwork, Network) into
// the descriptors the rest of netclass-dra works with: which NetworkClass they
// belong to, their complete main-plugin configuration, and whether they may be
// offered to pods on this node. Everything here is pure; the Catalog reads the
// objects from informer caches.
package network

import (
	"encoding/json"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netclass-dev/netclass/api/contract"
	mnv1 "github.com/netclass-dev/netclass/api/multinetwork/v1"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/bandwidth"
	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/conf/netspec"
	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/shim/attachment"
)

// The two kinds netclass serves; a NetworkClass naming another GVK is not ours.
var (
	PodNetworkGVK = mnv1.SchemeGroupVersion.WithKind("PodNetwork")
	NetworkGVK    = ncv1.SchemeGroupVersion.WithKind("Network")
)

// DefaultKind is the kind a NetworkRef names the cluster's default network
// by: the pods' primary interface (eth0), which the primary CNI sets up and
// NetworkQoS selects with networkSelectionType DefaultNetwork (or no
// networkSelectors at all).
const DefaultKind = "DefaultNetwork"

// Default is the cluster's default network as a NetworkQoS target.
func Default() Network {
	return Network{Ref: attachment.NetworkRef{Kind: DefaultKind, Name: "default"}}
}

// IsDefault reports whether n is the cluster's default network.
func (n Network) IsDefault() bool { return n.Ref.Kind == DefaultKind && n.Ref.Group == "" }

// Network is one network object that netclass can attach pods to.
type Network struct {
	Ref    attachment.NetworkRef
	Labels map[string]string
	// Type is the main plugin type, e.g. netclass-bridge.
	Type string
	// Config is the complete main-plugin configuration (cniVersion and name set).
	Config json.RawMessage
	// Master is the node device the network needs ("" when none).
	Master         string
	ClusterNetwork string
	VNI, VLANID    int
	// DeviceID is the VF an SR-IOV network names itself ("" when it picks
	// VFs of its master).
	DeviceID string
	// AllowStaticAddresses: claims may choose a static MAC or static IPs
	// (the admin's ClusterNetwork spec.allowStaticAddresses, or the
	// PodNetwork annotation ncv1.AnnotationAllowStaticAddresses).
	AllowStaticAddresses bool
	// Bandwidth is the network's bandwidth per node, published as the
	// device's consumable capacity (nil: none; conf/bandwidth).
	Bandwidth *bandwidth.Policy
	// StatusIgnored says why the object's status.config, which is not what
	// this node runs, differs from what the node rendered ("" when equal).
	StatusIgnored string
	// Backing is, for a NetworkAttachmentDefinition netclass-controller
	// generated (FromNAD), the network object it stands for: the
	// attachments made through the NAD are on that network, and a policy
	// scope naming it covers them (nil otherwise).
	Backing *attachment.NetworkRef
	// DSCPPolicy is the DSCP values its attachments may send (the
	// config's dscpPolicy, an admin's; nil: any): the rules NetworkQoS
	// gives them must keep to it too.
	DSCPPolicy *qos.DSCPPolicy

	holder netspec.Holder
}

// Offer is what one published device stands for: a network, and for an
// SR-IOV network the VF (PCI address) the device is.
type Offer struct {
	Network  Network
	DeviceID string
}

// Skip says why a network object is not offered on this node.
type Skip struct {
	Ref     attachment.NetworkRef
	Reason  string
	Message string
}

func (s *Skip) Error() string {
	return fmt.Sprintf("%s is not offered: %s: %s", s.Ref, s.Reason, s.Message)
}

// Reasons a network is not offered.
const (
	ReasonOtherProvider     = "OtherProvider"
	ReasonDisabled          = mnv1.PodNetworkReasonAdministrativelyDisabled
	ReasonNotReady          = "NotReady"
	ReasonStaleReady        = "ReadyOutdated"
	ReasonInvalidConfig     = "InvalidConfig"
	ReasonNameTooLong       = ncv1.ReasonNameTooLong
	ReasonNodeNetworkAbsent = "NodeNetworkNotFound"
	ReasonNodeNotReady      = "NodeNetworkNotReady"
	ReasonMasterNotFound    = ncv1.ReasonMasterNotFound
	ReasonSegmentConflict   = ncv1.ReasonSegmentConflict
	ReasonNoClusterNetwork  = ncv1.ReasonClusterNetworkNotFound
	ReasonNotAllowed        = ncv1.ReasonNotAllowed
	ReasonDeleting          = "Deleting"
)

// deleting skips an object being deleted: its finalizer (contract.FinalizerInUse) keeps it,
// and its segment, while claims use it, but no new attachment is made to it.
func deleting(ref attachment.NetworkRef, obj metav1.Object) *Skip {
	if obj.GetDeletionTimestamp() == nil {
		return nil
	}
	return &Skip{Ref: ref, Reason: ReasonDeleting, Message: "the object is being deleted; it stays while ResourceClaims use it"}
}

// mainParams is what netclass reads from a main-plugin configuration.
type mainParams struct {
	Type     string `json:"type"`
	Master   string `json:"master"`
	VNI      int    `json:"vni"`
	VLANID   int    `json:"vlanId"`
	DeviceID string `json:"deviceID"`
	// DSCPPolicy is the admin's (validated by netconf above).
	DSCPPolicy *qos.DSCPPolicy `json:"dscpPolicy"`
}

// FromPodNetwork describes a PodNetwork of the class as this node runs it
// (node: what the node resolved for itself, conf/netspec.PodNetworkParameters),
// or says why it is not offered.
func FromPodNetwork(class string, pn *mnv1.PodNetwork, node *netspec.Node) (Network, *Skip) {
	ref := refOf(class, PodNetworkGVK.Group, PodNetworkGVK.Version, PodNetworkGVK.Kind, "", pn.Name)
	skip := func(reason, format string, args ...any) (Network, *Skip) {
		return Network{}, &Skip{Ref: ref, Reason: reason, Message: fmt.Sprintf(format, args...)}
	}
	switch {
	case pn.Spec.Provider != contract.DriverName:
		return skip(ReasonOtherProvider, "provider is %q", pn.Spec.Provider)
	case !pn.Spec.Enabled:
		return skip(ReasonDisabled, "spec.enabled is false")
	}
	if s := deleting(ref, pn); s != nil {
		return Network{}, s
	}
	if s := readiness(ref, pn.Status.Conditions, pn.Generation); s != nil {
		return Network{}, s
	}
	params, err := netspec.PodNetworkParameters(pn.Spec.Parameters.Raw, node)
	if err != nil {
		return Network{}, &Skip{Ref: ref, Reason: ReasonInvalidConfig, Message: err.Error()}
	}
	bw, err := bandwidth.ForPodNetwork(pn.Annotations)
	if err != nil {
		return Network{}, &Skip{Ref: ref, Reason: ReasonInvalidConfig, Message: err.Error()}
	}
	n, s := describe(ref, pn.Labels, params, "")
	n.holder = netspec.PodNetworkHolder(pn)
	n.AllowStaticAddresses = pn.Annotations[ncv1.AnnotationAllowStaticAddresses] == "true"
	n.Bandwidth = bw
	return n, s
}

// FromNetwork describes a Network of the class, given its ClusterNetwork and
// the NodeNetwork of that ClusterNetwork on this node (nil when there is none),
// or says why it is not offered. The config is rendered here from the specs
// (conf/netspec: the tenant IPAM policy, the NodeNetwork's options, the
// underlay device and address this node resolved, its address block); the
// Network's status.config, which anyone allowed to write the status could
// have set, is never run. A Network the ClusterNetwork does not let in (its
// namespace's labels from ns) is not offered, whatever its status says.
func FromNetwork(class string, n *ncv1.Network, cn *ncv1.ClusterNetwork, nodeNet *ncv1.NodeNetwork, index int, ns netspec.NamespaceLabels) (Network, *Skip) {
	ref := refOf(class, NetworkGVK.Group, NetworkGVK.Version, NetworkGVK.Kind, n.Namespace, n.Name)
	if s := deleting(ref, n); s != nil {
		return Network{}, s
	}
	if s := readiness(ref, n.Status.Conditions, n.Generation); s != nil {
		return Network{}, s
	}
	if cn == nil {
		return Network{}, &Skip{Ref: ref, Reason: ReasonNoClusterNetwork,
			Message: fmt.Sprintf("ClusterNetwork %s does not exist", n.Spec.ClusterNetworkName)}
	}
	if msg := netspec.NotPermitted(n, cn, ns); msg != "" {
		return Network{}, &Skip{Ref: ref, Reason: ReasonNotAllowed, Message: msg}
	}
	if nodeNet == nil {
		return Network{}, &Skip{Ref: ref, Reason: ReasonNodeNetworkAbsent,
			Message: fmt.Sprintf("no NodeNetwork of ClusterNetwork %s for this node", n.Spec.ClusterNetworkName)}
	}
	if c := meta.FindStatusCondition(nodeNet.Status.Conditions, ncv1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		return Network{}, &Skip{Ref: ref, Reason: ReasonNodeNotReady,
			Message: fmt.Sprintf("NodeNetwork %s is not Ready%s", nodeNet.Name, conditionText(c))}
	}
	raw, err := netspec.Network(n, cn, &nodeNet.Spec.Options, nodeFactsOf(nodeNet, index))
	if err != nil {
		return Network{}, &Skip{Ref: ref, Reason: ReasonInvalidConfig, Message: err.Error()}
	}
	bw, err := bandwidth.ForNetwork(n, cn) // valid: netspec.Network checked it
	if err != nil {
		return Network{}, &Skip{Ref: ref, Reason: ReasonInvalidConfig, Message: err.Error()}
	}
	out, s := describe(ref, n.Labels, raw, n.Spec.ClusterNetworkName)
	out.holder = netspec.NetworkHolder(n, cn, ns)
	out.Bandwidth = bw
	out.AllowStaticAddresses = cn.Spec.AllowStaticAddresses
	out.StatusIgnored = statusDiffers(n, cn)
	return out, s
}

// statusDiffers compares status.config with the cluster-wide rendering of the
// specs (what the controller publishes) and says why it is ignored, or "".
func statusDiffers(n *ncv1.Network, cn *ncv1.ClusterNetwork) string {
	if n.Status.Config == nil || len(n.Status.Config.Raw) == 0 {
		return ""
	}
	want, err := netspec.Network(n, cn, nil, nil)
	if err != nil {
		return ""
	}
	var w, g any
	if json.Unmarshal(want, &w) == nil && json.Unmarshal(n.Status.Config.Raw, &g) == nil && reflect.DeepEqual(w, g) {
		return ""
	}
	return "status.config differs from what the specs render (stale, or written by someone else); the node runs its own rendering"
}

func refOf(class, group, version, kind, namespace, name string) attachment.NetworkRef {
	return attachment.NetworkRef{Class: class, Group: group, Version: version, Kind: kind, Namespace: namespace, Name: name}
}

// readiness accepts an object whose Ready condition is True for its current generation.
func readiness(ref attachment.NetworkRef, conds []metav1.Condition, generation int64) *Skip {
	c := meta.FindStatusCondition(conds, mnv1.PodNetworkConditionReady)
	switch {
	case c == nil || c.Status != metav1.ConditionTrue:
		return &Skip{Ref: ref, Reason: ReasonNotReady, Message: "Ready is not True" + conditionText(c)}
	case c.ObservedGeneration != 0 && c.ObservedGeneration < generation:
		return &Skip{Ref: ref, Reason: ReasonStaleReady,
			Message: fmt.Sprintf("Ready was observed at generation %d, the object is at %d", c.ObservedGeneration, generation)}
	}
	return nil
}

func conditionText(c *metav1.Condition) string {
	if c == nil {
		return " (no condition)"
	}
	return fmt.Sprintf(" (%s %s: %s)", c.Status, c.Reason, c.Message)
}

// describe renders and checks the main-plugin configuration.
func describe(ref attachment.NetworkRef, labels map[string]string, params []byte, clusterNetwork string) (Network, *Skip) {
	if len(ref.Name) > contract.MaxNetworkName || len(ref.Namespace) > contract.MaxNetworkName {
		return Network{}, &Skip{Ref: ref, Reason: ReasonNameTooLong,
			Message: fmt.Sprintf("device attribute values are at most %d characters", contract.MaxNetworkName)}
	}
	conf, err := netconf.RenderParameters(ref.CNIName(), contract.CNIVersion, params)
	if err != nil {
		return Network{}, &Skip{Ref: ref, Reason: ReasonInvalidConfig, Message: err.Error()}
	}
	var p mainParams
	if err := json.Unmarshal(conf, &p); err != nil {
		return Network{}, &Skip{Ref: ref, Reason: ReasonInvalidConfig, Message: err.Error()}
	}
	return Network{
		Ref: ref, Labels: labels, Type: p.Type, Config: conf,
		Master: p.Master, ClusterNetwork: clusterNetwork, VNI: p.VNI, VLANID: p.VLANID, DeviceID: p.DeviceID,
		DSCPPolicy: p.DSCPPolicy,
	}, nil
}
