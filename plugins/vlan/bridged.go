package vlan

import (
	"context"
	"errors"

	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/bridgeport"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/portguard"
	"github.com/netclass-dev/netclass/plugins/vlan/trunk"
)

// The default mode: the pod's veth is a port of the VLAN's bridge on the
// host, whose uplink is master's sub-interface for the VLAN (plugins/vlan/trunk).

func port(containerID, ifname, netnsPath string) bridgeport.Port {
	return bridgeport.Port{ContainerID: containerID, NetNS: netnsPath, IfName: ifname}
}

func addBridged(ctx context.Context, c *netconf.VLAN, args *skel.CmdArgs, undo *attach.Undo) (*current.Result, error) {
	mac, err := attach.ParseMAC(c.MAC(attach.CNIArg(args.Args, "MAC"), ""))
	if err != nil {
		return nil, err
	}
	u, err := trunk.Resolve(c)
	if err != nil {
		return nil, err
	}
	p := port(args.ContainerID, args.IfName, args.Netns)
	p.MTU, p.MAC = u.MTU, mac
	rec := &attach.Record{Network: c.Name, Plugin: netconf.TypeVLAN, ContainerID: args.ContainerID,
		IfName: args.IfName, NetNS: args.Netns, HostIf: p.HostName(), Bridge: c.BridgeName(), Config: c.Raw}
	if err := store(c).Put(rec); err != nil {
		return nil, err
	}
	undo.Push(func() error { return store(c).Delete(c.Name, args.ContainerID, args.IfName) })
	res, br, host, err := bridgeport.Join(ctx, ipamOf(c), func() (netlink.Link, netlink.Link, error) { return join(c, u, &p) },
		func() error { return leave(c, p) }, undo)
	if err != nil {
		return nil, err
	}
	bridgeport.Interfaces(res, br, host, args.IfName, args.Netns)
	if _, err = p.Configure(res); err != nil {
		return nil, err
	}
	rec.Addressed(res)
	if err := store(c).Put(rec); err != nil || c.PortSecurity == nil {
		return res, err
	}
	undo.Push(func() error { return portguard.Remove(p.HostName()) })
	return res, portguard.Secure(c.PortSecurity, portguard.Port{PodNS: args.Netns, IfName: args.IfName, HostIf: p.HostName()}, br, res)
}

// join makes sure the VLAN's devices exist and plugs the pod's veth into the
// bridge, under the VLAN's lock: a concurrent last DEL cannot remove the
// bridge in between.
func join(c *netconf.VLAN, u trunk.Uplink, p *bridgeport.Port) (br, host netlink.Link, err error) {
	unlock, err := trunk.Lock(c)
	if err != nil {
		return nil, nil, err
	}
	defer unlock()
	bridge, err := trunk.Ensure(c, u, false)
	if err != nil {
		return nil, nil, err
	}
	p.BridgeIndex = bridge.Attrs().Index
	host, err = p.Create()
	return bridge, host, err
}

// leave removes the pod's veth and, if it was the VLAN's last pod on this
// host, the sub-interface and bridge.
func leave(c *netconf.VLAN, p bridgeport.Port) error {
	_, err := p.Remove()
	unlock, lerr := trunk.Lock(c)
	if lerr != nil {
		return errors.Join(err, lerr)
	}
	defer unlock()
	return errors.Join(err, trunk.Devices(c).RemoveIfUnused())
}

// checkBridged verifies the VLAN's shared devices and the pod's port.
func checkBridged(c *netconf.VLAN, args *skel.CmdArgs, prev *current.Result) error {
	if err := trunk.Check(c); err != nil {
		return err
	}
	br, err := link.ByName(c.BridgeName())
	if err != nil {
		return err
	}
	p := port(args.ContainerID, args.IfName, args.Netns)
	p.BridgeIndex = br.Attrs().Index
	if err := p.Check(prev); err != nil {
		return err
	}
	return portguard.Check(c.PortSecurity, portguard.Port{PodNS: args.Netns, IfName: args.IfName, HostIf: p.HostName()}, prev)
}
