package vlan

import (
	"context"

	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ipam"
	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/bridgeport"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/kernel/netns"
	"github.com/netclass-dev/netclass/plugins/qosport"
)

func cmdAdd(args *skel.CmdArgs) error {
	c, err := netconf.ParseVLAN(args.StdinData)
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

func add(ctx context.Context, c *netconf.VLAN, args *skel.CmdArgs, undo *attach.Undo) (*current.Result, error) {
	if err := attach.UsableNetNS(args.Netns); err != nil {
		return nil, err
	}
	m, err := master(c, args.Netns)
	if err != nil {
		return nil, err
	}
	rec := &attach.Record{Network: c.Name, Plugin: netconf.TypeVLAN, ContainerID: args.ContainerID,
		IfName: args.IfName, NetNS: args.Netns, Config: c.Raw}
	if err := store(c).Put(rec); err != nil {
		return nil, err
	}
	undo.Push(func() error { return store(c).Delete(c.Name, args.ContainerID, args.IfName) })
	res, err := allocateAndCreate(ctx, c, args, m, undo)
	if err != nil {
		return nil, err
	}
	if err := configure(args, res); err != nil {
		return nil, err
	}
	if c.EffectiveQoS != nil {
		a := qosport.Attachment{PodNS: args.Netns, IfName: args.IfName}
		if err := qosport.Apply(a, qos.Compile(c.EffectiveQoS)); err != nil {
			return nil, err
		}
		undo.Push(func() error { return qosport.Remove(a) })
	}
	res.DNS = c.DNS
	return res, nil
}

// allocateAndCreate runs IPAM while the VLAN link is created in the pod.
func allocateAndCreate(ctx context.Context, c *netconf.VLAN, args *skel.CmdArgs, m netlink.Link, undo *attach.Undo) (*current.Result, error) {
	var (
		res                *current.Result
		ipamErr, createErr error
	)
	err := attach.WithIPAM(ipamOf(c),
		func() error { res, ipamErr = ipamOf(c).Add(ctx); return ipamErr },
		func() error { createErr = create(c, args, m); return createErr },
	)
	if ipamErr == nil {
		undo.Push(func() error { return ipamOf(c).Del(ctx) })
	}
	if bridgeport.Created(nil, createErr) {
		undo.Push(func() error { return removeLink(args.Netns, args.IfName) })
	}
	if err != nil {
		return nil, err
	}
	res.Interfaces = []*current.Interface{{Name: args.IfName, Sandbox: args.Netns}}
	for _, ipc := range res.IPs {
		ipc.Interface = current.Int(0)
	}
	return res, nil
}

func create(c *netconf.VLAN, args *skel.CmdArgs, m netlink.Link) error {
	spec := link.VLANSpec{Name: args.IfName, ParentIndex: m.Attrs().Index, VLANID: c.VLANID, MTU: c.MTU, TargetNSFd: -1}
	if c.LinkInContainer {
		return netns.Do(args.Netns, func() error { return link.CreateVLAN(spec) })
	}
	pod, err := netns.Open(args.Netns)
	if err != nil {
		return err
	}
	defer pod.Close()
	spec.TargetNSFd = int(pod.Fd())
	return link.CreateVLAN(spec)
}

// configure brings the link up with its addresses and routes and records
// its MAC in the result.
func configure(args *skel.CmdArgs, res *current.Result) error {
	return netns.Do(args.Netns, func() error {
		if len(res.IPs) > 0 {
			if err := ipam.ConfigureIface(args.IfName, res); err != nil {
				return err
			}
		}
		l, err := link.ByName(args.IfName)
		if err != nil {
			return err
		}
		res.Interfaces[0].Mac = l.Attrs().HardwareAddr.String()
		return link.Up(l)
	})
}
