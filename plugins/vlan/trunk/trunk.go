// Package trunk owns a VLAN's node devices: master's 802.1Q sub-interface
// and a bridge, one pair per VLAN ID and master on a node, shared by every
// pod of the VLAN there (the kernel allows one sub-interface per VLAN ID on
// a master, so pods cannot each have their own). Both netclass-vlan
// (creating them with the first pod and removing them with the last) and
// netclass-dra's node engine (creating them when the network becomes usable
// on the node, removing them when it is gone) go through it, under the same
// per-segment lock; their lifetime rules are plugins/segment's.
package trunk

import (
	"errors"

	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/segment"
)

// Lock serialises everything that creates, joins or removes the VLAN's
// devices on this host.
func Lock(c *netconf.VLAN) (func(), error) { return BridgeLock(c.DataDir, c.BridgeName()).Lock() }

// BridgeLock is the lock of the VLAN whose bridge is bridge, removed with
// its devices.
func BridgeLock(dataDir, bridge string) attach.LockFile {
	return attach.LockFile{Dir: dataDir, Name: "vlan-" + bridge}
}

// Uplink is the VLAN's parent on this host and the MTU its pods get.
type Uplink struct {
	MasterIndex int
	MTU         int
}

// Resolve finds master on the host. A missing master or an MTU above the
// master's is a configuration error naming the field.
func Resolve(c *netconf.VLAN) (Uplink, error) {
	m, err := link.ByName(c.Master)
	if err != nil {
		return Uplink{}, attach.Invalid("master: %v", err)
	}
	u := Uplink{MasterIndex: m.Attrs().Index, MTU: c.MTU}
	switch {
	case c.MTU == 0:
		u.MTU = m.Attrs().MTU
	case c.MTU > m.Attrs().MTU:
		return u, attach.Invalid("mtu: %d exceeds the MTU of master %q (%d)", c.MTU, c.Master, m.Attrs().MTU)
	}
	return u, nil
}

// Spec is the VLAN's sub-interface over u, a port of the bridge bridgeIndex.
func (u Uplink) Spec(c *netconf.VLAN, bridgeIndex int) link.UplinkVLANSpec {
	return link.UplinkVLANSpec{Name: c.DeviceName(), ParentIndex: u.MasterIndex, VLANID: c.VLANID,
		MTU: u.MTU, BridgeIndex: bridgeIndex, Owner: c.Name}
}

// Devices are the VLAN's bridge and sub-interface on this node.
func Devices(c *netconf.VLAN) segment.Devices {
	return segment.Devices{Bridge: c.BridgeName(), Uplink: c.DeviceName(), Network: c.Name, Locks: attach.Locks{BridgeLock(c.DataDir, c.BridgeName())}}
}

// Ensure creates (or finds, verifying their settings) the VLAN's bridge and
// sub-interface, whose frames carry the PCP c's map gives their DSCP.
// managed tags what it creates (and adopts what exists) as the node
// daemon's. The caller holds the lock.
func Ensure(c *netconf.VLAN, u Uplink, managed bool) (*netlink.Bridge, error) {
	br, err := link.EnsureBridge(link.BridgeSpec{Name: c.BridgeName(), MTU: u.MTU, Owner: c.Name, NodeManaged: managed})
	if err != nil {
		return nil, err
	}
	spec := u.Spec(c, br.Attrs().Index)
	spec.NodeManaged = managed
	if _, err := link.EnsureUplinkVLAN(spec); err != nil {
		return nil, errors.Join(err, Devices(c).RemoveIfUnused())
	}
	if err := applyPCP(c); err != nil {
		return nil, errors.Join(err, Devices(c).RemoveIfUnused())
	}
	return br, nil
}

// Check verifies the VLAN's shared devices: the bridge and the
// sub-interface, the network's, with its settings and its PCP map.
func Check(c *netconf.VLAN) error {
	u, err := Resolve(c)
	if err != nil {
		return err
	}
	br, err := link.ByName(c.BridgeName())
	if err != nil {
		return err
	}
	if err := link.CheckOwner(br, c.Name); err != nil {
		return err
	}
	if err := link.CheckUplinkVLAN(u.Spec(c, br.Attrs().Index)); err != nil {
		return err
	}
	return checkPCP(c)
}
