package link

import (
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/vishvananda/netlink"
)

// BridgeSpec is a Linux bridge netclass attaches pods to.
type BridgeSpec struct {
	Name    string
	MTU     int
	Promisc bool
	// Owner is the network the bridge serves: a bridge netclass creates is
	// tagged with it, and a bridge tagged by another network is refused.
	Owner string
	// NodeManaged tags the bridge (created, or found untagged or tagged by
	// a plugin for the same network) as netclass-dra's.
	NodeManaged bool
}

// EnsureBridge returns the named bridge, creating it when absent. Concurrent
// callers may race to create it: the loser finds the winner's bridge. A
// bridge another network owns is an *OwnedError.
func EnsureBridge(s BridgeSpec) (*netlink.Bridge, error) {
	br, err := findBridge(s.Name)
	if err == nil {
		if err := CheckOwner(br, s.Owner); err != nil {
			return nil, err
		}
		if s.NodeManaged {
			if err := tag(br, s.Owner, true); err != nil {
				return nil, err
			}
		}
		return br, setBridgeState(br, s)
	}
	if !IsNotFound(err) {
		return nil, err
	}
	br, created, err := createBridge(s)
	if err != nil {
		return nil, err
	}
	if err = CheckOwner(br, s.Owner); err == nil && (created || s.NodeManaged) {
		err = tag(br, s.Owner, s.NodeManaged)
	}
	if err != nil {
		return nil, err
	}
	return br, setBridgeState(br, s)
}

// createBridge creates the bridge, with its MAC fixed, unless a concurrent
// caller did (created false: the winner's bridge is returned).
func createBridge(s BridgeSpec) (br *netlink.Bridge, created bool, err error) {
	attrs := netlink.NewLinkAttrs()
	attrs.Name = s.Name
	attrs.MTU = s.MTU
	attrs.Flags = 0
	created = true
	if err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: attrs}); err != nil {
		if !errors.Is(err, syscall.EEXIST) {
			return nil, false, fmt.Errorf("create bridge %q: %w", s.Name, err)
		}
		created = false
	}
	if br, err = findBridge(s.Name); err != nil {
		return nil, false, err
	}
	if created {
		err = FixMAC(br)
	}
	return br, created, err
}

// FixMAC sets the bridge's MAC to the one it has: until set, a bridge's MAC
// follows its ports' (the lowest of them), and frames to the node are told
// from frames between its ports by it (nft's conntrack zones).
func FixMAC(br netlink.Link) error {
	if err := netlink.LinkSetHardwareAddr(br, br.Attrs().HardwareAddr); err != nil {
		return fmt.Errorf("fix the MAC of bridge %q: %w", br.Attrs().Name, err)
	}
	return nil
}

func findBridge(name string) (*netlink.Bridge, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("find bridge %q: %w", name, err)
	}
	br, ok := l.(*netlink.Bridge)
	if !ok {
		return nil, fmt.Errorf("link %q exists and is a %s, not a bridge", name, l.Type())
	}
	return br, nil
}

func setBridgeState(br *netlink.Bridge, s BridgeSpec) error {
	if s.Promisc && br.Promisc == 0 {
		if err := netlink.SetPromiscOn(br); err != nil {
			return fmt.Errorf("set bridge %q promiscuous: %w", s.Name, err)
		}
	}
	if br.Flags&1 == 0 { // IFF_UP
		return Up(br)
	}
	return nil
}

// SetHairpin turns hairpin mode of a bridge port on.
func SetHairpin(l netlink.Link) error {
	if err := netlink.LinkSetHairpin(l, true); err != nil {
		return fmt.Errorf("set hairpin on %q: %w", l.Attrs().Name, err)
	}
	return nil
}

// EnsureAddr gives the link the address unless it already has it.
func EnsureAddr(l netlink.Link, addr *net.IPNet) error {
	err := netlink.AddrAdd(l, &netlink.Addr{IPNet: addr})
	if err != nil && !errors.Is(err, syscall.EEXIST) {
		return fmt.Errorf("add %s to %q: %w", addr, l.Attrs().Name, err)
	}
	return nil
}

// IsBridgePort reports whether l is a port of a Linux bridge (its master is
// a bridge, not a bond, an OVS datapath or a VRF).
func IsBridgePort(l netlink.Link) (bool, error) {
	if l.Attrs().MasterIndex == 0 {
		return false, nil
	}
	m, err := ByIndex(l.Attrs().MasterIndex)
	if err != nil {
		return false, err
	}
	_, ok := m.(*netlink.Bridge)
	return ok, nil
}

// BridgeOf returns the Linux bridge the named link is a port of (ok false
// when it is not a bridge's port).
func BridgeOf(name string) (br netlink.Link, ok bool, err error) {
	l, err := ByName(name)
	if err != nil {
		return nil, false, err
	}
	return BridgeOfLink(l)
}

// BridgeOfLink is BridgeOf for a link already read.
func BridgeOfLink(l netlink.Link) (br netlink.Link, ok bool, err error) {
	if l.Attrs().MasterIndex == 0 {
		return nil, false, nil
	}
	m, err := ByIndex(l.Attrs().MasterIndex)
	if err != nil {
		return nil, false, err
	}
	_, ok = m.(*netlink.Bridge)
	return m, ok, nil
}
