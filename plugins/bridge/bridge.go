// Package bridge is netclass-bridge: pods joined to a Linux bridge by veth
// pairs, with the qos block applied to every attachment. Options follow the
// upstream bridge plugin.
package bridge

import (
	"context"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/bridgeport"
)

// Funcs are the plugin's CNI verbs, for skel.
func Funcs() skel.CNIFuncs {
	return skel.CNIFuncs{Add: cmdAdd, Del: cmdDel, Check: cmdCheck, GC: cmdGC, Status: cmdStatus}
}

func store(c *netconf.Bridge) attach.Store { return attach.Store{Dir: c.DataDir} }

func ipamOf(c *netconf.Bridge) attach.IPAM { return attach.IPAM{Type: c.IPAM.Type, Conf: c.Raw} }

func port(c *netconf.Bridge, args *skel.CmdArgs, bridgeIndex int) bridgeport.Port {
	return bridgeport.Port{
		ContainerID: args.ContainerID, NetNS: args.Netns, IfName: args.IfName,
		BridgeIndex: bridgeIndex, MTU: c.MTU, Hairpin: c.HairpinMode,
	}
}

func cmdStatus(args *skel.CmdArgs) error {
	c, err := netconf.ParseBridge(args.StdinData)
	if err != nil {
		return err
	}
	if err := ipamOf(c).Status(context.Background()); err != nil {
		return attach.Unavailable(err)
	}
	return nil
}
