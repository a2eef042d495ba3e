package vxlan

import (
	"context"
	"fmt"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/bridgeport"
	"github.com/netclass-dev/netclass/plugins/bwshare"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/portguard"
	"github.com/netclass-dev/netclass/plugins/qosport"
	"github.com/netclass-dev/netclass/plugins/vxlan/vni"
)

func cmdCheck(args *skel.CmdArgs) error {
	c, err := netconf.ParseVXLAN(args.StdinData)
	if err != nil {
		return err
	}
	prev, err := attach.BeginCheck(context.Background(), c.CNIVersion, c.RawPrevResult, args.Netns, ipamOf(c))
	if err != nil {
		return err
	}
	if err := checkShared(c); err != nil {
		return attach.Internal(err, nil)
	}
	p := bridgeport.Port{ContainerID: args.ContainerID, NetNS: args.Netns, IfName: args.IfName}
	br, err := link.ByName(c.BridgeName())
	if err != nil {
		return attach.Internal(err, nil)
	}
	p.BridgeIndex = br.Attrs().Index
	if err := p.Check(prev); err != nil {
		return attach.Internal(err, nil)
	}
	if err := portguard.Check(c.PortSecurity, portguard.Port{PodNS: args.Netns, IfName: args.IfName, HostIf: p.HostName()}, prev); err != nil {
		return attach.Internal(fmt.Errorf("port security of %q: %w", args.IfName, err), nil)
	}
	if s := c.BandwidthShare; s != nil && s.Guarantee > 0 {
		if err := underLock(c, func() error { return bwshare.Check(c.DataDir, c.DeviceName(), p.HostName()) }); err != nil {
			return attach.Internal(fmt.Errorf("bandwidth share of %q: %w", args.IfName, err), nil)
		}
	}
	if c.EffectiveQoS != nil {
		a := qosport.Attachment{PodNS: args.Netns, IfName: args.IfName, HostIf: p.HostName()}
		if err := qosport.Check(a, qos.Compile(c.EffectiveQoS)); err != nil {
			return attach.Internal(fmt.Errorf("qos of %q: %w", args.IfName, err), nil)
		}
	}
	return nil
}

// checkShared verifies the VNI's shared devices.
func checkShared(c *netconf.VXLAN) error {
	u, err := vni.ResolveUnderlay(c)
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
	if err := link.CheckVXLAN(u.Spec(c, br.Attrs().Index), c.RemoteIPs); err != nil {
		return err
	}
	return vni.CheckTunnelECN(c)
}
