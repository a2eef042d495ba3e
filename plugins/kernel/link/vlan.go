package link

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
)

// VLANSpec is an 802.1Q sub-interface of a parent link in the calling
// thread's namespace, created with its final name in the target namespace.
type VLANSpec struct {
	Name        string
	ParentIndex int
	VLANID      int
	MTU         int
	TargetNSFd  int // -1: create it in the calling thread's namespace
}

// PriorityPCP is the egress-qos-map of netclass's VLAN devices: a frame's
// 802.1p PCP is its packet's skb->priority, 0 to 7 (`egress-qos-map 1:1
// ... 7:7`; priority 0 and any other value give PCP 0). The priority is set
// from the packet's DSCP by plugins/kernel/nft (PCPTable).
func PriorityPCP() map[uint32]uint32 {
	m := make(map[uint32]uint32, 7)
	for p := uint32(1); p <= 7; p++ {
		m[p] = p
	}
	return m
}

// CreateVLAN creates the sub-interface (down), with PriorityPCP as its
// egress-qos-map, and returns the error as is, so callers can tell a taken
// name (EEXIST) from other failures.
func CreateVLAN(s VLANSpec) error {
	attrs := netlink.NewLinkAttrs()
	attrs.Name, attrs.ParentIndex, attrs.MTU = s.Name, s.ParentIndex, s.MTU
	if s.TargetNSFd >= 0 {
		attrs.Namespace = netlink.NsFd(s.TargetNSFd)
	}
	v := &netlink.Vlan{LinkAttrs: attrs, VlanId: s.VLANID, VlanProtocol: netlink.VLAN_PROTOCOL_8021Q, EgressQosMap: PriorityPCP()}
	if err := netlink.LinkAdd(v); err != nil {
		return fmt.Errorf("create vlan %q (id %d): %w", s.Name, s.VLANID, err)
	}
	return nil
}

// UplinkVLANSpec is an 802.1Q sub-interface on the host shared by every pod
// of one VLAN and master: a port of the VLAN's bridge.
type UplinkVLANSpec struct {
	Name        string
	ParentIndex int
	VLANID      int
	MTU         int
	BridgeIndex int
	// Owner is the network the device serves (see BridgeSpec.Owner).
	Owner string
	// NodeManaged: see BridgeSpec.NodeManaged.
	NodeManaged bool
}

// EnsureUplinkVLAN returns the sub-interface, creating it (enslaved to the
// bridge and up) when absent. An existing one with another VLAN ID or
// parent, or another network's, is an error; the VLAN ID taken on the
// parent by a device netclass did not make is an error naming both.
func EnsureUplinkVLAN(s UplinkVLANSpec) (*netlink.Vlan, error) {
	v, err := findVLAN(s.Name)
	if IsNotFound(err) {
		attrs := netlink.NewLinkAttrs()
		attrs.Name, attrs.ParentIndex, attrs.MTU, attrs.MasterIndex, attrs.Flags = s.Name, s.ParentIndex, s.MTU, s.BridgeIndex, net.FlagUp
		err = netlink.LinkAdd(&netlink.Vlan{LinkAttrs: attrs, VlanId: s.VLANID, VlanProtocol: netlink.VLAN_PROTOCOL_8021Q, EgressQosMap: PriorityPCP()})
		if err != nil && !errors.Is(err, syscall.EEXIST) {
			return nil, fmt.Errorf("create vlan %q (id %d): %w", s.Name, s.VLANID, err)
		}
		created := err == nil
		v, err = findVLAN(s.Name)
		if IsNotFound(err) && !created {
			return nil, fmt.Errorf("create vlan %q: VLAN %d is taken on its parent (index %d) by a device netclass did not make", s.Name, s.VLANID, s.ParentIndex)
		}
		if err == nil && created {
			err = tag(v, s.Owner, s.NodeManaged)
		}
	}
	if err != nil {
		return nil, err
	}
	if err := CheckOwner(v, s.Owner); err != nil {
		return nil, err
	}
	if s.NodeManaged {
		if err := tag(v, s.Owner, true); err != nil {
			return nil, err
		}
	}
	if diff := vlanDiff(v, s); diff != "" {
		return nil, fmt.Errorf("vlan %q exists with other settings: %s", s.Name, diff)
	}
	if CheckPriorityPCP(v) != nil { // made by a netclass before PCPs: set in place
		if err := setEgressQoS(v, PriorityPCP()); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// CheckPriorityPCP verifies the VLAN device's egress-qos-map is PriorityPCP.
func CheckPriorityPCP(v *netlink.Vlan) error {
	want := PriorityPCP()
	if !maps.Equal(v.EgressQosMap, want) {
		return fmt.Errorf("vlan %q has egress-qos-map %v, want %v", v.Attrs().Name, v.EgressQosMap, want)
	}
	return nil
}

// setEgressQoS adds the mappings to a live VLAN device's egress-qos-map.
func setEgressQoS(v *netlink.Vlan, m map[uint32]uint32) error {
	return changeLinkData(v, func(data *nl.RtAttr) {
		egress := data.AddRtAttr(nl.IFLA_VLAN_EGRESS_QOS, nil)
		for from, to := range m {
			egress.AddRtAttr(nl.IFLA_VLAN_QOS_MAPPING, append(nl.Uint32Attr(from), nl.Uint32Attr(to)...))
		}
	})
}

// CheckUplinkVLAN verifies the sub-interface exists with the spec's
// settings, the network's, and up.
func CheckUplinkVLAN(s UplinkVLANSpec) error {
	v, err := findVLAN(s.Name)
	if err != nil {
		return err
	}
	if err := CheckOwner(v, s.Owner); err != nil {
		return err
	}
	if diff := vlanDiff(v, s); diff != "" {
		return fmt.Errorf("vlan %q has other settings: %s", s.Name, diff)
	}
	if err := CheckPriorityPCP(v); err != nil {
		return err
	}
	if v.Flags&net.FlagUp == 0 {
		return fmt.Errorf("vlan %q is down", s.Name)
	}
	return nil
}

func findVLAN(name string) (*netlink.Vlan, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("find vlan %q: %w", name, err)
	}
	v, ok := l.(*netlink.Vlan)
	if !ok {
		return nil, fmt.Errorf("link %q exists and is a %s, not a vlan", name, l.Type())
	}
	return v, nil
}

// vlanDiff describes how an existing sub-interface differs from the spec.
func vlanDiff(v *netlink.Vlan, s UplinkVLANSpec) string {
	switch {
	case v.VlanId != s.VLANID:
		return fmt.Sprintf("vlan id %d, want %d", v.VlanId, s.VLANID)
	case v.ParentIndex != s.ParentIndex:
		return fmt.Sprintf("parent index %d, want %d", v.ParentIndex, s.ParentIndex)
	case s.BridgeIndex != 0 && v.MasterIndex != s.BridgeIndex:
		return fmt.Sprintf("bridge index %d, want %d", v.MasterIndex, s.BridgeIndex)
	}
	return ""
}
