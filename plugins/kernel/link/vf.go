package link

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// VFConfig is what a PF sets on one of its SR-IOV VFs (`ip link set <pf>
// vf N ...`). Nil fields are left as they are.
type VFConfig struct {
	MAC       net.HardwareAddr
	VLAN      *VFVLAN
	SpoofChk  *bool
	Trust     *bool
	LinkState *uint32 // netlink.VF_LINK_STATE_AUTO, _ENABLE or _DISABLE
	Rate      *VFRate
}

// VFVLAN is a VF's port VLAN.
type VFVLAN struct {
	ID    int
	QoS   int
	Proto uint16 // unix.ETH_P_8021Q or unix.ETH_P_8021AD; drivers may report 0 for 802.1Q
}

// VFRate is a VF's transmit rate limits in Mbit/s (0: none).
type VFRate struct {
	MinMbps uint32
	MaxMbps uint32
}

// VF reads the settings of VF index from the PF's IFLA_VFINFO_LIST.
func VF(pf string, index int) (VFConfig, error) {
	l, err := ByName(pf) // the request asks for VF information (RTEXT_FILTER_VF)
	if err != nil {
		return VFConfig{}, err
	}
	for _, v := range l.Attrs().Vfs {
		if v.ID == index {
			return fromVfInfo(v), nil
		}
	}
	return VFConfig{}, fmt.Errorf("PF %q reports no VF %d (it lists %d)", pf, index, len(l.Attrs().Vfs))
}

func fromVfInfo(v netlink.VfInfo) VFConfig {
	spoof, trust, state := v.Spoofchk, v.Trust == 1, v.LinkState
	return VFConfig{
		MAC:       v.Mac,
		VLAN:      &VFVLAN{ID: v.Vlan, QoS: v.Qos, Proto: uint16(v.VlanProto)}, // netlink decodes it to host order
		SpoofChk:  &spoof,
		Trust:     &trust,
		LinkState: &state,
		Rate:      &VFRate{MinMbps: v.MinTxRate, MaxMbps: v.MaxTxRate},
	}
}

// SetVF applies the non-nil fields of c to VF index through the PF, in the
// order mac, vlan, rate, spoofchk, trust, link state; it stops at the first
// failure, naming the setting.
func SetVF(pf string, index int, c VFConfig) error {
	l, err := ByName(pf)
	if err != nil {
		return err
	}
	steps := []struct {
		what string
		set  bool
		do   func() error
	}{
		{"mac", c.MAC != nil, func() error { return netlink.LinkSetVfHardwareAddr(l, index, c.MAC) }},
		{"vlan", c.VLAN != nil, func() error { return setVFVLAN(l, index, c.VLAN) }},
		{"rate", c.Rate != nil, func() error { return netlink.LinkSetVfRate(l, index, int(c.Rate.MinMbps), int(c.Rate.MaxMbps)) }},
		{"spoofchk", c.SpoofChk != nil, func() error { return netlink.LinkSetVfSpoofchk(l, index, *c.SpoofChk) }},
		{"trust", c.Trust != nil, func() error { return netlink.LinkSetVfTrust(l, index, *c.Trust) }},
		{"link state", c.LinkState != nil, func() error { return netlink.LinkSetVfState(l, index, *c.LinkState) }},
	}
	for _, s := range steps {
		if !s.set {
			continue
		}
		if err := s.do(); err != nil {
			return fmt.Errorf("set %s of VF %d on PF %q: %w", s.what, index, pf, err)
		}
	}
	return nil
}

// setVFVLAN uses the plain VLAN request (802.1Q, every driver) unless the
// VLAN is an 802.1ad one.
func setVFVLAN(l netlink.Link, index int, v *VFVLAN) error {
	if v.ID == 0 || v.Proto == 0 || v.Proto == unix.ETH_P_8021Q {
		return netlink.LinkSetVfVlanQos(l, index, v.ID, v.QoS)
	}
	return netlink.LinkSetVfVlanQosProto(l, index, v.ID, v.QoS, int(v.Proto))
}
