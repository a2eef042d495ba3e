package netconf

import (
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/netclass-dev/netclass/conf/field"
)

// MaxVLANID is the largest usable 802.1Q VLAN ID.
const MaxVLANID = 4094

// VLAN configures netclass-vlan: pods join the VLAN through a bridge on the
// host whose uplink is master's 802.1Q sub-interface (one per VLAN and
// master on a node, shared by its pods), or, with LinkInContainer, through
// a sub-interface of a master inside the pod.
type VLAN struct {
	Common
	Master string `json:"master"`
	VLANID int    `json:"vlanId"`
	MTU    int    `json:"mtu,omitempty"`
	// LinkInContainer means master is inside the pod's netns and the VLAN is
	// created there.
	LinkInContainer bool `json:"linkInContainer,omitempty"`
	// PCPMap replaces the default DSCP-to-PCP map (PCP = DSCP >> 3) of
	// the frames leaving through the VLAN's sub-interface.
	PCPMap *PCPMap `json:"pcpMap,omitempty"`

	// PCP is the map in effect, set by ParseVLAN.
	PCP PCPTable `json:"-"`
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
	c.PCP = DefaultPCPTable()
	if c.PCPMap != nil {
		var perrs field.Errors
		c.PCP, perrs = c.PCPMap.Table("pcpMap")
		errs.Append(perrs...)
	}
	return errs
}

// BridgeName is the VLAN's bridge on the host: the VLAN ID, then a hash of
// master (two masters may carry the same VLAN ID as two segments).
func (c *VLAN) BridgeName() string { return "ncvb" + c.segmentSuffix() }

// DeviceName is master's 802.1Q sub-interface on the host, the bridge's
// uplink.
func (c *VLAN) DeviceName() string { return "ncvl" + c.segmentSuffix() }

// segmentSuffix keeps the names within IFNAMSIZ: at most 4+1+5 characters.
func (c *VLAN) segmentSuffix() string {
	h := fnv.New32a()
	h.Write([]byte(c.Master))
	return fmt.Sprintf("%d.%05x", c.VLANID, h.Sum32()&0xfffff)
}

// VLANDevicesOf names the VLAN bridge and uplink that a device named by
// BridgeName or DeviceName belongs to, and whether the name is one.
func VLANDevicesOf(name string) (bridge, uplink string, ok bool) {
	for _, prefix := range []string{"ncvb", "ncvl"} {
		if s, found := strings.CutPrefix(name, prefix); found && s != "" {
			return "ncvb" + s, "ncvl" + s, true
		}
	}
	return "", "", false
}
