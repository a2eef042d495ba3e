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
	br, err := link.EnsureBridge(link.BridgeSpec{Name: c.BridgeName(), MTU: u.mtu})
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
// is a port of the bridge any more. The caller holds the VNI lock.
func removeSharedIfUnused(c *netconf.VXLAN) error {
	br, err := link.ByName(c.BridgeName())
	if link.IsNotFound(err) {
		return link.Delete(c.DeviceName())
	}
	if err != nil {
		return err
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
	return errors.Join(link.Delete(c.DeviceName()), link.Delete(c.BridgeName()))
}
