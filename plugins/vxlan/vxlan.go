// Package vxlan is netclass-vxlan: per VNI, one VXLAN device and one bridge
// on the host, shared by every pod of the VNI on that host and joined to it
// with veths. Unicast remotes get static all-zeros flood entries; a
// multicast group floods through the underlay instead. The shared devices
// are created by the first attachment and removed with the last, under a
// per-VNI lock so concurrent ADDs and DELs never race.
package vxlan

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
)

// Funcs are the plugin's CNI verbs, for skel.
func Funcs() skel.CNIFuncs {
	return skel.CNIFuncs{Add: cmdAdd, Del: cmdDel, Check: cmdCheck, GC: cmdGC, Status: cmdStatus}
}

func store(c *netconf.VXLAN) attach.Store { return attach.Store{Dir: c.DataDir} }

func ipamOf(c *netconf.VXLAN) attach.IPAM { return attach.IPAM{Type: c.IPAM.Type, Conf: c.Raw} }

// lock serialises everything that creates, joins or removes the VNI's
// shared devices on this host.
func lock(c *netconf.VXLAN) (func(), error) {
	return attach.Lock(c.DataDir, fmt.Sprintf("vxlan-%d", c.VNI))
}

// underlay resolves where the tunnel runs: the master device (or the device
// holding local), the local address, and the MTU pods get.
type underlay struct {
	masterIndex int
	local       netip.Addr
	mtu         int
}

func resolveUnderlay(c *netconf.VXLAN) (underlay, error) {
	var u underlay
	overhead := netconf.VXLANOverhead4
	if c.IPv6Underlay() {
		overhead = netconf.VXLANOverhead6
	}
	dev, err := underlayDevice(c)
	if err != nil {
		return u, err
	}
	if c.Master != "" {
		u.masterIndex = dev.Attrs().Index
	}
	u.local = c.LocalIP
	if !u.local.IsValid() && (len(c.RemoteIPs) > 0 || c.Master == "") {
		addrs, err := link.Addrs(dev, c.IPv6Underlay())
		if err != nil || len(addrs) == 0 {
			return u, attach.Invalid("master: %q has no address to source the tunnel from; set local", c.Master)
		}
		u.local = addrs[0]
	}
	limit := dev.Attrs().MTU - overhead
	switch {
	case c.MTU == 0:
		u.mtu = limit
	case c.MTU > limit:
		return u, attach.Invalid("mtu: %d exceeds what underlay %q carries (%d - %d of VXLAN overhead = %d)",
			c.MTU, dev.Attrs().Name, dev.Attrs().MTU, overhead, limit)
	default:
		u.mtu = c.MTU
	}
	return u, nil
}

// underlayDevice is master, or the link that holds the local address.
func underlayDevice(c *netconf.VXLAN) (netlink.Link, error) {
	if c.Master != "" {
		l, err := link.ByName(c.Master)
		if err != nil {
			return nil, attach.Invalid("master: %v", err)
		}
		return l, nil
	}
	l, err := link.HolderOf(c.LocalIP)
	if err != nil {
		return nil, attach.Invalid("local: %v", err)
	}
	return l, nil
}

func (u underlay) spec(c *netconf.VXLAN, bridgeIndex int) link.VXLANSpec {
	return link.VXLANSpec{
		Name: c.DeviceName(), VNI: c.VNI, Port: c.Port, Local: u.local, Group: c.GroupIP,
		MasterIndex: u.masterIndex, Learning: *c.Learning, MTU: u.mtu, BridgeIndex: bridgeIndex, Owner: c.Name,
	}
}

func cmdStatus(args *skel.CmdArgs) error {
	c, err := netconf.ParseVXLAN(args.StdinData)
	if err != nil {
		return err
	}
	if _, err := resolveUnderlay(c); err != nil {
		return attach.Unavailable(err)
	}
	if err := ipamOf(c).Status(context.Background()); err != nil {
		return attach.Unavailable(err)
	}
	return nil
}
