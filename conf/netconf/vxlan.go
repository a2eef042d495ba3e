package netconf

import (
	"fmt"
	"net/netip"

	"github.com/netclass-dev/netclass/conf/field"
)

// VXLAN limits and defaults.
const (
	MaxVNI           = 1<<24 - 1
	DefaultVXLANPort = 4789
	// VXLANOverhead4 and VXLANOverhead6 are the encapsulation overheads over
	// an IPv4 and an IPv6 underlay (outer IP + UDP + VXLAN + inner Ethernet).
	VXLANOverhead4 = 50
	VXLANOverhead6 = 70
)

// VXLAN configures netclass-vxlan: one VXLAN device and one bridge per VNI on
// the host, pods joined to the bridge with veths.
type VXLAN struct {
	Common
	VNI      int      `json:"vni"`
	Master   string   `json:"master,omitempty"`
	Local    string   `json:"local,omitempty"`
	Group    string   `json:"group,omitempty"`
	Remotes  []string `json:"remotes,omitempty"`
	Port     int      `json:"port,omitempty"`
	Learning *bool    `json:"learning,omitempty"`
	MTU      int      `json:"mtu,omitempty"`
	Mac      string   `json:"mac,omitempty"`
	// BandwidthShare puts the attachment in the VNI's shared scheduler.
	BandwidthShare *BandwidthShare `json:"bandwidthShare,omitempty"`

	// Parsed forms, set by ParseVXLAN.
	LocalIP   netip.Addr   `json:"-"`
	GroupIP   netip.Addr   `json:"-"`
	RemoteIPs []netip.Addr `json:"-"`
}

// BridgeName is the per-VNI bridge on the host.
func (c *VXLAN) BridgeName() string { return fmt.Sprintf("ncbr%d", c.VNI) }

// DeviceName is the per-VNI VXLAN device on the host.
func (c *VXLAN) DeviceName() string { return fmt.Sprintf("ncvx%d", c.VNI) }

// IPv6Underlay reports whether the tunnel runs over IPv6.
func (c *VXLAN) IPv6Underlay() bool {
	for _, a := range append([]netip.Addr{c.LocalIP, c.GroupIP}, c.RemoteIPs...) {
		if a.IsValid() {
			return a.Is6()
		}
	}
	return false
}

// ParseVXLAN decodes, validates and defaults a netclass-vxlan configuration.
func ParseVXLAN(data []byte) (*VXLAN, error) {
	c := &VXLAN{}
	if err := decode(data, c); err != nil {
		return nil, err
	}
	if err := invalid(TypeVXLAN, c.validate()); err != nil {
		return nil, err
	}
	c.Raw = data
	c.finish()
	if c.Port == 0 {
		c.Port = DefaultVXLANPort
	}
	if c.Learning == nil {
		on := true
		c.Learning = &on
	}
	return c, nil
}

func (c *VXLAN) validate() field.Errors {
	errs := c.Common.validate()
	if c.VNI < 1 || c.VNI > MaxVNI {
		errs.Add("vni", "must be between 1 and %d, got %d", MaxVNI, c.VNI)
	}
	if c.Master == "" && c.Local == "" {
		errs.Add("master", "master (the underlay device) or local (an underlay address) is required")
	}
	if c.Master != "" {
		errs.Append(ValidateIfName("master", c.Master))
	}
	errs.Append(c.parseAddrs()...)
	if c.Port < 0 || c.Port > 65535 {
		errs.Add("port", "must be between 1 and 65535, got %d", c.Port)
	}
	errs.Append(validateMTU("mtu", c.MTU))
	if c.Mac != "" {
		errs.Append(ValidateMAC("mac", c.Mac))
	}
	if c.BandwidthShare != nil {
		errs.Append(c.BandwidthShare.validate("bandwidthShare")...)
	}
	return errs
}

func (c *VXLAN) parseAddrs() field.Errors {
	var errs field.Errors
	if c.Local != "" {
		a, err := netip.ParseAddr(c.Local)
		if err != nil || !a.IsGlobalUnicast() {
			errs.Add("local", "must be a unicast IP address, got %q", c.Local)
		}
		c.LocalIP = a
	}
	if c.Group != "" {
		a, err := netip.ParseAddr(c.Group)
		if err != nil || !a.IsMulticast() {
			errs.Add("group", "must be a multicast IP address, got %q", c.Group)
		}
		c.GroupIP = a
		if c.Master == "" {
			errs.Add("master", "is required with group: multicast needs the underlay device")
		}
	}
	if c.Group != "" && len(c.Remotes) > 0 {
		errs.Add("remotes", "cannot be combined with group: use multicast or unicast flooding, not both")
	}
	c.RemoteIPs = nil
	family := c.LocalIP
	if !family.IsValid() {
		family = c.GroupIP
	}
	if c.LocalIP.IsValid() && c.GroupIP.IsValid() && c.LocalIP.Is4() != c.GroupIP.Is4() {
		errs.Add("group", "%s is not of the same IP family as local %s", c.GroupIP, c.LocalIP)
	}
	for i, r := range c.Remotes {
		p := field.Path("remotes").Index(i)
		a, err := netip.ParseAddr(r)
		switch {
		case err != nil || a.IsMulticast() || a.IsUnspecified():
			errs.Add(p, "must be a unicast IP address, got %q", r)
			continue
		case !family.IsValid():
			family = a
		case a.Is4() != family.Is4():
			errs.Add(p, "%s is not of the same IP family as the other underlay addresses", a)
		}
		c.RemoteIPs = append(c.RemoteIPs, a)
	}
	return errs
}
