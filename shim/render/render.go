// Package render turns what Prepare knows about one attachment — the network's
// main-plugin configuration, the claim's opaque AttachmentConfig and the
// NetworkQoS rules selecting the pod — into the CNI configuration list that
// netclass-dra executes. It is pure.
package render

import (
	"encoding/json"
	"fmt"

	"github.com/netclass-dev/netclass/api/contract"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/field"
	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/shim/network"
)

// Where the attachments netclass-dra makes keep their state on the node:
// apart from any other CNI user's (a Multus network or cnitool with the same
// network name), so that the CNI GC netclass-dra runs with its own valid
// attachments never removes theirs. An admin's explicit dataDir is kept.
const (
	// StateDir is the plugins' dataDir (attachment records, per-VNI locks).
	StateDir = "/var/lib/cni/netclass-dra"
	// IPAMStateDir is host-local's dataDir (address reservations).
	IPAMStateDir = StateDir + "/networks"
)

// Input is one attachment to render.
type Input struct {
	Network network.Network
	// Config is the request's merged opaque configuration (nil: none).
	Config *contract.AttachmentConfig
	// Rules are the compiled NetworkQoS egress rules for the pod on this network.
	Rules []qos.Rule
	// DeviceID is the SR-IOV VF allocated ("" for other networks): it is
	// passed through the "deviceID" capability, as sriov-cni's is.
	DeviceID string
	// Allocated is the bandwidth the scheduler allocated to the claim on the
	// device (its consumedCapacity "bandwidth", bits/s; 0: none): the
	// ceiling of the attachment's egress (Ceiling).
	Allocated int64
}

// ConfList renders the configuration list: the main plugin with the network's
// qos block merged with the claim's, and — when NetworkQoS rules apply — a
// chained netclass-qos that carries the whole merged block instead, so one
// plugin owns the interface's QoS. Static MAC/IPs are requested through the
// "mac" and "ips" capabilities, whose values the runtime side passes.
func ConfList(in Input) ([]byte, error) {
	if err := StaticAddresses(in.Network, in.Config); err != nil {
		return nil, fmt.Errorf("render %s: %w", in.Network.Ref, err)
	}
	name := in.Network.Ref.CNIName()
	main := map[string]any{}
	if err := json.Unmarshal(in.Network.Config, &main); err != nil {
		return nil, fmt.Errorf("render %s: main plugin configuration: %w", in.Network.Ref, err)
	}
	eff, err := AttachmentQoS(in)
	if err != nil {
		return nil, err
	}
	if err := in.Network.DSCPPolicy.Check(claimQoS(in.Config), "qos"); err != nil {
		return nil, fmt.Errorf("render %s: %w", in.Network.Ref, err)
	}
	delete(main, "qos")
	delete(main, "name")
	delete(main, "cniVersion")
	setCapabilities(main, in.Config, in.DeviceID != "")
	setStateDirs(main)
	setPortSecurity(main)
	if s := Share(in); s != nil {
		main["bandwidthShare"] = s
	}
	list := map[string]any{"cniVersion": contract.CNIVersion, "name": name, "plugins": qosPlugins(main, eff, in.Rules)}
	out, err := json.Marshal(list)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", in.Network.Ref, err)
	}
	if err := Validate(out); err != nil {
		return nil, fmt.Errorf("render %s: %w", in.Network.Ref, err)
	}
	return out, nil
}

// qosPlugins puts the attachment's QoS where one plugin enforces all of
// it: the main plugin, or, when NetworkQoS rules apply, a chained
// netclass-qos carrying the merged block and the network's dscpPolicy.
func qosPlugins(main map[string]any, eff *qos.Spec, rules []qos.Rule) []any {
	if len(rules) == 0 {
		if !eff.IsZero() {
			main["qos"] = eff
		}
		return []any{main}
	}
	chained := map[string]any{"type": netconf.TypeQoS, "qos": WithRules(eff, rules), "dataDir": main["dataDir"]}
	if p, ok := main["dscpPolicy"]; ok {
		chained["dscpPolicy"] = p
		delete(main, "dscpPolicy")
	}
	return []any{main, chained}
}

// claimQoS is the qos of the claim's configuration (nil: none).
func claimQoS(cfg *contract.AttachmentConfig) *qos.Spec {
	if cfg == nil {
		return nil
	}
	return cfg.QoS
}

// StaticAddresses refuses a static MAC or static IPs unless the network allows
// them: a claim could otherwise take over the addresses of another pod on the
// segment (ARP/ND and the switch's learning follow whoever claims them).
func StaticAddresses(n network.Network, cfg *contract.AttachmentConfig) error {
	if cfg == nil || n.AllowStaticAddresses {
		return nil
	}
	var errs field.Errors
	how := fmt.Sprintf("%s does not allow static addresses (an admin allows them with %s)", n.Ref, allowHow(n))
	if cfg.MAC != "" {
		errs.Add("mac", "%s", how)
	}
	if len(cfg.IPs) > 0 {
		errs.Add("ips", "%s", how)
	}
	return errs.Err()
}

func allowHow(n network.Network) string {
	if n.Ref.Kind == network.NetworkGVK.Kind {
		return fmt.Sprintf("spec.allowStaticAddresses on ClusterNetwork %s", n.ClusterNetwork)
	}
	return fmt.Sprintf("the annotation %s: \"true\" on the %s", ncv1.AnnotationAllowStaticAddresses, n.Ref.Kind)
}

// BaseQoS is the attachment's own qos block: the network's, with the
// claim's opaque configuration merged over it (nil: none).
func BaseQoS(n network.Network, cfg *contract.AttachmentConfig) (*qos.Spec, error) {
	var main struct {
		QoS *qos.Spec `json:"qos"`
	}
	if err := json.Unmarshal(n.Config, &main); err != nil {
		return nil, fmt.Errorf("render %s: network qos: %w", n.Ref, err)
	}
	if cfg == nil || cfg.QoS == nil {
		return main.QoS, nil
	}
	return qos.Merge(main.QoS, cfg.QoS), nil
}

// WithRules is the qos an attachment enforces: its base block, with the
// NetworkQoS rules selecting it after the base's own egress rules. Prepare
// renders it into the chained netclass-qos, and netclass-dra's rule agent
// keeps running attachments at it.
func WithRules(base *qos.Spec, rules []qos.Rule) *qos.Spec {
	var own []qos.Rule
	if base != nil {
		own = base.Egress
	}
	return qos.Merge(base, &qos.Spec{Egress: append(append([]qos.Rule{}, own...), rules...)})
}

// setStateDirs puts the state of netclass-dra's attachments under StateDir
// unless the network's config names a place.
func setStateDirs(main map[string]any) {
	if _, ok := main["dataDir"]; !ok {
		main["dataDir"] = StateDir
	}
	if ipam, ok := main["ipam"].(map[string]any); ok && ipam["type"] == "host-local" {
		if _, set := ipam["dataDir"]; !set {
			ipam["dataDir"] = IPAMStateDir
		}
	}
}

// setPortSecurity guards every attachment netclass-dra makes (whatever the
// network's parameters say): the pod's MAC and addresses are enforced (on
// the host at a bridged port, in the pod at the interface's netdev hooks
// otherwise), and the attachment passes nothing until the agent has put its
// NetworkPolicy in place and opened it (ruleagent.Guard), so a pod is never
// up without its policy, whatever happens to the daemon.
func setPortSecurity(main map[string]any) {
	main["portSecurity"] = map[string]any{"spoofCheck": true, "startClosed": true}
}

func setCapabilities(main map[string]any, cfg *contract.AttachmentConfig, deviceID bool) {
	want := map[string]bool{"deviceID": deviceID}
	if cfg != nil {
		want["mac"], want["ips"] = cfg.MAC != "", len(cfg.IPs) > 0
	}
	caps, _ := main["capabilities"].(map[string]any)
	for name, on := range want {
		if !on {
			continue
		}
		if caps == nil {
			caps = map[string]any{}
		}
		caps[name] = true
	}
	if caps != nil {
		main["capabilities"] = caps
	}
}

// Validate parses a rendered list and every plugin in it with conf/netconf,
// the parsers the plugins themselves use.
func Validate(confList []byte) error {
	var list struct {
		CNIVersion string            `json:"cniVersion"`
		Name       string            `json:"name"`
		Plugins    []json.RawMessage `json:"plugins"`
	}
	if err := json.Unmarshal(confList, &list); err != nil {
		return fmt.Errorf("configuration list: %w", err)
	}
	if list.Name == "" || list.CNIVersion == "" || len(list.Plugins) == 0 {
		return fmt.Errorf("configuration list: name, cniVersion and at least one plugin are required")
	}
	for i, p := range list.Plugins {
		obj := map[string]any{}
		if err := json.Unmarshal(p, &obj); err != nil {
			return fmt.Errorf("plugins[%d]: %w", i, err)
		}
		obj["name"], obj["cniVersion"] = list.Name, list.CNIVersion
		b, err := json.Marshal(obj)
		if err != nil {
			return fmt.Errorf("plugins[%d]: %w", i, err)
		}
		if _, err := netconf.Parse(b); err != nil {
			return fmt.Errorf("plugins[%d] (%v): %w", i, obj["type"], err)
		}
	}
	return nil
}
