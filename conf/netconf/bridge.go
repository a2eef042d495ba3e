package netconf

import (
	"github.com/netclass-dev/netclass/conf/field"
)

// DefaultBridge is the bridge netclass-bridge uses when none is named; it is
// not the upstream plugin's cni0, so the two never share a bridge by accident.
const DefaultBridge = "netclass0"

// Bridge configures netclass-bridge. Option names follow the upstream bridge plugin.
type Bridge struct {
	Common
	BrName      string `json:"bridge"`
	IsGateway   bool   `json:"isGateway"`
	IsDefaultGW bool   `json:"isDefaultGateway"`
	IPMasq      bool   `json:"ipMasq"`
	HairpinMode bool   `json:"hairpinMode"`
	PromiscMode bool   `json:"promiscMode"`
	MTU         int    `json:"mtu"`
	Mac         string `json:"mac"`
	MacSpoofChk bool   `json:"macspoofchk"`
}

// ParseBridge decodes, validates and defaults a netclass-bridge configuration.
func ParseBridge(data []byte) (*Bridge, error) {
	c := &Bridge{}
	if err := decode(data, c); err != nil {
		return nil, err
	}
	if err := invalid(TypeBridge, c.validate()); err != nil {
		return nil, err
	}
	c.Raw = data
	c.finish()
	if c.BrName == "" {
		c.BrName = DefaultBridge
	}
	if c.IsDefaultGW {
		c.IsGateway = true // a default gateway is a gateway (as upstream)
	}
	return c, nil
}

func (c *Bridge) validate() field.Errors {
	errs := c.Common.validate()
	if c.BrName != "" {
		errs.Append(ValidateIfName("bridge", c.BrName))
	}
	errs.Append(validateMTU("mtu", c.MTU))
	if c.Mac != "" {
		errs.Append(ValidateMAC("mac", c.Mac))
	}
	if c.IPMasq && c.IPAM.IsEmpty() {
		errs.Add("ipMasq", "needs ipam: there is no address to masquerade")
	}
	if c.IsGateway && c.IPAM.IsEmpty() {
		errs.Add("isGateway", "needs ipam: the gateway address comes from it")
	}
	if c.IsDefaultGW && c.IPAM.IsEmpty() {
		errs.Add("isDefaultGateway", "needs ipam: the gateway address comes from it")
	}
	return errs
}
