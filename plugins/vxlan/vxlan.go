// Package vxlan is netclass-vxlan: per VNI, one VXLAN device and one bridge
// on the host, shared by every pod of the VNI on that host and joined to it
// with veths. Unicast remotes get static all-zeros flood entries; a
// multicast group floods through the underlay instead. The shared devices
// (package vni) are created by the first attachment and removed with the
// last, under a per-VNI lock so concurrent ADDs and DELs never race — unless
// netclass-dra manages them, which then decides their lifetime.
package vxlan

import (
	"context"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/vxlan/vni"
)

// Funcs are the plugin's CNI verbs, for skel.
func Funcs() skel.CNIFuncs {
	return skel.CNIFuncs{Add: cmdAdd, Del: cmdDel, Check: cmdCheck, GC: cmdGC, Status: cmdStatus}
}

func store(c *netconf.VXLAN) attach.Store { return attach.Store{Dir: c.DataDir} }

func ipamOf(c *netconf.VXLAN) attach.IPAM { return attach.IPAM{Type: c.IPAM.Type, Conf: c.Raw} }

func cmdStatus(args *skel.CmdArgs) error {
	c, err := netconf.ParseVXLAN(args.StdinData)
	if err != nil {
		return err
	}
	if _, err := vni.ResolveUnderlay(c); err != nil {
		return attach.Unavailable(err)
	}
	if err := ipamOf(c).Status(context.Background()); err != nil {
		return attach.Unavailable(err)
	}
	return nil
}
