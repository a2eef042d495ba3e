package sriov

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
)

// vfState is a set of PF-side VF settings: what an attachment asks for, or
// the originals its record keeps for DEL. Nil (or empty) fields are
// settings the attachment leaves alone.
type vfState struct {
	MAC       string  `json:"mac,omitempty"`
	VLAN      *vfVLAN `json:"vlan,omitempty"`
	SpoofChk  *bool   `json:"spoofchk,omitempty"`
	Trust     *bool   `json:"trust,omitempty"`
	LinkState *uint32 `json:"linkState,omitempty"` // netlink.VF_LINK_STATE_*
	MinTxRate *uint32 `json:"minTxRate,omitempty"` // Mbit/s
	MaxTxRate *uint32 `json:"maxTxRate,omitempty"` // Mbit/s
}

// vfVLAN is a VF's port VLAN; Proto is an ethertype (0 reads as 802.1Q).
type vfVLAN struct {
	ID    int    `json:"id"`
	QoS   int    `json:"qos"`
	Proto uint16 `json:"proto"`
}

func (s vfState) isZero() bool {
	return s.MAC == "" && s.VLAN == nil && s.SpoofChk == nil && s.Trust == nil &&
		s.LinkState == nil && s.MinTxRate == nil && s.MaxTxRate == nil
}

// wantedVF is what the configuration asks of the VF through its PF.
func wantedVF(c *netconf.SRIOV, mac net.HardwareAddr) vfState {
	var w vfState
	if mac != nil {
		w.MAC = mac.String()
	}
	if c.VLAN != nil {
		w.VLAN = &vfVLAN{ID: *c.VLAN, QoS: deref(c.VLANQoS), Proto: unix.ETH_P_8021Q}
		if c.VLANProto == "802.1ad" {
			w.VLAN.Proto = unix.ETH_P_8021AD
		}
	}
	w.SpoofChk, w.Trust = onOff(c.SpoofChk), onOff(c.Trust)
	if st, ok := linkStates[c.LinkState]; ok {
		w.LinkState = &st
	}
	w.MinTxRate, w.MaxTxRate = mbps(c.MinTxRate), mbps(c.MaxTxRate)
	if m := c.OffloadedEgressMbps(); m > 0 {
		v := uint32(m)
		w.MaxTxRate = &v
	}
	return w
}

var linkStates = map[string]uint32{
	netconf.LinkStateAuto:    netlink.VF_LINK_STATE_AUTO,
	netconf.LinkStateEnable:  netlink.VF_LINK_STATE_ENABLE,
	netconf.LinkStateDisable: netlink.VF_LINK_STATE_DISABLE,
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

func onOff(s string) *bool {
	if s == "" {
		return nil
	}
	v := s == "on"
	return &v
}

func mbps(p *int) *uint32 {
	if p == nil {
		return nil
	}
	v := uint32(*p) // netconf bounds it to 32 bits
	return &v
}

// settings splits s into one state per setting (both rates in one).
func (s vfState) settings() []vfState {
	var out []vfState
	add := func(v vfState) {
		if !v.isZero() {
			out = append(out, v)
		}
	}
	add(vfState{MAC: s.MAC})
	add(vfState{VLAN: s.VLAN})
	add(vfState{MinTxRate: s.MinTxRate, MaxTxRate: s.MaxTxRate})
	add(vfState{SpoofChk: s.SpoofChk})
	add(vfState{Trust: s.Trust})
	add(vfState{LinkState: s.LinkState})
	return out
}

// only returns s's values of the settings w sets: the originals to save.
func (s vfState) only(w vfState) vfState {
	var o vfState
	if w.MAC != "" {
		o.MAC = s.MAC
	}
	keep(&o.VLAN, s.VLAN, w.VLAN)
	keep(&o.SpoofChk, s.SpoofChk, w.SpoofChk)
	keep(&o.Trust, s.Trust, w.Trust)
	keep(&o.LinkState, s.LinkState, w.LinkState)
	keep(&o.MinTxRate, s.MinTxRate, w.MinTxRate)
	keep(&o.MaxTxRate, s.MaxTxRate, w.MaxTxRate)
	return o
}

func keep[T any](dst **T, have, want *T) {
	if want != nil && have != nil {
		v := *have
		*dst = &v
	}
}

// diff lists how the VF's actual settings differ from what w asks.
func (w vfState) diff(actual vfState) []string {
	var out []string
	if w.MAC != "" && !sameMAC(w.MAC, actual.MAC) {
		out = append(out, fmt.Sprintf("mac is %s, want %s", actual.MAC, w.MAC))
	}
	if w.VLAN != nil && (actual.VLAN == nil || !w.VLAN.equal(*actual.VLAN)) {
		out = append(out, fmt.Sprintf("vlan is %s, want %s", actual.VLAN, w.VLAN))
	}
	out = appendDiff(out, "spoofchk", w.SpoofChk, actual.SpoofChk)
	out = appendDiff(out, "trust", w.Trust, actual.Trust)
	out = appendDiff(out, "link state", w.LinkState, actual.LinkState)
	out = appendDiff(out, "min_tx_rate", w.MinTxRate, actual.MinTxRate)
	return appendDiff(out, "max_tx_rate", w.MaxTxRate, actual.MaxTxRate)
}

func appendDiff[T comparable](out []string, what string, want, have *T) []string {
	switch {
	case want == nil:
		return out
	case have == nil:
		return append(out, fmt.Sprintf("%s is not reported, want %v", what, *want))
	case *have != *want:
		return append(out, fmt.Sprintf("%s is %v, want %v", what, *have, *want))
	}
	return out
}

func sameMAC(a, b string) bool {
	x, errA := net.ParseMAC(a)
	y, errB := net.ParseMAC(b)
	return errA == nil && errB == nil && x.String() == y.String()
}

func (v vfVLAN) equal(o vfVLAN) bool {
	return v.ID == o.ID && v.QoS == o.QoS && (v.ID == 0 || v.proto() == o.proto())
}

func (v vfVLAN) proto() uint16 {
	if v.Proto == 0 {
		return unix.ETH_P_8021Q
	}
	return v.Proto
}

func (v *vfVLAN) String() string {
	if v == nil {
		return "not reported"
	}
	p := "802.1Q"
	if v.proto() == unix.ETH_P_8021AD {
		p = "802.1ad"
	}
	return fmt.Sprintf("%d qos %d proto %s", v.ID, v.QoS, p)
}

// netlinkVFs is the real vfControl: rtnetlink through the PF.
type netlinkVFs struct{}

func (netlinkVFs) VF(pf string, index int) (vfState, error) {
	c, err := link.VF(pf, index)
	if err != nil {
		return vfState{}, err
	}
	return fromLink(c), nil
}

// SetVF applies s; a rate given alone keeps the VF's other rate (the kernel
// takes both at once).
func (n netlinkVFs) SetVF(pf string, index int, s vfState) error {
	c, err := toLink(s)
	if err != nil {
		return err
	}
	if (s.MinTxRate == nil) != (s.MaxTxRate == nil) {
		cur, err := link.VF(pf, index)
		if err != nil {
			return err
		}
		c.Rate = &link.VFRate{MinMbps: orValue(s.MinTxRate, cur.Rate.MinMbps), MaxMbps: orValue(s.MaxTxRate, cur.Rate.MaxMbps)}
	}
	return link.SetVF(pf, index, c)
}

func orValue(p *uint32, v uint32) uint32 {
	if p != nil {
		return *p
	}
	return v
}

func fromLink(c link.VFConfig) vfState {
	s := vfState{MAC: c.MAC.String(), SpoofChk: c.SpoofChk, Trust: c.Trust, LinkState: c.LinkState}
	if c.VLAN != nil {
		s.VLAN = &vfVLAN{ID: c.VLAN.ID, QoS: c.VLAN.QoS, Proto: c.VLAN.Proto}
	}
	if c.Rate != nil {
		s.MinTxRate, s.MaxTxRate = &c.Rate.MinMbps, &c.Rate.MaxMbps
	}
	return s
}

func toLink(s vfState) (link.VFConfig, error) {
	c := link.VFConfig{SpoofChk: s.SpoofChk, Trust: s.Trust, LinkState: s.LinkState}
	if s.MAC != "" {
		mac, err := net.ParseMAC(s.MAC)
		if err != nil {
			return c, fmt.Errorf("vf mac %q: %w", s.MAC, err)
		}
		c.MAC = mac
	}
	if s.VLAN != nil {
		c.VLAN = &link.VFVLAN{ID: s.VLAN.ID, QoS: s.VLAN.QoS, Proto: s.VLAN.Proto}
	}
	if s.MinTxRate != nil && s.MaxTxRate != nil {
		c.Rate = &link.VFRate{MinMbps: *s.MinTxRate, MaxMbps: *s.MaxTxRate}
	}
	return c, nil
}
