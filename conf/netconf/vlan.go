package netconf

import "github.com/netclass-dev/netclass/conf/field"

// MaxVLANID is the largest usable 802.1Q VLAN ID.
const MaxVLANID = 4094

// VLAN configures netclass-vlan: an 802.1Q sub-interface of master in the pod.
type VLAN struct {
	Common
	Master string `json:"master"`
	VLANID int    `json:"vlanId"`
	MTU    int    `json:"mtu,omitempty"`
	// LinkInContainer means master is inside the pod's netns and the VLAN is
	// created there.
	LinkInContainer bool `json:"linkInContainer,omitempty"`
}

// ParseVLAN decodes and validates a netclass-vlan configuration.
func ParseVLAN(data []byte) (*VLAN, error) {
	c := &VLAN{}
	if err := decode(data, c); err != nil {
		return nil, err
	}
	if err := invalid(TypeVLAN, c.validate()); err != nil {
		return nil, err
	}
	c.Raw = data
	c.finish()
	return c, nil
}

func (c *VLAN) validate() field.Errors {
	errs := c.Common.validate()
	errs.Append(ValidateIfName("master", c.Master))
	if c.VLANID < 1 || c.VLANID > MaxVLANID {
		errs.Add("vlanId", "must be between 1 and %d, got %d", MaxVLANID, c.VLANID)
	}
	errs.Append(validateMTU("mtu", c.MTU))
	return errs
}
