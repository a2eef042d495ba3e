// Package netconf parses and validates the configuration of every netclass
// CNI plugin: pure functions from stdin bytes to typed, defaulted configs, and
// CNI errors that name the field at fault.
package netconf

import (
	"encoding/json"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/netclass-dev/netclass/conf/field"
	"github.com/netclass-dev/netclass/conf/qos"
)

// Plugin types (binary names).
const (
	TypeBridge = "netclass-bridge"
	TypeVLAN   = "netclass-vlan"
	TypeVXLAN  = "netclass-vxlan"
	TypeSRIOV  = "netclass-sriov"
	TypeQoS    = "netclass-qos"
)

// DefaultDataDir holds netclass's per-attachment records and locks.
const DefaultDataDir = "/var/lib/cni/netclass"

// Common holds what every netclass plugin accepts.
type Common struct {
	CNIVersion   string          `json:"cniVersion"`
	Name         string          `json:"name"`
	Type         string          `json:"type"`
	Capabilities map[string]bool `json:"capabilities,omitempty"`
	IPAM         IPAM            `json:"ipam"`
	DNS          types.DNS       `json:"dns"`
	QoS          *qos.Spec       `json:"qos,omitempty"`
	// DSCPPolicy is the DSCP values the attachment's packets may leave
	// with (an admin's: only the static configuration sets it).
	DSCPPolicy *qos.DSCPPolicy `json:"dscpPolicy,omitempty"`
	// PortSecurity guards the attachment's port on the host (bridged
	// attachments only).
	PortSecurity *PortSecurity `json:"portSecurity,omitempty"`
	// DataDir is where attachment records live (default DefaultDataDir).
	DataDir       string         `json:"dataDir,omitempty"`
	RuntimeConfig RuntimeConfig  `json:"runtimeConfig"`
	Args          *Args          `json:"args,omitempty"`
	RawPrevResult map[string]any `json:"prevResult,omitempty"`
	// ValidAttachments is set on GC only.
	ValidAttachments []types.GCAttachment `json:"cni.dev/valid-attachments,omitempty"`

	// Raw is the configuration as received, passed on to IPAM delegates.
	Raw []byte `json:"-"`
	// EffectiveQoS is QoS with runtimeConfig.bandwidth, runtimeConfig.qos and
	// args.cni.qos merged over it, in that order; nil when the attachment has
	// no QoS.
	EffectiveQoS *qos.Spec `json:"-"`
}

// PortSecurity is what the host side of a pod's port enforces whatever the
// pod does: netclass-dra sets it on every bridged attachment it renders.
type PortSecurity struct {
	// SpoofCheck: frames from the pod must carry its MAC and, when IPAM
	// gave it addresses, one of them (or an IPv6 link-local one) as their
	// source; router advertisements, redirects, DHCP server messages and
	// VLAN-tagged frames from the pod are dropped.
	SpoofCheck bool `json:"spoofCheck,omitempty"`
	// StartClosed: the port passes nothing until netclass-dra has put the
	// attachment's NetworkPolicy in place and opened it (needs SpoofCheck
	// and br_netfilter). Only for attachments netclass-dra makes: nothing
	// else opens the port.
	StartClosed bool `json:"startClosed,omitempty"`
}

// IPAM names the delegated IPAM plugin; the rest of its block is passed on untouched.
type IPAM struct {
	Type string `json:"type,omitempty"`
	// present records that an "ipam" object was in the configuration.
	present bool
}

// UnmarshalJSON records the block's presence and reads its type.
func (i *IPAM) UnmarshalJSON(b []byte) error {
	var v struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*i = IPAM{Type: v.Type, present: string(b) != "null"}
	return nil
}

// IsEmpty reports whether no IPAM plugin is configured.
func (i IPAM) IsEmpty() bool { return i.Type == "" }

// RuntimeConfig is what runtimes pass for the capabilities a plugin declares.
type RuntimeConfig struct {
	Bandwidth *qos.RuntimeBandwidth `json:"bandwidth,omitempty"`
	QoS       *qos.Spec             `json:"qos,omitempty"`
	Mac       string                `json:"mac,omitempty"`
	IPs       []string              `json:"ips,omitempty"`
	DeviceID  string                `json:"deviceID,omitempty"`
}

// Args is the `args` convention of CNI (args.cni.*).
type Args struct {
	CNI *CNIArgs `json:"cni,omitempty"`
}

// CNIArgs are the standard `args.cni` keys, and `qos`: the qos block from
// the caller's per-attachment arguments (Multus puts a network selection
// element's `cni-args` here), merged last.
type CNIArgs struct {
	Mac string    `json:"mac,omitempty"`
	IPs []string  `json:"ips,omitempty"`
	QoS *qos.Spec `json:"qos,omitempty"`
}

func (c *Common) validate() field.Errors {
	var errs field.Errors
	if c.Name == "" {
		errs.Add("name", "is required")
	}
	if c.QoS != nil {
		errs.Append(c.QoS.Validate("qos"))
	}
	if c.RuntimeConfig.QoS != nil {
		errs.Append(c.RuntimeConfig.QoS.Validate("runtimeConfig.qos"))
	}
	if bw := c.RuntimeConfig.Bandwidth; bw != nil {
		s := qos.Spec{IngressRate: bw.IngressRate, IngressBurst: bw.IngressBurst, EgressRate: bw.EgressRate, EgressBurst: bw.EgressBurst}
		errs.Append(s.Validate("runtimeConfig.bandwidth"))
	}
	if ps := c.PortSecurity; ps != nil && ps.StartClosed && !ps.SpoofCheck {
		errs.Add("portSecurity.startClosed", "needs portSecurity.spoofCheck: a port is opened only once it is guarded")
	}
	if c.IPAM.Type == "" && c.IPAM.present {
		errs.Add("ipam.type", "is required when ipam is set")
	}
	if c.RuntimeConfig.Mac != "" {
		errs.Append(ValidateMAC("runtimeConfig.mac", c.RuntimeConfig.Mac))
	}
	if c.Args != nil && c.Args.CNI != nil && c.Args.CNI.Mac != "" {
		errs.Append(ValidateMAC("args.cni.mac", c.Args.CNI.Mac))
	}
	if q := c.argsQoS(); q != nil {
		errs.Append(q.Validate("args.cni.qos"))
	}
	errs.Append(c.validateDSCPPolicy())
	return errs
}

// validateDSCPPolicy checks the policy, and every DSCP value the static
// block, the runtime and the caller's arguments ask for against it.
func (c *Common) validateDSCPPolicy() error {
	if err := c.DSCPPolicy.Validate("dscpPolicy"); err != nil || c.DSCPPolicy == nil {
		return err
	}
	var errs field.Errors
	errs.Append(c.DSCPPolicy.Check(c.QoS, "qos"), c.DSCPPolicy.Check(c.RuntimeConfig.QoS, "runtimeConfig.qos"),
		c.DSCPPolicy.Check(c.argsQoS(), "args.cni.qos"))
	return errs.Err()
}

// withoutHostPort refuses portSecurity for an attachment that has no port
// on a host bridge to guard.
func (c *Common) withoutHostPort(why string) error {
	if c.PortSecurity == nil {
		return nil
	}
	return field.Invalid("portSecurity", "is not supported %s: the interface has no port on a host bridge to guard", why)
}

// finish computes derived fields once validation passed.
func (c *Common) finish() {
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	eff := qos.Merge(qos.Merge(qos.WithBandwidth(c.QoS, c.RuntimeConfig.Bandwidth), c.RuntimeConfig.QoS), c.argsQoS())
	if c.DSCPPolicy != nil {
		if eff == nil {
			eff = &qos.Spec{}
		}
		eff.Policy = c.DSCPPolicy
	}
	if !eff.IsZero() {
		c.EffectiveQoS = eff
	}
}

// argsQoS is args.cni.qos, nil when absent.
func (c *Common) argsQoS() *qos.Spec {
	if c.Args == nil || c.Args.CNI == nil {
		return nil
	}
	return c.Args.CNI.QoS
}

// MAC returns the MAC the runtime or configuration asks for, most specific
// first: args.cni.mac, runtimeConfig.mac, CNI_ARGS MAC=, then static; and
// the field it came from, for errors.
func (c *Common) MAC(cniArgsMAC, static string) (string, field.Path) {
	switch {
	case c.Args != nil && c.Args.CNI != nil && c.Args.CNI.Mac != "":
		return c.Args.CNI.Mac, "args.cni.mac"
	case c.RuntimeConfig.Mac != "":
		return c.RuntimeConfig.Mac, "runtimeConfig.mac"
	case cniArgsMAC != "":
		return cniArgsMAC, "CNI_ARGS MAC"
	}
	return static, "mac"
}
