// Package netspec turns netclass's network objects into what netclass runs:
// the main-plugin parameters of a Network (from its ClusterNetwork, its own
// spec and, on a node, that node's NodeNetwork), the IPAM a tenant may choose,
// and which object owns a layer-2 segment. It is pure, and it is the one place
// both netclass-controller (conditions) and netclass-dra (what it executes)
// take these decisions from, so they never disagree: the node daemon renders
// from the objects' specs and never executes a config it did not render.
package netspec

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/netclass-dev/netclass/api/contract"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/bandwidth"
	"github.com/netclass-dev/netclass/conf/netconf"
)

// standInMaster takes the place of a master left to each node when a config is
// validated without a node (the controller): master and local are node-specific.
const standInMaster = "node-master"

// TypeMismatch returns why n's segment does not fit cn's type, or "".
func TypeMismatch(n *ncv1.Network, cn *ncv1.ClusterNetwork) string {
	switch cn.Spec.Type {
	case ncv1.NetworkTypeVLAN:
		if n.Spec.VLANID == nil {
			return fmt.Sprintf("ClusterNetwork %s is of type %s: the Network needs spec.vlanId, not spec.vni", cn.Name, cn.Spec.Type)
		}
	case ncv1.NetworkTypeVXLAN:
		if n.Spec.VNI == nil {
			return fmt.Sprintf("ClusterNetwork %s is of type %s: the Network needs spec.vni, not spec.vlanId", cn.Name, cn.Spec.Type)
		}
	default:
		return fmt.Sprintf("ClusterNetwork %s has the unknown type %q", cn.Name, cn.Spec.Type)
	}
	return ""
}

// mainConfig is the main-plugin configuration of a Network, in the form of a
// netclass.dev PodNetwork's parameters (no cniVersion or name): the keys of
// netclass-vlan and netclass-vxlan that a Network can set (conf/netconf).
type mainConfig struct {
	Type     string           `json:"type"`
	VLANID   *int32           `json:"vlanId,omitempty"`
	VNI      *int32           `json:"vni,omitempty"`
	Master   string           `json:"master,omitempty"`
	Local    string           `json:"local,omitempty"`
	Group    string           `json:"group,omitempty"`
	Remotes  []string         `json:"remotes,omitempty"`
	Port     *int32           `json:"port,omitempty"`
	Learning *bool            `json:"learning,omitempty"`
	MTU      *int32           `json:"mtu,omitempty"`
	PCPMap   map[string]int32 `json:"pcpMap,omitempty"`
	IPAM     json.RawMessage  `json:"ipam,omitempty"`
	QoS      *interfaceQoS    `json:"qos,omitempty"`
	// DSCPPolicy is the ClusterNetwork's, which the plugins enforce (the
	// same JSON shape as conf/qos.DSCPPolicy).
	DSCPPolicy *ncv1.DSCPPolicy `json:"dscpPolicy,omitempty"`
}

// interfaceQoS is the interface-wide part of the plugins' qos block.
type interfaceQoS struct {
	IngressRate  *int64 `json:"ingressRate,omitempty"`
	IngressBurst *int64 `json:"ingressBurst,omitempty"`
	EgressRate   *int64 `json:"egressRate,omitempty"`
	EgressBurst  *int64 `json:"egressBurst,omitempty"`
	DSCP         *int32 `json:"dscp,omitempty"`
	Queue        string `json:"queue,omitempty"`
}

// Network renders the main-plugin config of n under cn, in the form of a
// netclass.dev PodNetwork's parameters, and validates it with conf/netconf.
// opts are the options in effect: on a node, its NodeNetwork's (the
// ClusterNetwork's defaults plus what the controller decided for the node,
// such as automatic VXLAN remotes); nil means the ClusterNetwork's defaults.
// node holds what the rendering node resolved itself (its underlay device
// and address, used where the options leave them to the node, and its
// index, which picks its block of host-local ranges). Without a node (the
// controller) the config is validated with a stand-in master and block 0.
func Network(n *ncv1.Network, cn *ncv1.ClusterNetwork, opts *ncv1.Options, node *Node) (json.RawMessage, error) {
	if msg := TypeMismatch(n, cn); msg != "" {
		return nil, fmt.Errorf("%s", msg)
	}
	if _, err := bandwidth.ForNetwork(n, cn); err != nil {
		return nil, err
	}
	if opts == nil {
		opts = &ncv1.Options{}
		if cn.Spec.DefaultOptions != nil {
			opts = cn.Spec.DefaultOptions
		}
	}
	cfg := mainConfig{Type: string(cn.Spec.Type)}
	if cn.Spec.Type == ncv1.NetworkTypeVLAN {
		renderVLAN(&cfg, n, opts.VLAN, node)
	} else {
		renderVXLAN(&cfg, n, opts.VXLAN, node)
	}
	if n.Spec.MTU != nil {
		cfg.MTU = n.Spec.MTU
	}
	var err error
	if cfg.IPAM, err = networkIPAM(n, cn, node); err != nil {
		return nil, err
	}
	cfg.QoS = mergeQoS(cn.Spec.QoS, n.Spec.QoS)
	cfg.DSCPPolicy = cn.Spec.DSCPPolicy
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	if err := validate(n.Name, raw); err != nil {
		return nil, err
	}
	if node == nil && cfg.Master == standInMaster {
		cfg.Master = "" // left to each node
		return json.Marshal(cfg)
	}
	return raw, nil
}

// networkIPAM is the Network's IPAM (TenantIPAM), narrowed to the node's block.
func networkIPAM(n *ncv1.Network, cn *ncv1.ClusterNetwork, node *Node) (json.RawMessage, error) {
	var cluster, tenant []byte
	if cn.Spec.IPAM != nil {
		cluster = cn.Spec.IPAM.Raw
	}
	if n.Spec.IPAM != nil {
		tenant = n.Spec.IPAM.Raw
	}
	ipam, err := TenantIPAM(cluster, tenant)
	if err != nil || ipam == nil {
		return nil, err
	}
	raw, err := json.Marshal(ipam)
	if err != nil {
		return nil, fmt.Errorf("encode ipam: %w", err)
	}
	return carve(raw, node)
}

// nodeMaster is the master of a node rendering a network that leaves it to
// the node (a stand-in without a node).
func nodeMaster(node *Node) string {
	if node == nil {
		return standInMaster
	}
	return node.Master
}

func renderVLAN(cfg *mainConfig, n *ncv1.Network, o *ncv1.VLANOptions, node *Node) {
	cfg.VLANID = n.Spec.VLANID
	if o != nil {
		cfg.Master, cfg.MTU, cfg.PCPMap = string(o.Master), o.MTU, o.PCPMap
	}
	if cfg.Master == "" {
		cfg.Master = nodeMaster(node)
	}
}

func renderVXLAN(cfg *mainConfig, n *ncv1.Network, o *ncv1.VXLANOptions, node *Node) {
	cfg.VNI = n.Spec.VNI
	if o == nil {
		o = &ncv1.VXLANOptions{}
	}
	cfg.Master, cfg.Local, cfg.Group = string(o.Master), string(o.Local), string(o.Group)
	cfg.Port, cfg.Learning, cfg.MTU = o.Port, o.Learning, o.MTU
	for _, r := range o.Remotes {
		cfg.Remotes = append(cfg.Remotes, string(r))
	}
	sort.Strings(cfg.Remotes)
	if cfg.Master == "" && cfg.Local == "" {
		cfg.Master = nodeMaster(node)
	}
	// The address the node resolved (NodeNetwork status.localAddress) is the
	// one the tunnel uses: the plugin and the status never disagree.
	if cfg.Local == "" && node != nil && node.Local.IsValid() {
		cfg.Local = node.Local.String()
	}
}

// mergeQoS overrides the ClusterNetwork's interface QoS with the Network's, field by field.
func mergeQoS(base, over *ncv1.InterfaceQoS) *interfaceQoS {
	out := interfaceQoS{}
	for _, q := range []*ncv1.InterfaceQoS{base, over} {
		if q == nil {
			continue
		}
		out.IngressRate = or(q.IngressRate, out.IngressRate)
		out.IngressBurst = or(q.IngressBurst, out.IngressBurst)
		out.EgressRate = or(q.EgressRate, out.EgressRate)
		out.EgressBurst = or(q.EgressBurst, out.EgressBurst)
		out.DSCP = or(q.DSCP, out.DSCP)
		if q.Queue != "" {
			out.Queue = string(q.Queue)
		}
	}
	if out == (interfaceQoS{}) {
		return nil
	}
	return &out
}

func or[T any](v, fallback *T) *T {
	if v != nil {
		return v
	}
	return fallback
}

// validate checks cfg with conf/netconf as the plugin would parse it.
func validate(name string, raw []byte) error {
	if _, err := netconf.RenderParameters(name, contract.CNIVersion, raw); err != nil {
		return fmt.Errorf("rendered config: %w", err)
	}
	return nil
}
