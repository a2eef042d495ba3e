package vxlan

import (
	"errors"

	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
)

// ensureShared creates (or finds, verifying its settings) the VNI's bridge
// and VXLAN device with its flood entries. The caller holds the VNI lock.
func ensureShared(c *netconf.VXLAN, u underlay) (*netlink.Bridge, error) {
	br, err := link.EnsureBridge(link.BridgeSpec{Name: c.BridgeName(), MTU: u.mtu, Owner: c.Name})
	if err != nil {
		return nil, err
	}
	vx, err := link.EnsureVXLAN(u.spec(c, br.Attrs().Index))
	if err != nil {
		return nil, errors.Join(err, removeSharedIfUnused(c))
	}
	if err := link.AddFloodEntries(vx, c.RemoteIPs); err != nil {
		return nil, errors.Join(err, removeSharedIfUnused(c))
	}
	return br, nil
}

// removeSharedIfUnused deletes the VNI's bridge and VXLAN device once no pod
// is a port of the bridge any more, unless another network owns them. The
// caller holds the VNI lock.
func removeSharedIfUnused(c *netconf.VXLAN) error {
	br, err := link.ByName(c.BridgeName())
	if link.IsNotFound(err) {
		return deleteIfOurs(c.DeviceName(), c.Name)
	}
	if err != nil {
		return err
	}
	if !link.Owned(br, c.Name) && !link.Untagged(br) {
		return nil // another network's devices: never ours to delete
	}
	ports, err := link.Ports(br.Attrs().Index)
	if err != nil {
		return err
	}
	for _, p := range ports {
		if p.Attrs().Name != c.DeviceName() {
			return nil // a pod still uses the VNI
		}
	}
	return errors.Join(deleteIfOurs(c.DeviceName(), c.Name), link.Delete(c.BridgeName()))
}

// deleteIfOurs deletes a device unless another network owns it.
func deleteIfOurs(name, network string) error {
	l, err := link.ByName(name)
	if link.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !link.Owned(l, network) && !link.Untagged(l) {
		return nil
	}
	return link.Delete(name)
}
