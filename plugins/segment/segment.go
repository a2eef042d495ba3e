// Package segment owns the lifetime of a node's devices of one L2 segment:
// a bridge and its uplink — the VNI's VXLAN device (plugins/vxlan/vni) or a
// master's 802.1Q sub-interface (plugins/vlan/trunk) — shared by every pod
// of the segment on the node. The plugin whose ADD finds them missing
// creates them and the DEL of their last pod removes them, unless
// netclass-dra manages them (link.NodeOwnerAlias): their lifetime is then
// the node daemon's, which removes them once their network is gone and no
// pod is left on the bridge. Callers hold the segment's locks, whose files go
// with the devices.
package segment

import (
	"errors"

	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/kernel/nft"
)

// Devices are a segment's bridge and uplink on this node, the network that
// owns them, and the locks that serialise their users: a plugin's in its
// dataDir; the node daemon's in each dataDir of the plugins it runs.
type Devices struct {
	Bridge  string
	Uplink  string
	Network string
	Locks   attach.Locks
}

// RemoveIfUnused deletes the bridge and its uplink once no pod is a port of
// the bridge any more, unless another network owns them or the node daemon
// manages them; with both gone, the lock's file goes too.
func (d Devices) RemoveIfUnused() error { return d.remove(false) }

// RemoveManagedIfUnused is RemoveIfUnused for the node daemon: it deletes
// the network's node-managed devices too.
func (d Devices) RemoveManagedIfUnused() error { return d.remove(true) }

func (d Devices) remove(managed bool) error {
	if err := d.removeDevices(managed); err != nil {
		return err
	}
	for _, name := range []string{d.Bridge, d.Uplink} {
		if _, err := link.ByName(name); !link.IsNotFound(err) {
			return nil // still there (or unreadable): its users still lock
		}
	}
	return d.Locks.Remove()
}

func (d Devices) removeDevices(managed bool) error {
	br, err := link.ByName(d.Bridge)
	if link.IsNotFound(err) {
		return d.deleteIfOurs(d.Uplink, managed)
	}
	if err != nil {
		return err
	}
	if !d.ours(br, managed) {
		return nil // another network's, or the node daemon's: never ours to delete
	}
	ports, err := link.Ports(br.Attrs().Index)
	if err != nil {
		return err
	}
	for _, p := range ports {
		if p.Attrs().Name != d.Uplink {
			return nil // a pod still uses the segment
		}
	}
	return errors.Join(d.deleteIfOurs(d.Uplink, managed), link.Delete(d.Bridge))
}

// ours: the device is the network's (untagged counts: created before
// tagging), and, unless managed, not the node daemon's.
func (d Devices) ours(l netlink.Link, managed bool) bool {
	if link.NodeManaged(l) && !managed {
		return false
	}
	return link.Owned(l, d.Network) || link.Untagged(l)
}

// deleteIfOurs deletes a device unless another network owns it, with the
// nftables table that sets the priority of a VLAN uplink's frames (a netdev
// table outlives its device).
func (d Devices) deleteIfOurs(name string, managed bool) error {
	l, err := link.ByName(name)
	if link.IsNotFound(err) {
		return deletePCP(name) // the device went; its table may not have
	}
	if err != nil {
		return err
	}
	if !d.ours(l, managed) {
		return nil
	}
	if err := link.Delete(name); err != nil {
		return err
	}
	return deletePCP(name)
}

func deletePCP(uplink string) error {
	c, err := nft.OpenCurrent()
	if err != nil {
		return err
	}
	return nft.DeletePCP(c, uplink)
}
