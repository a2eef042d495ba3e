// Package vlan is netclass-vlan: an 802.1Q sub-interface of master in the
// pod, created directly in the pod's namespace (or, with linkInContainer,
// from a master that is itself in the pod), with the qos block applied.
// Options follow the upstream vlan plugin.
package vlan

import (
	"context"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/kernel/netns"
)

// Funcs are the plugin's CNI verbs, for skel.
func Funcs() skel.CNIFuncs {
	return skel.CNIFuncs{Add: cmdAdd, Del: cmdDel, Check: cmdCheck, GC: cmdGC, Status: cmdStatus}
}

func store(c *netconf.VLAN) attach.Store { return attach.Store{Dir: c.DataDir} }

func ipamOf(c *netconf.VLAN) attach.IPAM { return attach.IPAM{Type: c.IPAM.Type, Conf: c.Raw} }

// master finds the parent link: on the host, or in the pod with
// linkInContainer. A missing master or an MTU above the master's is a
// configuration error naming the field.
func master(c *netconf.VLAN, podNS string) (netlink.Link, error) {
	var m netlink.Link
	find := func() (err error) { m, err = link.ByName(c.Master); return err }
	var err error
	if c.LinkInContainer {
		err = netns.Do(podNS, find)
	} else {
		err = find()
	}
	if err != nil {
		return nil, attach.Invalid("master: %v", err)
	}
	if c.MTU > m.Attrs().MTU {
		return nil, attach.Invalid("mtu: %d exceeds the MTU of master %q (%d)", c.MTU, c.Master, m.Attrs().MTU)
	}
	return m, nil
}

func cmdStatus(args *skel.CmdArgs) error {
	c, err := netconf.ParseVLAN(args.StdinData)
	if err != nil {
		return err
	}
	if !c.LinkInContainer { // a master inside pods cannot be checked here
		if _, err := master(c, ""); err != nil {
			return attach.Unavailable(err)
		}
	}
	if err := ipamOf(c).Status(context.Background()); err != nil {
		return attach.Unavailable(err)
	}
	return nil
}
