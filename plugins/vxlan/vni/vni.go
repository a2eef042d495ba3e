// Package vni owns a VNI's node devices: one VXLAN device and one bridge per
// VNI on a node, shared by every pod of the VNI there, with the unicast
// flood entries of its remotes. Both netclass-vxlan (creating them with the
// first pod and removing them with the last) and netclass-dra's node engine
// (creating them when the network becomes usable on the node, keeping the
// flood list equal to the cluster's nodes, removing them when the network is
// gone) go through it, under the same per-VNI lock, so they never race.
//
// Devices netclass-dra manages carry a node-managed owner tag
// (link.NodeOwnerAlias): the plugin joins and leaves them but leaves their
// lifetime to the node daemon.
package vni

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/kernel/nft"
	"github.com/netclass-dev/netclass/plugins/segment"
)

// Lock serialises everything that creates, joins or removes the VNI's
// devices on this host.
func Lock(c *netconf.VXLAN) (func(), error) { return LockFile(c.DataDir, c.VNI).Lock() }

// LockFile is the lock of VNI id in dataDir, removed with its devices.
func LockFile(dataDir string, id int) attach.LockFile {
	return attach.LockFile{Dir: dataDir, Name: fmt.Sprintf("vxlan-%d", id)}
}

// Underlay is where the tunnel runs: the master device (or the device
// holding local), the local address, and the MTU pods get.
type Underlay struct {
	MasterIndex int
	Local       netip.Addr
	MTU         int
}

// ResolveUnderlay finds the underlay of c on this host. A missing device or
// address, or an MTU above what the underlay carries, is a configuration
// error naming the field.
func ResolveUnderlay(c *netconf.VXLAN) (Underlay, error) {
	var u Underlay
	overhead := netconf.VXLANOverhead4
	if c.IPv6Underlay() {
		overhead = netconf.VXLANOverhead6
	}
	dev, err := underlayDevice(c)
	if err != nil {
		return u, err
	}
	if c.Master != "" {
		u.MasterIndex = dev.Attrs().Index
	}
	u.Local = c.LocalIP
	if !u.Local.IsValid() && (len(c.RemoteIPs) > 0 || c.Master == "") {
		addrs, err := link.Addrs(dev, c.IPv6Underlay())
		if err != nil || len(addrs) == 0 {
			return u, attach.Invalid("master: %q has no address to source the tunnel from; set local", c.Master)
		}
		u.Local = addrs[0]
	}
	limit := dev.Attrs().MTU - overhead
	switch {
	case c.MTU == 0:
		u.MTU = limit
	case c.MTU > limit:
		return u, attach.Invalid("mtu: %d exceeds what underlay %q carries (%d - %d of VXLAN overhead = %d)",
			c.MTU, dev.Attrs().Name, dev.Attrs().MTU, overhead, limit)
	default:
		u.MTU = c.MTU
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

// Spec is the VXLAN device of c over u, a port of the bridge bridgeIndex.
func (u Underlay) Spec(c *netconf.VXLAN, bridgeIndex int) link.VXLANSpec {
	return link.VXLANSpec{
		Name: c.DeviceName(), VNI: c.VNI, Port: c.Port, Local: u.Local, Group: c.GroupIP,
		MasterIndex: u.MasterIndex, Learning: *c.Learning, MTU: u.MTU, BridgeIndex: bridgeIndex, Owner: c.Name,
		// What the fabric sees: the outer header carries the DSCP the
		// packet has entering the tunnel (marked on the pod's port).
		TOS: link.TOSInherit,
	}
}

// Ensure creates (or finds, verifying its settings) the VNI's bridge and
// VXLAN device with at least the flood entries of c's remotes. managed tags
// what it creates (and adopts what exists) as the node daemon's. The caller
// holds the VNI lock.
func Ensure(c *netconf.VXLAN, u Underlay, managed bool) (*netlink.Bridge, error) {
	br, err := link.EnsureBridge(link.BridgeSpec{Name: c.BridgeName(), MTU: u.MTU, Owner: c.Name, NodeManaged: managed})
	if err != nil {
		return nil, err
	}
	spec := u.Spec(c, br.Attrs().Index)
	spec.NodeManaged = managed
	vx, err := link.EnsureVXLAN(spec)
	if err != nil {
		return nil, errors.Join(err, RemoveIfUnused(c))
	}
	if err := ensureTunnelECN(c); err != nil {
		return nil, errors.Join(err, RemoveIfUnused(c))
	}
	if err := link.AddFloodEntries(vx, c.RemoteIPs); err != nil {
		return nil, errors.Join(err, RemoveIfUnused(c))
	}
	return br, nil
}

// ensureTunnelECN makes an inner CE reach the outer header of the
// datagrams sent to c's port (plugins/kernel/nft.TunnelECNTable).
func ensureTunnelECN(c *netconf.VXLAN) error {
	conn, err := nft.OpenCurrent()
	if err != nil {
		return err
	}
	return nft.EnsureTunnelECN(conn, uint16(c.Port))
}

// CheckTunnelECN verifies what ensureTunnelECN makes.
func CheckTunnelECN(c *netconf.VXLAN) error {
	conn, err := nft.OpenCurrent()
	if err != nil {
		return err
	}
	return nft.CheckTunnelECN(conn, uint16(c.Port))
}

// SyncFlood makes the VXLAN device's flood entries exactly c's remotes:
// pods already running reach a node that joined, and stop flooding to one
// that left. A network with a multicast group has none. The caller holds the
// VNI lock.
func SyncFlood(c *netconf.VXLAN) error {
	vx, err := link.ByName(c.DeviceName())
	if err != nil {
		return err
	}
	return link.SetFloodEntries(vx, c.RemoteIPs)
}

// Devices are the VNI's bridge and VXLAN device on this node.
func Devices(c *netconf.VXLAN) segment.Devices {
	return segment.Devices{Bridge: c.BridgeName(), Uplink: c.DeviceName(), Network: c.Name, Locks: attach.Locks{LockFile(c.DataDir, c.VNI)}}
}

// RemoveIfUnused deletes the VNI's bridge and VXLAN device once no pod is a
// port of the bridge any more (see segment.Devices). The caller holds the
// VNI lock.
func RemoveIfUnused(c *netconf.VXLAN) error { return Devices(c).RemoveIfUnused() }

// RemoveManagedIfUnused is RemoveIfUnused for the node daemon. The caller
// holds the VNI lock.
func RemoveManagedIfUnused(c *netconf.VXLAN) error { return Devices(c).RemoveManagedIfUnused() }
