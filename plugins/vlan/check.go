package vlan

import (
	"context"
	"fmt"

	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ip"
	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/kernel/netns"
	"github.com/netclass-dev/netclass/plugins/qosport"
)

// cmdCheck verifies the VLAN link (id, MAC, state), its addresses and
// routes, its QoS and IPAM's allocation against prevResult.
func cmdCheck(args *skel.CmdArgs) error {
	c, err := netconf.ParseVLAN(args.StdinData)
	if err != nil {
		return err
	}
	prev, err := attach.BeginCheck(context.Background(), c.CNIVersion, c.RawPrevResult, args.Netns, ipamOf(c))
	if err != nil {
		return err
	}
	if err := checkLink(c, args, prev); err != nil {
		return attach.Internal(fmt.Errorf("check %q in %s: %w", args.IfName, args.Netns, err), nil)
	}
	if c.EffectiveQoS != nil {
		if err := qosport.Check(qosport.Attachment{PodNS: args.Netns, IfName: args.IfName}, qos.Compile(c.EffectiveQoS)); err != nil {
			return attach.Internal(fmt.Errorf("qos of %q: %w", args.IfName, err), nil)
		}
	}
	return nil
}

func checkLink(c *netconf.VLAN, args *skel.CmdArgs, prev *current.Result) error {
	var want *current.Interface
	for _, i := range prev.Interfaces {
		if i.Name == args.IfName && i.Sandbox != "" {
			want = i
		}
	}
	if want == nil {
		return fmt.Errorf("prevResult has no interface %q in a sandbox", args.IfName)
	}
	return netns.Do(args.Netns, func() error {
		l, err := link.ByName(args.IfName)
		if err != nil {
			return err
		}
		v, ok := l.(*netlink.Vlan)
		switch {
		case !ok:
			return fmt.Errorf("%q is a %s, not a vlan", args.IfName, l.Type())
		case v.VlanId != c.VLANID:
			return fmt.Errorf("%q has VLAN id %d, want %d", args.IfName, v.VlanId, c.VLANID)
		case want.Mac != "" && l.Attrs().HardwareAddr.String() != want.Mac:
			return fmt.Errorf("%q has MAC %s, want %s", args.IfName, l.Attrs().HardwareAddr, want.Mac)
		case l.Attrs().Flags&1 == 0:
			return fmt.Errorf("%q is down", args.IfName)
		}
		if err := ip.ValidateExpectedInterfaceIPs(args.IfName, prev.IPs); err != nil {
			return err
		}
		return ip.ValidateExpectedRoute(prev.Routes)
	})
}
