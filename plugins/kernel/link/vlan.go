package link

import (
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/vishvananda/netlink"
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

// CreateVLAN creates the sub-interface (down) and returns the error as is,
// so callers can tell a taken name (EEXIST) from other failures.
func CreateVLAN(s VLANSpec) error {
	attrs := netlink.NewLinkAttrs()
	attrs.Name, attrs.ParentIndex, attrs.MTU = s.Name, s.ParentIndex, s.MTU
	if s.TargetNSFd >= 0 {
		attrs.Namespace = netlink.NsFd(s.TargetNSFd)
	}
	if err := netlink.LinkAdd(&netlink.Vlan{LinkAttrs: attrs, VlanId: s.VLANID, VlanProtocol: netlink.VLAN_PROTOCOL_8021Q}); err != nil {
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
		err = netlink.LinkAdd(&netlink.Vlan{LinkAttrs: attrs, VlanId: s.VLANID, VlanProtocol: netlink.VLAN_PROTOCOL_8021Q})
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
	return v, nil
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
