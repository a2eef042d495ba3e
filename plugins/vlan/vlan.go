// Package vlan is netclass-vlan: pods join an 802.1Q VLAN of master
// through the VLAN's bridge on the host, whose uplink is master's
// sub-interface for the VLAN (one per VLAN and master on a node, shared by
// every pod of the VLAN there: plugins/vlan/trunk); or, with
// linkInContainer, through a sub-interface of a master that is itself in
// the pod. The qos block is applied. Options follow the upstream vlan plugin.
package vlan

import (
	"context"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/vlan/trunk"
)

// Funcs are the plugin's CNI verbs, for skel.
func Funcs() skel.CNIFuncs {
	return skel.CNIFuncs{Add: cmdAdd, Del: cmdDel, Check: cmdCheck, GC: cmdGC, Status: cmdStatus}
}

func store(c *netconf.VLAN) attach.Store { return attach.Store{Dir: c.DataDir} }

func ipamOf(c *netconf.VLAN) attach.IPAM { return attach.IPAM{Type: c.IPAM.Type, Conf: c.Raw} }

func cmdStatus(args *skel.CmdArgs) error {
	c, err := netconf.ParseVLAN(args.StdinData)
	if err != nil {
		return err
	}
	if !c.LinkInContainer { // a master inside pods cannot be checked here
		if _, err := trunk.Resolve(c); err != nil {
			return attach.Unavailable(err)
		}
	}
	if err := ipamOf(c).Status(context.Background()); err != nil {
		return attach.Unavailable(err)
	}
	return nil
}
