package link

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
)

// Down sets a link administratively down.
func Down(l netlink.Link) error {
	if err := netlink.LinkSetDown(l); err != nil {
		return fmt.Errorf("set link %q down: %w", l.Attrs().Name, err)
	}
	return nil
}

// Rename gives a (down) link a new name.
func Rename(l netlink.Link, name string) error {
	if err := netlink.LinkSetName(l, name); err != nil {
		return fmt.Errorf("rename link %q to %q: %w", l.Attrs().Name, name, err)
	}
	return nil
}

// SetMTU sets a link's MTU.
func SetMTU(l netlink.Link, mtu int) error {
	if err := netlink.LinkSetMTU(l, mtu); err != nil {
		return fmt.Errorf("set mtu of link %q to %d: %w", l.Attrs().Name, mtu, err)
	}
	return nil
}

// SetMAC sets a link's hardware address.
func SetMAC(l netlink.Link, mac net.HardwareAddr) error {
	if err := netlink.LinkSetHardwareAddr(l, mac); err != nil {
		return fmt.Errorf("set mac of link %q to %s: %w", l.Attrs().Name, mac, err)
	}
	return nil
}

// MoveToNS moves a link into the network namespace open as nsFd.
func MoveToNS(l netlink.Link, nsFd int) error {
	if err := netlink.LinkSetNsFd(l, nsFd); err != nil {
		return fmt.Errorf("move link %q to another namespace: %w", l.Attrs().Name, err)
	}
	return nil
}

// SetAlias sets a link's alias (ifalias); "" removes it.
func SetAlias(l netlink.Link, alias string) error {
	if err := netlink.LinkSetAlias(l, alias); err != nil {
		return fmt.Errorf("set alias of link %q: %w", l.Attrs().Name, err)
	}
	return nil
}
