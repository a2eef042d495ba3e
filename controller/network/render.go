package network

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"

	"k8s.io/apimachinery/pkg/runtime"

	netclassv1alpha1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/netconf"
)

// CNIVersion is the CNI spec version rendered configs are validated against.
const CNIVersion = "1.1.0"

// standInMaster takes the place of a master left to each node (the NodeNetwork's resolved
// device) when a rendered config is validated: master and local are node-specific.
const standInMaster = "node-master"

// TypeMismatch returns why net's segment does not fit cn's type, or "".
func TypeMismatch(net *netclassv1alpha1.Network, cn *netclassv1alpha1.ClusterNetwork) string {
	switch cn.Spec.Type {
	case netclassv1alpha1.NetworkTypeVLAN:
		if net.Spec.VLANID == nil {
			return fmt.Sprintf("ClusterNetwork %s is of type %s: the Network needs spec.vlanId, not spec.vni", cn.Name, cn.Spec.Type)
		}
	case netclassv1alpha1.NetworkTypeVXLAN:
		if net.Spec.VNI == nil {
			return fmt.Sprintf("ClusterNetwork %s is of type %s: the Network needs spec.vni, not spec.vlanId", cn.Name, cn.Spec.Type)
		}
	default:
		return fmt.Sprintf("ClusterNetwork %s has the unknown type %q", cn.Name, cn.Spec.Type)
	}
	return ""
}

// Render builds the plugin config of net under cn, in the form of a netclass.dev
// PodNetwork's parameters (type, plugin options, vlanId or vni, ipam, qos, mtu; no
// cniVersion or name), and validates it with conf/netconf. The caller checks TypeMismatch
// first.
func Render(net *netclassv1alpha1.Network, cn *netclassv1alpha1.ClusterNetwork) (map[string]any, error) {
	cfg := map[string]any{"type": string(cn.Spec.Type)}
	opts := netclassv1alpha1.Options{}
	if cn.Spec.DefaultOptions != nil {
		opts = *cn.Spec.DefaultOptions
	}
	if cn.Spec.Type == netclassv1alpha1.NetworkTypeVLAN {
		renderVLAN(cfg, net, opts.VLAN)
	} else {
		renderVXLAN(cfg, net, opts.VXLAN)
	}
	if net.Spec.MTU != nil {
		cfg["mtu"] = *net.Spec.MTU
	}
	if err := renderIPAM(cfg, net, cn); err != nil {
		return nil, err
	}
	if q := mergeQoS(cn.Spec.QoS, net.Spec.QoS); len(q) > 0 {
		cfg["qos"] = q
	}
	if err := Validate(net.Name, cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

func renderVLAN(cfg map[string]any, net *netclassv1alpha1.Network, o *netclassv1alpha1.VLANOptions) {
	cfg["vlanId"] = *net.Spec.VLANID
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

func renderVXLAN(cfg map[string]any, net *netclassv1alpha1.Network, o *netclassv1alpha1.VXLANOptions) {
	cfg["vni"] = *net.Spec.VNI
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

// renderIPAM: the Network's ipam replaces the ClusterNetwork's as a whole.
func renderIPAM(cfg map[string]any, net *netclassv1alpha1.Network, cn *netclassv1alpha1.ClusterNetwork) error {
	raw := cn.Spec.IPAM
	field := "ClusterNetwork spec.ipam"
	if net.Spec.IPAM != nil {
		raw, field = net.Spec.IPAM, "spec.ipam"
	}
	if raw == nil || len(raw.Raw) == 0 {
		return nil
	}
	var ipam map[string]any
	if err := json.Unmarshal(raw.Raw, &ipam); err != nil {
		return fmt.Errorf("%s: must be a JSON object: %w", field, err)
	}
	cfg["ipam"] = ipam
	return nil
}

// mergeQoS overrides the ClusterNetwork's interface QoS with the Network's, field by field.
func mergeQoS(base, over *netclassv1alpha1.InterfaceQoS) map[string]any {
	out := map[string]any{}
	for _, q := range []*netclassv1alpha1.InterfaceQoS{base, over} {
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

// Validate checks cfg with conf/netconf as the plugin would see it on a node, master
// standing in for the node's device when the config leaves it (and local) to the node.
func Validate(name string, cfg map[string]any) error {
	check := make(map[string]any, len(cfg)+1)
	for k, v := range cfg {
		check[k] = v
	}
	if check["master"] == nil && check["local"] == nil {
		check["master"] = standInMaster
	}
	raw, err := json.Marshal(check)
	if err != nil {
		return fmt.Errorf("encode config: %w", err)
	}
	if _, err := netconf.RenderParameters(name, CNIVersion, raw); err != nil {
		return fmt.Errorf("rendered config: %w", err)
	}
	return nil
}

// ToRaw encodes a rendered config for status.config.
func ToRaw(cfg map[string]any) (*runtime.RawExtension, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	return &runtime.RawExtension{Raw: raw}, nil
}

// SameConfig compares two configs as JSON values (the API server may re-encode them).
func SameConfig(a, b *runtime.RawExtension) bool {
	if a == nil || b == nil || len(a.Raw) == 0 || len(b.Raw) == 0 {
		return (a == nil || len(a.Raw) == 0) == (b == nil || len(b.Raw) == 0)
	}
	var va, vb any
	if json.Unmarshal(a.Raw, &va) != nil || json.Unmarshal(b.Raw, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}
