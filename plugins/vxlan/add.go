package vxlan

import (
	"context"

	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/bridgeport"
	"github.com/netclass-dev/netclass/plugins/portguard"
	"github.com/netclass-dev/netclass/plugins/qosport"
	"github.com/netclass-dev/netclass/plugins/vxlan/vni"
)

func cmdAdd(args *skel.CmdArgs) error {
	c, err := netconf.ParseVXLAN(args.StdinData)
	if err != nil {
		return err
	}
	var undo attach.Undo
	res, err := add(context.Background(), c, args, &undo)
	if err != nil {
		return attach.Internal(err, undo.Run())
	}
	return attach.Print(res, c.CNIVersion)
}

func add(ctx context.Context, c *netconf.VXLAN, args *skel.CmdArgs, undo *attach.Undo) (*current.Result, error) {
	mac, err := attach.ParseMAC(c.MAC(attach.CNIArg(args.Args, "MAC"), c.Mac))
	if err != nil {
		return nil, err
	}
	if err := attach.UsableNetNS(args.Netns); err != nil {
		return nil, err
	}
	u, err := vni.ResolveUnderlay(c)
	if err != nil {
		return nil, err
	}
	p := bridgeport.Port{ContainerID: args.ContainerID, NetNS: args.Netns, IfName: args.IfName, MTU: u.MTU, MAC: mac}
	rec := &attach.Record{Network: c.Name, Plugin: netconf.TypeVXLAN, ContainerID: args.ContainerID,
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
	if _, err := p.Configure(res); err != nil {
		return nil, err
	}
	rec.Addressed(res)
	if err := store(c).Put(rec); err != nil {
		return nil, err
	}
	if c.PortSecurity != nil {
		undo.Push(func() error { return portguard.Remove(p.HostName()) })
		if err := portguard.Secure(c.PortSecurity, portguard.Port{PodNS: args.Netns, IfName: args.IfName, HostIf: p.HostName()}, br, res); err != nil {
			return nil, err
		}
	}
	if err := joinShare(c, res, args.Netns, p.HostName(), undo); err != nil {
		return nil, err
	}
	if err := applyQoS(c, qosport.Attachment{PodNS: args.Netns, IfName: args.IfName, HostIf: p.HostName()}, undo); err != nil {
		return nil, err
	}
	res.DNS = c.DNS
	return res, nil
}

// applyQoS applies the attachment's effective qos (none: nothing).
func applyQoS(c *netconf.VXLAN, a qosport.Attachment, undo *attach.Undo) error {
	if c.EffectiveQoS == nil {
		return nil
	}
	if err := qosport.Apply(a, qos.Compile(c.EffectiveQoS)); err != nil {
		return err
	}
	undo.Push(func() error { return qosport.Remove(a) })
	return nil
}

// join makes sure the VNI's devices exist and plugs the pod's veth into the
// bridge, all under the VNI lock: a concurrent last DEL cannot remove the
// bridge in between.
func join(c *netconf.VXLAN, u vni.Underlay, p *bridgeport.Port) (br, host netlink.Link, err error) {
	unlock, err := vni.Lock(c)
	if err != nil {
		return nil, nil, err
	}
	defer unlock()
	bridge, err := vni.Ensure(c, u, false)
	if err != nil {
		return nil, nil, err
	}
	p.BridgeIndex = bridge.Attrs().Index
	host, err = p.Create()
	return bridge, host, err
}
