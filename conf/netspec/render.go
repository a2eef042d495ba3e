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

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/netconf"
)

// CNIVersion is the CNI spec version rendered configs are validated against.
const CNIVersion = "1.1.0"

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

// Network renders the plugin config of n under cn in the form of a
// netclass.dev PodNetwork's parameters (type, plugin options, vlanId or vni,
// ipam, qos, mtu; no cniVersion or name) and validates it with conf/netconf.
// nn is the NodeNetwork of cn on the node rendering it: its options (the
// ClusterNetwork's defaults plus what the controller computed for the node,
// such as VXLAN remotes) replace the defaults, and the master it resolved is
// used when the options leave master and local to the node. Without nn (the
// controller) the config is validated with a stand-in master.
func Network(n *ncv1.Network, cn *ncv1.ClusterNetwork, nn *ncv1.NodeNetwork) (map[string]any, error) {
	if msg := TypeMismatch(n, cn); msg != "" {
		return nil, fmt.Errorf("%s", msg)
	}
	cfg := map[string]any{"type": string(cn.Spec.Type)}
	opts := ncv1.Options{}
	if cn.Spec.DefaultOptions != nil {
		opts = *cn.Spec.DefaultOptions
	}
	if nn != nil {
		opts = nn.Spec.Options
	}
	if cn.Spec.Type == ncv1.NetworkTypeVLAN {
		renderVLAN(cfg, n, opts.VLAN)
	} else {
		renderVXLAN(cfg, n, opts.VXLAN)
	}
	if n.Spec.MTU != nil {
		cfg["mtu"] = *n.Spec.MTU
	}
	var cluster, tenant []byte
	if cn.Spec.IPAM != nil {
		cluster = cn.Spec.IPAM.Raw
	}
	if n.Spec.IPAM != nil {
		tenant = n.Spec.IPAM.Raw
	}
	ipam, err := TenantIPAM(cluster, tenant)
	if err != nil {
		return nil, err
	}
	if ipam != nil {
		cfg["ipam"] = ipam
	}
	if q := mergeQoS(cn.Spec.QoS, n.Spec.QoS); len(q) > 0 {
		cfg["qos"] = q
	}
	master := standInMaster
	if nn != nil {
		master = string(nn.Status.Master)
	}
	if cfg["master"] == nil && cfg["local"] == nil && master != "" {
		cfg["master"] = master
	}
	if err := validate(n.Name, cfg); err != nil {
		return nil, err
	}
	if nn == nil && cfg["master"] == standInMaster {
		delete(cfg, "master")
	}
	return cfg, nil
}

func renderVLAN(cfg map[string]any, n *ncv1.Network, o *ncv1.VLANOptions) {
	cfg["vlanId"] = *n.Spec.VLANID
	if o == nil {
		return
	}
	if o.Master != "" {
		cfg["master"] = string(o.Master)
	}
	if o.MTU != nil {
		cfg["mtu"] = *o.MTU
	}
}

func renderVXLAN(cfg map[string]any, n *ncv1.Network, o *ncv1.VXLANOptions) {
	cfg["vni"] = *n.Spec.VNI
	if o == nil {
		return
	}
	for k, v := range map[string]string{"master": string(o.Master), "local": string(o.Local), "group": string(o.Group)} {
		if v != "" {
			cfg[k] = v
		}
	}
	if len(o.Remotes) > 0 {
		remotes := make([]string, len(o.Remotes))
		for i, r := range o.Remotes {
			remotes[i] = string(r)
		}
		sort.Strings(remotes)
		cfg["remotes"] = remotes
	}
	if o.Port != nil {
		cfg["port"] = *o.Port
	}
	if o.Learning != nil {
		cfg["learning"] = *o.Learning
	}
	if o.MTU != nil {
		cfg["mtu"] = *o.MTU
	}
}

// mergeQoS overrides the ClusterNetwork's interface QoS with the Network's, field by field.
func mergeQoS(base, over *ncv1.InterfaceQoS) map[string]any {
	out := map[string]any{}
	for _, q := range []*ncv1.InterfaceQoS{base, over} {
		if q == nil {
			continue
		}
		setInt64(out, "ingressRate", q.IngressRate)
		setInt64(out, "ingressBurst", q.IngressBurst)
		setInt64(out, "egressRate", q.EgressRate)
		setInt64(out, "egressBurst", q.EgressBurst)
		if q.DSCP != nil {
			out["dscp"] = *q.DSCP
		}
	}
	return out
}

func setInt64(m map[string]any, k string, v *int64) {
	if v != nil {
		m[k] = *v
	}
}

// validate checks cfg with conf/netconf as the plugin would parse it.
func validate(name string, cfg map[string]any) error {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("encode config: %w", err)
	}
	if _, err := netconf.RenderParameters(name, CNIVersion, raw); err != nil {
		return fmt.Errorf("rendered config: %w", err)
	}
	return nil
}
